#!/usr/bin/env bash
# Cost of one sync-op scheduling point, and what the points cost a hunt,
# on a mutex-heavy guest (bench/mutex4.c: 4 threads, 100 000 lock/unlock
# pairs, mostly uncontended) and on a small racy one
# (testdata/disc_check_act_mutex.c).
#   bench/syncpoints.sh [RUNS]   (runs per configuration, default 10)
# Prints: µs per sync point (wall with points minus wall without, over the
# points made, same policy and seeds), and hunt runs/s with points on/off.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-10}
./scripts/build.sh
D=$PWD/target/release/detrun
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcc -O1 -pthread -o "$work/mutex4" bench/mutex4.c
gcc -O1 -pthread -o "$work/cta" testdata/disc_check_act_mutex.c

# wall NAME FLAGS...: total wall ms of n seeds, and sync points summed
wall() {
  local bin=$1 t0 t1 pts=0
  shift
  t0=$(date +%s%N)
  for s in $(seq 1 "$n"); do
    "$D" --seed "$s" --summary-json "$work/r.json" "$@" -- "$bin" >/dev/null 2>&1 || true
    p=$(python3 -c "import json; print(json.load(open('$work/r.json')).get('sync_points', 0))")
    pts=$((pts + p))
  done
  t1=$(date +%s%N)
  echo "$(( (t1 - t0) / 1000000 )) $pts"
}

for pol in "--pct=2 --pct-insns=0" "--chaos --chaos-insns=0"; do
  # shellcheck disable=SC2086
  read -r off _ < <(wall "$work/mutex4" $pol --sync-points=off)
  # shellcheck disable=SC2086
  read -r on pts < <(wall "$work/mutex4" $pol --sync-points=on)
  python3 -c "
on, off, pts, n = $on, $off, $pts, $n
print(f'mutex4 {\"$pol\":<26} points off {off/n:7.1f} ms/run, on {on/n:7.1f} ms/run, '
      f'{pts//n} points/run: {1000*(on-off)/max(pts,1):.1f} us per sync point')"
done

runs=$((n * 20))
for bin in cta mutex4; do
  for sp in on off; do
    r=$("$D" hunt --runs "$runs" --no-progress --sync-points=$sp --report "$work/h.json" -- "$work/$bin" >/dev/null 2>&1 || true
        python3 -c "import json; r=json.load(open('$work/h.json')); print(f\"{r['runs_per_sec']:.1f} runs/s, {r['failures']} of {r['runs']} failed\")")
    echo "hunt $bin --sync-points=$sp: $r"
  done
done
