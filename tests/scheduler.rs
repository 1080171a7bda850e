//! Scheduler tests: threads of all processes run one at a time and switch
//! only at intercepted syscalls (or on the watchdog), so racy programs give
//! one answer per seed; `--chaos` / `--pct` explore other interleavings;
//! deadlocks are reported; real runtimes (CPython, Node/libuv, tokio, Go)
//! are reproducible.

use detrun_tests::*;
use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn total_of(o: &Output) -> u64 {
    let out = stdout(o);
    out.lines()
        .find_map(|l| l.strip_prefix("total: "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no `total: N` line in:\n{out}\n--- stderr\n{}", stderr(o)))
}

// ---------------------------------------------------------------- counter

fn counter_default_policy() {
    let bin = build_c("sched_counter", false);
    let bin = bin.to_str().unwrap();
    let first = same_runs(10, &["--seed", "3", "--", bin], "sched_counter --seed 3");
    let t = total_of(&first);
    assert!(
        (2000..=8000).contains(&t),
        "4 x 2000 increments cannot total {t}"
    );
}

/// (1a) The default policy: one seed, one total, ten times.
#[test]
fn counter_is_deterministic_under_default_policy() {
    counter_default_policy();
}

/// (1b) Chaos scheduling explores different interleavings of the racy window.
#[test]
fn counter_totals_vary_under_chaos() {
    let bin = build_c("sched_counter", false);
    let bin = bin.to_str().unwrap();
    let mut totals = BTreeMap::new();
    for seed in 1..=20u32 {
        let s = seed.to_string();
        let o = detrun(&["--chaos", "--seed", &s, "--", bin]);
        assert_eq!(code(&o), 0, "chaos seed {seed}: {}", stderr(&o));
        *totals.entry(total_of(&o)).or_insert(0u32) += 1;
    }
    eprintln!("counter totals under --chaos seeds 1..=20: {totals:?}");
    assert!(
        totals.len() >= 2,
        "--chaos with 20 seeds gave only one total: {totals:?}"
    );
    // A chaotic schedule is still a reproducible one.
    let a = detrun(&["--chaos", "--seed", "7", "--", bin]);
    let b = detrun(&["--chaos", "--seed", "7", "--", bin]);
    assert_same(&a, &b, "sched_counter --chaos --seed 7");
}

// --------------------------------------------------------------- prodcons

/// The consumption log is well formed: 100 `C<k> got P<id>#<n>` lines, each
/// item exactly once, each producer's items in order, then `consumed: 100`.
fn check_prodcons_log(o: &Output, what: &str) {
    let out = stdout(o);
    assert_eq!(
        code(o),
        0,
        "{what}: exit {}:\n{out}\n--- stderr\n{}",
        code(o),
        stderr(o)
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines.last().copied(),
        Some("consumed: 100"),
        "{what}: no final `consumed: 100`:\n{out}"
    );
    let mut seen = BTreeSet::new();
    let mut next = [0u32; 2];
    for l in &lines[..lines.len() - 1] {
        let parse = || -> Option<(u32, u32, u32)> {
            let rest = l.strip_prefix('C')?;
            let (k, rest) = rest.split_once(" got P")?;
            let (id, n) = rest.split_once('#')?;
            Some((k.parse().ok()?, id.parse().ok()?, n.parse().ok()?))
        };
        let (k, id, n) = parse().unwrap_or_else(|| panic!("{what}: bad log line {l:?}"));
        assert!(k < 2 && id < 2 && n < 50, "{what}: bad log line {l:?}");
        assert!(seen.insert((id, n)), "{what}: P{id}#{n} consumed twice");
        // One queue, FIFO: a producer's items come out in the order made.
        assert_eq!(n, next[id as usize], "{what}: P{id} out of order at {l:?}");
        next[id as usize] += 1;
    }
    assert_eq!(seen.len(), 100, "{what}: {} items consumed", seen.len());
}

fn prodcons_deterministic() {
    let bin = build_c("sched_prodcons", false);
    let bin = bin.to_str().unwrap();
    let first = same_runs(10, &["--seed", "5", "--", bin], "sched_prodcons --seed 5");
    check_prodcons_log(&first, "sched_prodcons --seed 5");
}

/// (2a) Ten runs with one seed: byte-identical consumption logs.
#[test]
fn prodcons_log_is_deterministic() {
    prodcons_deterministic();
}

/// Run prodcons under a scheduling policy for seeds 1..=50: every run must
/// complete correctly; returns the number of distinct logs.
fn prodcons_policy(policy: &str) -> usize {
    let bin = build_c("sched_prodcons", false);
    let bin = bin.to_str().unwrap();
    let mut logs = BTreeSet::new();
    for seed in 1..=50u32 {
        let s = seed.to_string();
        let o = detrun(&[policy, "--seed", &s, "--", bin]);
        check_prodcons_log(&o, &format!("sched_prodcons {policy} --seed {seed}"));
        logs.insert(o.stdout);
    }
    eprintln!(
        "sched_prodcons {policy}: {} distinct logs in 50 seeds",
        logs.len()
    );
    logs.len()
}

/// (2b) Chaos schedules: all 50 complete with every item consumed once.
#[test]
fn prodcons_completes_under_chaos() {
    prodcons_policy("--chaos");
}

/// (2c) PCT schedules (fails until `--pct` exists).
#[test]
fn prodcons_completes_under_pct() {
    let help = stdout(&detrun(&["--help"]));
    assert!(
        help.contains("--pct"),
        "`detrun --help` does not list --pct: the PCT policy is not implemented yet"
    );
    prodcons_policy("--pct");
}

/// (2d) PCT draws its thread priorities from the seed, so different seeds
/// give different schedules (here: consumption logs).
#[test]
fn pct_schedules_depend_on_the_seed() {
    let bin = build_c("sched_prodcons", false);
    let bin = bin.to_str().unwrap();
    let mut logs = BTreeSet::new();
    for seed in 1..=20u32 {
        let s = seed.to_string();
        let o = detrun(&["--pct", "--seed", &s, "--", bin]);
        assert_eq!(code(&o), 0, "--pct --seed {seed}: {}", stderr(&o));
        logs.insert(o.stdout);
    }
    assert!(
        logs.len() >= 2,
        "--pct gave one and the same consumption log for seeds 1..=20"
    );
}

// --------------------------------------------------------------- deadlock

/// (3) A lock-order inversion is reported as a deadlock (exit 123), quickly,
/// naming the threads blocked in futex.
#[test]
fn lock_order_inversion_is_a_reported_deadlock() {
    let bin = build_c("sched_deadlock", false);
    let mut cmd = Command::new(detrun_bin());
    cmd.arg("--").arg(&bin).current_dir(root());
    let t0 = Instant::now();
    // Bounded well below RUN_LIMIT: a missed deadlock must not stall the suite.
    let o = run_bounded(cmd, Duration::from_secs(20));
    let wall = t0.elapsed();
    let err = stderr(&o);
    eprintln!("sched_deadlock: exit {} in {wall:?}", code(&o));
    assert_eq!(
        code(&o),
        123,
        "expected the deadlock exit status:\n--- stdout\n{}\n--- stderr\n{err}",
        stdout(&o)
    );
    assert!(
        wall < Duration::from_secs(5),
        "deadlock detection took {wall:?} (limit 5 s)"
    );
    assert!(
        err.contains("deadlock"),
        "stderr does not say deadlock:\n{err}"
    );
    let futex_lines = err.lines().filter(|l| l.contains("futex")).count();
    assert!(
        futex_lines >= 2,
        "both blocked threads' futex calls must be named, got {futex_lines} line(s):\n{err}"
    );
    assert!(
        !stdout(&o).contains("got both"),
        "a thread took both locks, so there was no inversion:\n{}",
        stdout(&o)
    );
}

// ------------------------------------------------------------------- spin

/// (4) A thread spinning without syscalls is preempted so that the thread
/// that sets its flag gets to run: by a spin probe, at a point that is the
/// same in every run (no hazard); with `--no-spin-points`, by the
/// wall-clock watchdog, which the summary reports as a hazard.
#[test]
fn syscall_free_spin_is_preempted_by_the_watchdog() {
    let bin = build_c("sched_spin", false);
    for (flags, probe) in [(&[][..], true), (&["--no-spin-points"][..], false)] {
        let mut cmd = Command::new(detrun_bin());
        cmd.arg("--summary")
            .args(flags)
            .arg("--")
            .arg(&bin)
            .current_dir(root());
        let t0 = Instant::now();
        let o = run_bounded(cmd, Duration::from_secs(30));
        eprintln!(
            "sched_spin {flags:?}: exit {} in {:?}",
            code(&o),
            t0.elapsed()
        );
        let err = stderr(&o);
        assert_eq!(
            code(&o),
            0,
            "sched_spin {flags:?} failed:\n{}\n--- stderr\n{err}",
            stdout(&o)
        );
        assert!(stdout(&o).contains("flag seen"), "{}", stdout(&o));
        if probe {
            assert!(
                err.contains("spin points") && !err.contains("watchdog"),
                "the spin must be preempted by a probe, with no watchdog hazard:\n{err}"
            );
        } else {
            assert!(
                err.contains("watchdog"),
                "the summary must mention the watchdog preemption:\n{err}"
            );
        }
    }
}

// ------------------------------------------------------------------ pipes

/// (5a) Three forked writers on one pipe, reaped with wait(): identical
/// within a seed; the output is complete and each child's lines in order.
#[test]
fn forked_pipe_writers_are_deterministic() {
    let bin = build_c("sched_pipes", false);
    let bin = bin.to_str().unwrap();
    for seed in ["1", "2"] {
        let what = format!("sched_pipes --seed {seed}");
        let o = same_runs(10, &["--seed", seed, "--", bin], &what);
        let out = stdout(&o);
        let mut next = [0u32; 3];
        let mut reaped = Vec::new();
        for l in out.lines() {
            if let Some(rest) = l.strip_prefix("child ") {
                let (k, j) = rest
                    .split_once(" line ")
                    .unwrap_or_else(|| panic!("{what}: bad line {l:?}"));
                let (k, j): (usize, u32) = (k.parse().unwrap(), j.parse().unwrap());
                assert_eq!(j, next[k], "{what}: child {k} lines out of order");
                next[k] += 1;
            } else if let Some(rest) = l.strip_prefix("reaped child ") {
                let (k, s) = rest.split_once(" status ").unwrap();
                assert_eq!(k, s, "{what}: child {k} exits with status {k}: {l:?}");
                reaped.push(k.to_string());
            } else {
                panic!("{what}: unexpected line {l:?}");
            }
        }
        assert_eq!(next, [20; 3], "{what}: lines missing:\n{out}");
        reaped.sort();
        assert_eq!(reaped, ["0", "1", "2"], "{what}: children reaped:\n{out}");
    }
}

/// (5b) A shell pipeline of several processes.
#[test]
fn shell_pipeline_is_deterministic() {
    let script = "seq 1 300 | sort -rn | head -5; echo a b c | tr a-z A-Z | rev";
    let o = same_runs(10, &["--", "sh", "-c", script], "shell pipeline");
    assert_eq!(stdout(&o), "300\n299\n298\n297\n296\nC B A\n");
}

// --------------------------------------------------------------- runtimes

/// (6a) CPython threads contending on a Lock, with random and time.
#[test]
fn python_threads_are_deterministic() {
    let py = r#"
import threading, random, time
lock = threading.Lock()
log = []
def work(k):
    for i in range(50):
        with lock:
            log.append((k, i, random.randint(0, 999)))
        if i % 10 == 0:
            time.sleep(0.001)
ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
for t in ts: t.start()
for t in ts: t.join()
print("items", len(log))
print("order", " ".join("%d.%d" % (k, i) for k, i, _ in log))
print("values", sum(v * (n + 1) for n, (_, _, v) in enumerate(log)))
print("time", time.time(), "random", random.random())
"#;
    let o = same_runs(
        5,
        &["--seed", "4", "--", "python3", "-c", py],
        "python threads",
    );
    let out = stdout(&o);
    assert!(out.contains("items 200"), "{out}");
    assert!(
        out.contains("time 1704067"),
        "virtual time expected:\n{out}"
    );
}

/// (6b) Node: pbkdf2 callbacks completing on the libuv thread pool, and a
/// worker_threads Worker posting a message.
#[test]
fn node_thread_pool_and_worker_are_deterministic() {
    let js = r#"
const crypto = require('crypto');
const { Worker } = require('worker_threads');
const order = [];
let pending = 7;
function done() {
  if (--pending === 0) {
    console.log('order ' + order.join(','));
    console.log('now ' + Date.now() + ' random ' + Math.random());
  }
}
for (let i = 0; i < 6; i++) {
  crypto.pbkdf2('pw' + i, 'salt', 2000, 16, 'sha256', (err, key) => {
    if (err) throw err;
    order.push('k' + i + ':' + key.toString('hex').slice(0, 8));
    done();
  });
}
const w = new Worker("require('worker_threads').parentPort.postMessage('hi ' + 6 * 7)", { eval: true });
w.on('message', (m) => { order.push('w:' + m); done(); });
"#;
    let o = same_runs(5, &["--seed", "4", "--", "node", "-e", js], "node");
    let out = stdout(&o);
    assert!(
        out.contains("w:hi 42"),
        "the worker's message is missing:\n{out}"
    );
    assert_eq!(
        out.matches(":").count(),
        7,
        "6 pbkdf2 results + 1 message:\n{out}"
    );
    assert!(out.contains("now 1704067"), "virtual time expected:\n{out}");
}

/// (6c) A multi-threaded tokio runtime (testdata/tokio_guest).
#[test]
fn tokio_runtime_is_deterministic() {
    let bin = build_cargo_guest("tokio_guest");
    let o = same_runs(
        5,
        &["--seed", "4", "--", bin.to_str().unwrap()],
        "tokio_guest",
    );
    assert!(stdout(&o).contains("messages 160 "), "{}", stdout(&o));
}

/// (6d) The Go runtime: 50 goroutines over several Ms, timers, a channel.
#[test]
fn go_runtime_is_deterministic() {
    let bin = build_go("go_guest");
    let o = same_runs(5, &["--seed", "4", "--", bin.to_str().unwrap()], "go_guest");
    let out = stdout(&o);
    assert!(out.contains("received: 5000"), "{out}");
    assert!(
        out.contains("unix: 1704067"),
        "virtual time expected:\n{out}"
    );
}

// ------------------------------------------------------------------- load

/// (7) The determinism checks hold with a CPU hog competing for the cores.
#[test]
fn determinism_holds_under_load() {
    let _hog = Hog::start();
    counter_default_policy();
    prodcons_deterministic();
}
