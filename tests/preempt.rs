//! Instruction-level preemption points (`--pct --pct-insns N`): races whose
//! window holds no syscall are invisible to the default schedule, to
//! `--chaos` and to plain PCT (threads switch only at intercepted events),
//! but a PCT change point that lets the running thread go on for a seeded
//! 1..=N instructions and then preempts it can split such a window.
//!
//! 1. Each `testdata/preempt_*.c` guest passes under the default schedule,
//!    a PCT hunt with an instruction budget finds a failing seed, and that
//!    seed fails on every replay.
//! 2. A single-threaded CPU-bound guest is never single-stepped (nobody to
//!    switch to).
//! 3. A bench-like test prints what single-stepping costs (no assertion on
//!    time; run with `--nocapture` to see it).

use detrun_tests::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A whole hunt of 1000 runs must fail its test, not hang the suite.
const HUNT_LIMIT: Duration = Duration::from_secs(900);

/// Hunts use every CPU (one run per CPU) and the bench measures wall time:
/// run them one at a time rather than oversubscribing the machine.
static HEAVY: Mutex<()> = Mutex::new(());

fn heavy() -> std::sync::MutexGuard<'static, ()> {
    HEAVY.lock().unwrap_or_else(|e| e.into_inner())
}

/// The instruction budget the tests use.
const INSNS: &str = "200";

/// A fresh scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    scratch_dir("preempt", name)
}

/// `detrun ARGS...` from the workspace root with a longer limit than
/// [`detrun`] (hunts run many guests).
fn detrun_long(args: &[&str]) -> Output {
    detrun_limit(args, HUNT_LIMIT)
}

fn read_json(p: &Path, what: &str) -> Value {
    let text = std::fs::read_to_string(p)
        .unwrap_or_else(|e| panic!("{what} {} was not written: {e}", p.display()));
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{what} {} is not JSON ({e}):\n{text}", p.display()))
}

// ------------------------------------------------------------ 1. the races

