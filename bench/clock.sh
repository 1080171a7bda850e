#!/usr/bin/env bash
# Cost of one clock_gettime under detrun: the time fast path (answered in
# the tracee) against every call trapped (--no-fast-time) and native.
# Prints ns per call from the difference of a long and an empty loop.
# Usage: bench/clock.sh [CALLS]   (default 10000000; trapped uses CALLS/100)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-10000000}
./scripts/build.sh
D=$PWD/target/release/detrun
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcc -O2 -pthread -o "$work/ft" testdata/fast_time.c
now() { date +%s%N; }
per_call() { # per_call CALLS CMD...: ns per call over an empty run
  local calls=$1; shift
  local t0 t1 t2
  t0=$(now); "$@" loop 0 > /dev/null; t1=$(now); "$@" loop "$calls" > /dev/null; t2=$(now)
  echo "scale=1; (($t2 - $t1) - ($t1 - $t0)) / $calls" | bc
}
printf 'native             %8s ns/call\n' "$(per_call "$n" "$work/ft")"
printf 'detrun (fast path) %8s ns/call\n' "$(per_call "$n" "$D" -- "$work/ft")"
printf 'detrun (trapped)   %8s ns/call\n' "$(per_call $((n / 100)) "$D" --no-fast-time -- "$work/ft")"
