#!/usr/bin/env bash
# Two detrun builds on the same workloads in one batch, interleaved (A, B,
# A, B...), so load and frequency drift hit both alike: medians and the
# ratio B/A. For "no slowdown beyond noise" checks of a refactor.
# Usage: bench/ab.sh OLD_DETRUN NEW_DETRUN [RUNS]   (default 11)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: $0 OLD_DETRUN NEW_DETRUN [RUNS]" >&2; exit 2; }
A=$(realpath "$1") B=$(realpath "$2") runs=${3:-11}
syscalls_n=200000
. bench/workloads.sh
us() { local t=${EPOCHREALTIME/[.,]/}; "$@" > /dev/null 2>&1 || true; echo $(( ${EPOCHREALTIME/[.,]/} - t )); }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf '%-52s %10s %10s %7s\n' workload "A ms" "B ms" "B/A"
for w in "${workloads[@]}"; do
  : > "$work/a"; : > "$work/b"
  for _ in $(seq "$runs"); do
    us bash -c "\"$A\" -- $w" >> "$work/a"
    us bash -c "\"$B\" -- $w" >> "$work/b"
  done
  a=$(median < "$work/a") b=$(median < "$work/b")
  printf '%-52s %10.1f %10.1f %7.3f\n' "${w:0:52}" "$(echo "$a/1000" | bc -l)" "$(echo "$b/1000" | bc -l)" "$(echo "$b/$a" | bc -l)"
done
