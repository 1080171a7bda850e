#!/usr/bin/env bash
# Cost of one stat call under detrun: answered in the tracee at a patched
# call site (the stat fast path) against every call trapped
# (--no-fast-stat) and native. Prints µs per call from the difference of a
# long and a short run.
# Usage: bench/stat.sh [CALLS]   (default 200000; trapped uses CALLS/10)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-200000}
./scripts/build.sh
D=$PWD/target/release/detrun
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/s.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 0, ok = 0;
    struct stat s;
    for (long i = 0; i < n; i++) ok += stat("/etc/passwd", &s) == 0;
    printf("%ld\n", ok);
    return 0;
}
C
gcc -O2 -o "$work/s" "$work/s.c"
now() { date +%s%N; }
per_call() { # per_call CALLS CMD...: µs per call over a 10-call run
  local calls=$1; shift
  local t0 t1 t2
  t0=$(now); "$@" 10 > /dev/null; t1=$(now); "$@" "$calls" > /dev/null; t2=$(now)
  echo "scale=2; (($t2 - $t1) - ($t1 - $t0)) / ($calls - 10) / 1000" | bc
}
printf 'native             %8s us/call\n' "$(per_call "$n" "$work/s")"
printf 'detrun (fast path) %8s us/call\n' "$(per_call "$n" "$D" -- "$work/s")"
printf 'detrun (trapped)   %8s us/call\n' "$(per_call $((n / 10)) "$D" --no-fast-stat -- "$work/s")"
