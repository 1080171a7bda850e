#!/usr/bin/env bash
# The discovery table of issue 17: for each guest class in testdata/disc_*.c,
# `detrun hunt --runs N [FLAGS]` (default options unless FLAGS are given):
# failing seeds of N, and hunt's runs per second.
#   bench/classes.sh [-n RUNS] [-j JOBS] [-- HUNT_FLAGS...]
# Example: bench/classes.sh -n 1000
set -euo pipefail
cd "$(dirname "$0")/.."
runs=1000
jobs=2
while [ $# -gt 0 ]; do
    case "$1" in
    -n) runs=$2; shift 2 ;;
    -j) jobs=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "usage: $0 [-n RUNS] [-j JOBS] [-- HUNT_FLAGS...]" >&2; exit 2 ;;
    esac
done
det=${DETRUN:-target/release/detrun}
[ -x "$det" ] || ./scripts/build.sh
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
classes=(check_act_mutex check_act_getppid thread_start reorder wrong_lock two_stage
    lock_order missing_barrier lost_wakeup ws_deque aba token_ring hundred spinlock)
printf '%-20s %10s %9s  %s\n' class failing runs/s "first failure"
for c in "${classes[@]}"; do
    src=testdata/disc_$c.c
    [ -f "$src" ] || continue
    gcc -O1 -g -Wall -pthread -o "$out/$c" "$src"
    rep="$out/$c.json"
    "$det" hunt --runs "$runs" -j "$jobs" --no-progress --report "$rep" "$@" -- "$out/$c" \
        >"$out/$c.txt" 2>&1 || true
    python3 - "$rep" "$c" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"{sys.argv[2]:<20} {'?':>10} {'?':>9}  no report ({e})")
    sys.exit()
fails = r.get("failures", 0)
rps = r.get("runs_per_sec", 0)
first = ""
for g in r.get("groups", []):
    first = (g.get("signature") or "")[:40]
    break
print(f"{sys.argv[2]:<20} {fails:>5}/{r.get('runs', 0):<4} {rps:>9.1f}  {first}")
PY
done