/// The whole story for one guest: the default schedule passes (10 times,
/// same output), a PCT hunt with an instruction budget finds a failing
/// seed, and that seed fails on each of 10 replays, for the guest's reason.
///
/// The guests are linked statically: PCT spreads its change point over the
/// run's intercepted events (hunt measures them), and the dynamic loader's
/// file lookups -- many more under `cargo test`, whose LD_LIBRARY_PATH adds
/// directories to search -- would make the one event that starts a
/// thread's racy loop a smaller share of them.
fn preempt_race(guest: &str) {
    let bin = build_c(guest, true);
    let bin = path_str(&bin);

    // The default schedule: one loop entirely before the other.
    let first = detrun(&["--", bin]);
    assert_eq!(
        code(&first),
        0,
        "{guest}: the default schedule must pass:\n{}",
        show(&first)
    );
    for i in 1..10 {
        let again = detrun(&["--", bin]);
        assert_eq!(
            code(&again),
            0,
            "{guest}: default run {i} failed:\n{}",
            show(&again)
        );
        assert_same(
            &first,
            &again,
            &format!("{guest}: default run {i} vs run 0"),
        );
    }

    // The hunt.
    let dir = scratch(guest);
    let report = dir.join("report.json");
    let o = {
        let _g = heavy();
        detrun_long(&[
            "hunt",
            "--runs",
            "1000",
            "--policy",
            "pct",
            "--pct-depth",
            "2",
            "--pct-insns",
            INSNS,
            "--no-progress",
            "--report",
            path_str(&report),
            "--",
            bin,
        ])
    };
    assert_eq!(
        code(&o),
        1,
        "{guest}: `hunt --policy pct --pct-insns {INSNS}` must exit 1 (a failing seed found):\n{}",
        show(&o)
    );
    let r = read_json(&report, "hunt report");
    let results = r["results"]
        .as_array()
        .unwrap_or_else(|| panic!("{guest}: report has no `results` array:\n{r:#}"));
    assert_eq!(results.len(), 1000, "{guest}: one result per run expected");
    let failing: Vec<&Value> = results.iter().filter(|x| x["status"] == "fail").collect();
    let first_fail = failing
        .iter()
        .min_by_key(|x| x["seed"].as_u64().unwrap_or(u64::MAX))
        .unwrap_or_else(|| panic!("{guest}: no result with status `fail` in the report:\n{r:#}"));
    let seed = first_fail["seed"]
        .as_u64()
        .unwrap_or_else(|| panic!("{guest}: failing result without an integer seed: {first_fail}"));
    assert!(
        first_fail["stderr_tail"]
            .as_str()
            .is_some_and(|t| t.contains(&format!("{guest}:"))),
        "{guest}: seed {seed} must fail with the guest's own message: {first_fail}"
    );
    eprintln!(
        "{guest}: hunt found {} failing seed(s) of 1000; first {seed}",
        failing.len()
    );

    // The report's replay command must carry the instruction budget, and
    // the number of events PCT spread its change points over (hunt
    // measures it unless given): replaying without it would draw other
    // change points.
    let replay_line = first_fail["replay"].as_str().unwrap_or_else(|| {
        panic!("{guest}: the failing result has no replay command: {first_fail}")
    });
    // A run branched by hunt's coverage feedback is its parent's seed up
    // to a decision, then its own: the line names it as the branch seed.
    let names_seed = replay_line.contains(&format!("--seed {seed} "))
        || replay_line.contains(&format!("--branch-seed {seed} "));
    assert!(
        names_seed
            && replay_line.contains(&format!("--pct-insns {INSNS}"))
            && replay_line.contains("--pct-steps "),
        "{guest}: the replay command must name the seed, `--pct-insns {INSNS}` and --pct-steps: {replay_line}"
    );
    // The replay line as printed, verbatim.
    let args: Vec<&str> = replay_line.split_whitespace().skip(1).collect();
    assert_eq!(args.first(), Some(&"replay"), "{replay_line}");
    let expected = first_fail["exit_code"].as_i64();
    assert_replays_fail(guest, seed, &args, expected, 10);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn preempt_counter_lost_update() {
    preempt_race("preempt_counter");
}

#[test]
fn preempt_publish_before_initialize() {
    preempt_race("preempt_publish");
}

#[test]
fn preempt_check_then_act() {
    preempt_race("preempt_check_act");
}

#[test]
fn preempt_broken_spinlock() {
    preempt_race("preempt_spinlock");
}

#[test]
fn preempt_aba_treiber_stack() {
    preempt_race("preempt_aba");
}

// ------------------------------------------- 2. nobody to switch to, no steps

/// `M` of the summary line `  preemption   N instruction preemptions, M single-steps`.
fn single_steps_in_summary(err: &str) -> u64 {
    let line = err
        .lines()
        .find(|l| l.trim_start().starts_with("preemption "))
        .unwrap_or_else(|| panic!("no `preemption ...` line in the --summary:\n{err}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    let at = words
        .iter()
        .position(|w| w.trim_end_matches(',').starts_with("single-step"))
        .unwrap_or_else(|| panic!("no `M single-steps` in the summary line: {line}"));
    at.checked_sub(1)
        .and_then(|i| words[i].parse().ok())
        .unwrap_or_else(|| panic!("no count before `single-steps` in: {line}"))
}

#[test]
fn single_threaded_guest_is_never_single_stepped() {
    let bin = build_c("preempt_cpu", true);
    let bin = path_str(&bin);
    let n = native(bin, &[]);
    assert_eq!(code(&n), 0, "preempt_cpu natively:\n{}", show(&n));
    // With the default expected length, and with one so short that the
    // change point surely falls inside the run.
    for steps in [None, Some("5")] {
        for seed in 1..=3u64 {
            let s = seed.to_string();
            let mut args = vec!["--pct", "--pct-insns", INSNS, "--seed", &s, "--summary"];
            if let Some(k) = steps {
                args.extend_from_slice(&["--pct-steps", k]);
            }
            args.extend_from_slice(&["--", bin]);
            let o = detrun(&args);
            assert_eq!(
                code(&o),
                0,
                "`detrun {}` failed:\n{}",
                args.join(" "),
                show(&o)
            );
            assert_eq!(
                stdout(&o),
                stdout(&n),
                "`detrun {}`: the checksum differs from the native one",
                args.join(" ")
            );
            let m = single_steps_in_summary(&stderr(&o));
            assert_eq!(
                m,
                0,
                "`detrun {}`: a single-threaded guest was single-stepped {m} times:\n{}",
                args.join(" "),
                stderr(&o)
            );
        }
    }
}

// ----------------------------------------------------------- 3. the price

/// Intercepted events of one default run, the way hunt measures PCT's
/// expected run length.
fn events_of(bin: &str, dir: &Path) -> u64 {
    let f = dir.join("measure.json");
    let o = detrun(&["--summary-json", path_str(&f), "--", bin]);
    assert_eq!(code(&o), 0, "measuring run failed:\n{}", show(&o));
    let v = read_json(&f, "summary");
    ["syscalls_intercepted", "rdtsc", "cpuid", "threads"]
        .iter()
        .map(|k| v[*k].as_u64().unwrap_or(0))
        .sum::<u64>()
        .max(1)
}

/// Wall time and single-steps of preempt_counter under `--pct
/// --pct-insns 200` against `--pct` without the flag (its default budget)
/// and `--pct-insns 0` (switches only at syscalls), over the same seeds,
/// with change points spread over the run's measured length so that they
/// fall inside it. Prints the numbers; asserts only that the runs work and
/// that `--summary-json` reports `single_steps`.
#[test]
fn bench_single_stepping_cost() {
    let bin = build_c("preempt_counter", true);
    let bin = path_str(&bin);
    let dir = scratch("bench");
    let _g = heavy();
    let k = events_of(bin, &dir).to_string();
    let seeds = 1..=30u64;
    // (name, flags, required): the last one is only informative.
    let configs: [(&str, &[&str], bool); 3] = [
        (
            "--pct --pct-insns 200",
            &["--pct", "--pct-insns", "200"],
            true,
        ),
        ("--pct (default budget)", &["--pct"], true),
        ("--pct --pct-insns 0", &["--pct", "--pct-insns", "0"], false),
    ];
    eprintln!(
        "bench preempt_counter: {} seeds per configuration, --pct-steps {k}",
        seeds.clone().count()
    );
    let mut measured: Vec<(&str, Duration, u64)> = Vec::new();
    'configs: for (name, flags, required) in configs {
        let (mut wall, mut steps, mut preemptions, mut fails) = (Duration::ZERO, 0u64, 0u64, 0);
        for seed in seeds.clone() {
            let s = seed.to_string();
            let f = dir.join(format!("summary-{seed}.json"));
            let mut args: Vec<&str> = flags.to_vec();
            args.extend_from_slice(&["--pct-steps", &k, "--seed", &s]);
            args.extend_from_slice(&["--summary-json", path_str(&f), "--", bin]);
            let t = Instant::now();
            let o = detrun(&args);
            wall += t.elapsed();
            if !required && !matches!(code(&o), 0 | 1) {
                eprintln!("  {name:<24} not accepted (exit {}): skipped", code(&o));
                continue 'configs;
            }
            assert!(
                matches!(code(&o), 0 | 1),
                "`detrun {}` did not run the guest:\n{}",
                args.join(" "),
                show(&o)
            );
            if code(&o) != 0 {
                fails += 1;
            }
            let v = read_json(&f, "summary");
            steps += v["single_steps"].as_u64().unwrap_or_else(|| {
                panic!(
                    "`detrun {}`: --summary-json has no `single_steps`:\n{v:#}",
                    args.join(" ")
                )
            });
            preemptions += v["insn_preemptions"].as_u64().unwrap_or(0);
        }
        let n = seeds.clone().count() as u32;
        measured.push((name, wall, steps));
        eprintln!(
            "  {name:<24} wall {:>7.1} ms total, {:>6.2} ms/run; {steps} single-steps, \
             {preemptions} instruction preemptions, {fails} failing run(s)",
            wall.as_secs_f64() * 1e3,
            (wall / n).as_secs_f64() * 1e3
        );
    }
    // The price of a single-step, against the run that switches only at
    // syscalls (noisy: a run's wall time is mostly process start-up).
    if let Some(&(_, base, _)) = measured.iter().find(|m| m.2 == 0) {
        for &(name, wall, steps) in measured.iter().filter(|m| m.2 > 0) {
            let extra = wall.as_secs_f64() - base.as_secs_f64();
            eprintln!(
                "  {name:<24} {:+.1} ms against no single-steps: ~{:.1} us per single-step",
                extra * 1e3,
                extra * 1e6 / steps as f64
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
