#!/usr/bin/env bash
# Wall-time medians of workloads natively, under `strace -f -o /dev/null`
# and under detrun, alternating, and the ratios detrun/native and
# detrun/strace. Usage: bench/compare.sh [RUNS]   (default 5; workloads
# under 50 ms get ten times as many)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
./scripts/build.sh
D=$PWD/target/release/detrun
syscalls_n=1000000
. bench/workloads.sh
# Microseconds from bash's own clock: no process per reading (a `date`
# would add ~1 ms of fork and exec to every sample).
timed() {
  local f=$1 t; shift
  t=${EPOCHREALTIME/[.,]/}
  "$@" > /dev/null 2>&1 || true
  echo $(( ${EPOCHREALTIME/[.,]/} - t )) >> "$f"
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

printf '%-58s %9s %9s %9s %8s %8s\n' workload native_ms strace_ms detrun_ms det/nat det/str
for w in "${workloads[@]}"; do
  : > "$work/n"; : > "$work/s"; : > "$work/d"
  # Workloads of a few milliseconds swing with the VM's noise: ten times
  # the samples (a second at most).
  timed "$work/w" "$D" -- sh -c "$w"
  reps=$runs
  [ "$(tail -1 "$work/w")" -lt 50000 ] && reps=$((runs * 10))
  for _ in $(seq "$reps"); do
    timed "$work/n" sh -c "$w"
    timed "$work/s" strace -f -o /dev/null sh -c "$w"
    timed "$work/d" "$D" -- sh -c "$w"
  done
  n=$(median < "$work/n"); s=$(median < "$work/s"); d=$(median < "$work/d")
  printf '%-58s %9.1f %9.1f %9.1f %8.2f %8.2f\n' "${w:0:58}" "$(echo "$n/1000" | bc -l)" "$(echo "$s/1000" | bc -l)" "$(echo "$d/1000" | bc -l)" "$(echo "$d/$n" | bc -l)" "$(echo "$d/$s" | bc -l)"
done

# The floor: a minimal tracer that emulates only the same syscall.
gcc -O2 -o "$work/floor" bench/floor.c
: > "$work/f"; : > "$work/d"
for _ in $(seq "$runs"); do
  timed "$work/f" "$work/floor" 1000000
  timed "$work/d" "$D" -- "$work/syscalls" 1000000
done
f=$(median < "$work/f"); d=$(median < "$work/d")
printf '\nper trapped syscall: floor %.2f us, detrun %.2f us, detrun/floor %.2f\n' \
  "$(echo "$f/1000000" | bc -l)" "$(echo "$d/1000000" | bc -l)" "$(echo "$d/$f" | bc -l)"
# Peak memory of the supervisor (its own maximum RSS, not the guest's).
for w in "ls -la /usr/bin" "$py -c 'import json, email, http.client'" "$work/tcp stream 64"; do
  "$D" --summary-json "$work/s.json" -- sh -c "$w" > /dev/null 2>&1 || true
  printf 'supervisor peak RSS %6s kB  %s\n' "$(python3 -c "import json; print(json.load(open('$work/s.json')).get('supervisor_max_rss_kb', '?'))")" "${w:0:50}"
done
