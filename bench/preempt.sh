#!/usr/bin/env bash
# Cost of instruction-level preemption points, and the slowdown they bring to
# --chaos, on a CPU-bound multi-threaded guest (testdata/preempt_counter.c,
# static). Usage: bench/preempt.sh [SEEDS]  (default 30)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-30}
./scripts/build.sh
D=$PWD/target/release/detrun
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcc -O1 -static -pthread -o "$work/g" testdata/preempt_counter.c
steps=$("$D" --summary-json "$work/s.json" -- "$work/g" >/dev/null 2>&1; python3 -c "
import json; s=json.load(open('$work/s.json')); print(s['syscalls_intercepted']+s['threads'])")

# run MODE-FLAGS...: total wall ms over n seeds, and summed counters
run() {
  local t0 t1 pre=0 st=0 bp=0
  t0=$(date +%s%N)
  for s in $(seq 1 "$n"); do
    "$D" --seed "$s" --summary-json "$work/r.json" "$@" -- "$work/g" >/dev/null 2>&1 || true
    read -r a b c < <(python3 -c "
import json; s=json.load(open('$work/r.json')); print(s['insn_preemptions'], s['single_steps'], s['breakpoint_hits'])")
    pre=$((pre + a)); st=$((st + b)); bp=$((bp + c))
  done
  t1=$(date +%s%N)
  echo "$(( (t1 - t0) / 1000000 )) $pre $st $bp"
}

read -r base _ _ _ < <(run --pct --pct-steps "$steps" --pct-insns 0)
read -r ss pss sss _ < <(run --pct --pct-steps "$steps" --pct-insns 1000)
read -r bb pbb sbb hbb < <(run --pct --pct-steps "$steps" --pct-insns 1000 --breakpoints)
read -r c0 _ _ _ < <(run --chaos)
read -r c1 pc1 sc1 _ < <(run --chaos --chaos-insns 1000)

per() { python3 -c "print(f'{($1 - $2) / max($3, 1):.2f}')"; }
echo "guest: preempt_counter (2 threads x 20000 unlocked increments), $n seeds, PCT k=$steps"
echo "pct, no instruction points:     ${base} ms"
echo "pct, single-step points:        ${ss} ms, $pss points, $sss steps: $(per "$ss" "$base" "$pss") ms per point"
echo "pct, breakpoint points:         ${bb} ms, $pbb points, $sbb steps + $hbb hits: $(per "$bb" "$base" "$pbb") ms per point"
echo "chaos without points:           ${c0} ms"
echo "chaos with points (budget 1000): ${c1} ms, $pc1 points, $sc1 steps: slowdown $(python3 -c "print(f'{$c1 / max($c0, 1):.2f}x')")"
