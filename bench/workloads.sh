# The workloads of bench/compare.sh and bench/ab.sh (sourced, not run):
# sets $work (removed at exit), $py and the array `workloads`. The caller
# may set syscalls_n (the trapped-syscall loop's length).
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
head -c 2000000 /dev/urandom > "$work/data"
gcc -O2 -pthread -o "$work/mutex4" bench/mutex4.c
gcc -O2 -o "$work/syscalls" bench/syscalls.c
gcc -O2 -o "$work/tcp" bench/tcp.c
# The interpreter itself, not a version manager's shim script in front of it.
py=$(python3 -c 'import sys; print(sys.executable)')

workloads=(
  "true"
  "ls -la /usr/bin"
  "sh -c 'for i in \$(seq 200); do sh -c true; done'"
  "bzip2 -c $work/data"
  "$py -c 'import json, email, http.client'"
  "$work/mutex4"
  "$work/syscalls ${syscalls_n:-1000000}"
  "$work/tcp stream 64"
  "$work/tcp pingpong 1000"
)
