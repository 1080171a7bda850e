#!/usr/bin/env bash
# Prove that a refactor changed no behaviour: run the same 12 guests under
# two detrun binaries with one seed and compare, byte for byte, the schedule
# trace, stdout, stderr and exit status of each.
#
#   scripts/trace-compare.sh OLD_DETRUN NEW_DETRUN
#
# One line per guest (`same`, or `DIFFERENT` with the first differing line),
# then `N passed, M failed`; exit status 1 if any guest differed, 2 on a
# usage or build error. Needs gcc (with libc.a), sh, coreutils and python3.
set -uo pipefail

[ $# -eq 2 ] || { echo "usage: $0 OLD_DETRUN NEW_DETRUN" >&2; exit 2; }
old=$(realpath "$1") && new=$(realpath "$2") || exit 2
for b in "$old" "$new"; do
    [ -x "$b" ] || { echo "trace-compare: $b is not executable" >&2; exit 2; }
done
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/trace-compare.XXXXXX") || exit 2
# Kept (path on stderr) if something differed or KEEP=1, to look at.
trap '[ "${KEEP:-0}" = 1 ] && echo "outputs in $tmp" >&2 || rm -rf "$tmp"' EXIT
# run/ is every guest's working directory and holds only the guest binaries:
# outputs go elsewhere, so no run sees the files of an earlier one (python
# lists its cwd, the first entry of sys.path).
mkdir -p "$tmp/run" "$tmp/old" "$tmp/new"

# Compile as tests/lib.rs does (-O1 -g -Wall -pthread). The preempt guest is
# static like in tests/preempt.rs: PCT spreads its change points over the
# run's events and the dynamic loader's events would dilute them (the
# --pct-steps below is this static build's event count). conf_vfork is
# static too, so one static guest goes through fork/vfork/exec.
build() { # NAME [GCC FLAGS...]
    local name=$1; shift
    gcc -O1 -g -Wall -pthread "$@" -o "$tmp/run/$name" "$root/testdata/$name.c" \
        || { echo "trace-compare: gcc failed for $name" >&2; exit 2; }
}
for g in sched_counter conf_mutex conf_condvar spawn_tree conf_fork_wait \
    conf_pipeline_fork timers net_echo ckpt_procs; do
    build "$g"
done
build conf_vfork -static
build preempt_counter -static

# NAME|DETRUN ARGS (eval'd; `--seed 7 --trace FILE` are put in front, except
# for explore, which has no --trace and gets --from-seed 7 instead).
guests=(
    # Threads. sched_counter under --chaos is the hunt-like run: its total
    # (lost updates) depends on the chaos schedule of the seed.
    "sched_counter|--chaos -- ./sched_counter"
    "conf_mutex|-- ./conf_mutex"
    "conf_condvar|-- ./conf_condvar"
    # Processes: fork trees, wait, vfork+exec, pipelines.
    "spawn_tree|-- ./spawn_tree"
    "conf_fork_wait|-- ./conf_fork_wait"
    "conf_vfork|-- ./conf_vfork"
    "conf_pipeline_fork|-- ./conf_pipeline_fork"
    # Signals and timers: alarm, setitimer, timer_create (5.5 s virtual).
    "timers|-- ./timers"
    # The virtual network: TCP echo server on epoll, three forked clients.
    "net_echo|-- ./net_echo"
    # Instruction-level preemption: seed 7 with these options single-steps
    # ~200 instructions into a loop and loses 20000 updates (exit 1).
    "preempt_counter|--pct=3 --pct-steps 12 --pct-insns 200 -- ./preempt_counter"
    # Real programs: dash, ls (virtual file times), sort, head (sort gets
    # EPIPE) and CPython (virtual randomness, time, pids).
    "real_programs|-- sh -c 'ls -la /usr/bin | sort | head -5; python3 -c \"import os, random, time; print(random.random(), time.time(), os.getpid(), hash(\\\"x\\\"))\"'"
    # Checkpoints: explore forks the run at 6 checkpoints, 3 branches each.
    "explore_ckpt_procs|explore --every 10ms --branches 3 -- ./ckpt_procs"
)

# A fixed environment: bash exports `_` (the path of the command it runs,
# here the detrun binary), and a different environment moves the guest's
# stack, so every pointer in the trace would differ between two binaries
# that live at different paths. PATH avoids shims (pyenv) in the user's PATH.
envv=(PATH=/usr/bin:/bin LC_ALL=C TZ=UTC)

run() { # SIDE(old|new) BINARY NAME ARGS: outputs into $tmp/SIDE/NAME/
    local side=$1 bin=$2 name=$3 args=$4 d="$tmp/$1/$3" pre
    mkdir -p "$d"
    if [[ $args == explore* ]]; then
        # The --out path appears in results.json: the same for both sides.
        pre="explore --from-seed 7 --out $(printf %q "$tmp/explore")"
        args=${args#explore}
    else
        pre="--seed 7 --trace $(printf %q "$d/trace")"
    fi
    (cd "$tmp/run" && eval "timeout -k 5 300 env -i ${envv[*]} \"\$bin\" $pre $args" \
        </dev/null >"$d/stdout" 2>"$d/stderr")
    echo $? >"$d/exit"
    if [ -d "$tmp/explore" ]; then
        mv "$tmp/explore" "$d/explore"
        # Normalized (wall-clock, not behaviour): wall_ms in results.json
        # and explore.json, and the "N checkpoints in S s" line on stderr.
        # Schedule traces hold only virtual time ("t"): not normalized.
        sed -i -E 's/"wall_ms": [0-9]+/"wall_ms": WALL/' "$d"/explore/*.json
        sed -i -E 's/ checkpoints in [0-9.]+ s / checkpoints in WALL s /' "$d/stderr"
    fi
}

pass=0 fail=0
for entry in "${guests[@]}"; do
    name=${entry%%|*} args=${entry#*|}
    # Old then new for each guest, so host state (/usr/bin) has no time to change.
    run old "$old" "$name" "$args"
    run new "$new" "$name" "$args"
    d=$(cd "$tmp" && diff -r "old/$name" "new/$name")
    if [ -z "$d" ]; then
        printf '%-20s same\n' "$name"
        pass=$((pass + 1))
    else
        file=$(grep -m1 -E '^diff ' <<<"$d" | awk '{print $NF}')
        line=$(grep -m1 -E '^([<>] |Only in|Binary)' <<<"$d")
        printf '%-20s DIFFERENT %s: %s\n' "$name" "${file#new/}" "${line:0:200}"
        fail=$((fail + 1))
    fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] || KEEP=1
[ "$fail" -eq 0 ]
