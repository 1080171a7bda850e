#!/usr/bin/env bash
# explore from checkpoints against the same exploration by re-execution,
# on a guest with a long deterministic prefix (testdata/ckpt_late_race.c:
# PREFIX locked steps, then a short racy phase). Both must print the same
# table; the ratio is the point. Usage: bench/explore.sh [PREFIX] [BRANCHES]
# (default 2000 steps, 10 branches per checkpoint, a checkpoint every 400 ms).
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=${1:-2000}
k=${2:-10}
./scripts/build.sh
D=$PWD/target/release/detrun
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcc -O1 -pthread -o "$work/g" testdata/ckpt_late_race.c

ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
t0=$(date +%s%N)
"$D" explore --from-seed 9 --every 400ms --branches "$k" --out "$work/ck" -- "$work/g" "$prefix" >"$work/ck.txt" 2>/dev/null
ck=$(ms "$t0")
t0=$(date +%s%N)
"$D" explore --from-seed 9 --every 400ms --branches "$k" --no-checkpoints --out "$work/re" -- "$work/g" "$prefix" >"$work/re.txt" 2>/dev/null
re=$(ms "$t0")
cut -c1-50 "$work/ck.txt" >"$work/a"; cut -c1-50 "$work/re.txt" >"$work/b"
if cmp -s "$work/a" "$work/b"; then same=yes; else same=NO; fi
cat "$work/ck.txt"
echo "checkpoints: $ck ms   re-execution: $re ms   ratio $(python3 -c "print(f'{$re/$ck:.2f}')")x   same answers: $same"
