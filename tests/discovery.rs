//! Finding the bugs that hide between syscalls (issue 17): one guest per
//! class of concurrency bug (`testdata/disc_*.c`, plain C, the race
//! windows holding no trapped syscall), each hunted with `detrun hunt`'s
//! default options; spin waits, yield loops and clock polling as they
//! look in real programs.

use detrun_tests::*;
use std::path::Path;
use std::sync::Mutex;

/// Hunts use both CPUs: one at a time.
fn heavy() -> std::sync::MutexGuard<'static, ()> {
    static HEAVY: Mutex<()> = Mutex::new(());
    HEAVY.lock().unwrap_or_else(|e| e.into_inner())
}

fn read_json(path: &Path) -> serde_json::Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()))
}

/// `detrun hunt --runs RUNS [EXTRA] -- BIN` with a JSON report: the report.
fn hunt(
    name: &str,
    bin: &str,
    runs: u64,
    extra: &[&str],
) -> (std::process::Output, serde_json::Value) {
    let dir = scratch_dir("discovery", name);
    let rep = dir.join("hunt.json");
    let runs = runs.to_string();
    let mut args = vec![
        "hunt",
        "--runs",
        &runs,
        "--no-progress",
        "--report",
        path_str(&rep),
    ];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", bin]);
    let o = detrun(&args);
    let v = read_json(&rep);
    (o, v)
}

/// The first failing seed of a hunt report: (seed, exit code, signature,
/// replay line's arguments after `detrun`).
fn first_failure(v: &serde_json::Value) -> Option<(u64, i64, String, Vec<String>)> {
    let r = v["results"]
        .as_array()?
        .iter()
        .find(|r| r["status"] == "fail")?;
    let replay: Vec<String> = r["replay"]
        .as_str()?
        .split_whitespace()
        .skip(1)
        .map(str::to_string)
        .collect();
    Some((
        r["seed"].as_u64()?,
        r["exit_code"].as_i64().unwrap_or(-1),
        r["signature"].as_str().unwrap_or("").to_string(),
        replay,
    ))
}

/// The class guest `disc_NAME`: its plain run (seed 0, default policy)
/// passes; `detrun hunt --runs 1000` with default options finds a failing
/// seed; that seed's printed replay line, with `--verify`, fails the same
/// way 10 times out of 10 (5 verified pairs).
fn class(name: &str) {
    let guest = format!("disc_{name}");
    let bin = build_c(&guest, false);
    let bin = path_str(&bin);
    let plain = detrun(&["--", bin]);
    assert_eq!(
        code(&plain),
        0,
        "{guest}: the plain run (seed 0) must pass:\n{}",
        show(&plain)
    );
    let _g = heavy();
    let (o, v) = hunt(name, bin, 1000, &[]);
    eprintln!(
        "{guest}: {} of {} seeds failed, {:.1} runs/s",
        v["failures"],
        v["runs"],
        v["runs_per_sec"].as_f64().unwrap_or(0.0)
    );
    let Some((seed, exit, signature, replay)) = first_failure(&v) else {
        panic!(
            "{guest}: `detrun hunt --runs 1000` found no failing seed:\n{}",
            show(&o)
        );
    };
    assert_eq!(
        code(&o),
        1,
        "{guest}: hunt must exit 1 when a seed fails:\n{}",
        show(&o)
    );
    let mut args: Vec<&str> = Vec::new();
    let dash = replay
        .iter()
        .position(|a| a == "--")
        .expect("replay line has --");
    args.extend(replay[..dash].iter().map(String::as_str));
    args.push("--verify");
    args.extend(replay[dash..].iter().map(String::as_str));
    // The failure's own line: the guest's message, or detrun's deadlock report.
    let headline = signature.split_once(": ").map_or("", |x| x.1).to_string();
    for i in 0..5 {
        let r = detrun(&args);
        assert_eq!(
            code(&r) as i64,
            exit,
            "{guest}: verified replay {i} of seed {seed} (`detrun {}`) did not fail as hunted:\n{}",
            args.join(" "),
            show(&r)
        );
        assert!(
            stderr(&r).contains(&headline),
            "{guest}: replay {i} of seed {seed} failed otherwise than `{headline}`:\n{}",
            show(&r)
        );
    }
}

#[test]
fn check_then_act_under_an_uncontended_mutex() {
    class("check_act_mutex");
}

#[test]
fn check_then_act_with_an_untrapped_syscall_in_the_window() {
    class("check_act_getppid");
}

#[test]
fn order_violation_at_thread_creation() {
    class("thread_start");
}

#[test]
fn reorder_of_two_unlocked_stores() {
    class("reorder");
}

#[test]
fn wrong_lock() {
    class("wrong_lock");
}

#[test]
fn two_stage_critical_sections() {
    class("two_stage");
}

#[test]
fn lock_order_inversion_deadlocks() {
    class("lock_order");
}

#[test]
fn missing_barrier() {
    class("missing_barrier");
}

#[test]
fn lost_wakeup_with_a_condition_variable() {
    class("lost_wakeup");
}

#[test]
fn work_stealing_deque_of_plain_loads_and_stores() {
    class("ws_deque");
}

#[test]
fn aba_on_a_lock_free_stack() {
    class("aba");
}

#[test]
fn plain_load_store_spinlock() {
    class("spinlock");
}

#[test]
fn token_ring_stale_skip() {
    class("token_ring");
}

#[test]
fn hundred_threads_of_which_two_race() {
    class("hundred");
}

/// The globals the program writes are watched: a run has data points
/// (`"sync":"data"` in the trace), two runs of one seed give the same
/// trace, and `--no-data-points` has none.
#[test]
fn data_points_watch_written_globals() {
    let bin = build_c("disc_hundred", false);
    let bin = path_str(&bin);
    let dir = scratch_dir("discovery", "data_points");
    let traces: Vec<String> = (0..2)
        .map(|i| {
            let t = dir.join(format!("t{i}.jsonl"));
            let o = detrun(&["--chaos", "--seed", "4", "--trace", path_str(&t), "--", bin]);
            assert!(matches!(code(&o), 0 | 1), "{}", show(&o));
            std::fs::read_to_string(&t).expect("trace")
        })
        .collect();
    let data = traces[0].matches("\"sync\":\"data\"").count();
    // nspill: read and written by threads 30 and 60, and read by main.
    assert!(
        data >= 5,
        "expected the overflow counter's accesses as data points, got {data}"
    );
    assert_eq!(traces[0], traces[1], "two runs of one seed differ");
    let t = dir.join("off.jsonl");
    let o = detrun(&[
        "--chaos",
        "--seed",
        "4",
        "--no-data-points",
        "--trace",
        path_str(&t),
        "--",
        bin,
    ]);
    assert!(matches!(code(&o), 0 | 1), "{}", show(&o));
    let off = std::fs::read_to_string(&t).expect("trace");
    assert!(
        !off.contains("\"sync\":\"data\""),
        "--no-data-points still watched"
    );
}

/// `--coverage` lists the orders of two threads at one object: some for
/// two threads sharing a mutex, none for one thread, the same for one seed.
#[test]
fn coverage_lists_orders_of_two_threads() {
    let dir = scratch_dir("discovery", "coverage");
    let run = |bin: &str, seed: &str, name: &str| -> serde_json::Value {
        let f = dir.join(name);
        let o = detrun(&[
            "--chaos",
            "--seed",
            seed,
            "--coverage",
            path_str(&f),
            "--",
            bin,
        ]);
        assert!(matches!(code(&o), 0 | 1), "{}", show(&o));
        read_json(&f)
    };
    let two = build_c("disc_check_act_mutex", false);
    let a = run(path_str(&two), "3", "a.json");
    let b = run(path_str(&two), "3", "b.json");
    assert_eq!(a, b, "one seed, two coverages");
    let pairs = a["pairs"].as_array().map_or(0, Vec::len);
    assert!(pairs > 0, "two threads on one mutex reached no order: {a}");
    assert!(a["events"].as_u64().unwrap_or(0) >= pairs as u64);
    let one = build_c("conf_dup_fcntl", false);
    let c = run(path_str(&one), "3", "c.json");
    assert_eq!(
        c["pairs"].as_array().map(Vec::len),
        Some(0),
        "one thread: {c}"
    );
}

/// Coverage feedback: a hunt is the same for -j 1 and -j 2 (each run's
/// plan depends only on runs two batches back), later runs branch from
/// those that reached new orders, the coverage line is printed, and a
/// branched run's replay line gives its failure again.
#[test]
fn hunt_feedback_is_deterministic_and_replays() {
    let bin = build_c("disc_check_act_mutex", false);
    let bin = path_str(&bin);
    let _g = heavy();
    let key = |v: &serde_json::Value| -> Vec<String> {
        v["results"]
            .as_array()
            .expect("results")
            .iter()
            .map(|r| {
                format!(
                    "{} {} {} {} {} {}",
                    r["seed"], r["strategy"], r["parent"], r["status"], r["new_pairs"], r["replay"]
                )
            })
            .collect()
    };
    let (o1, v1) = hunt(
        "feedback_j1",
        bin,
        150,
        &["-j", "1", "--pct-steps", "120", "--pct-data-steps", "1"],
    );
    let (o2, v2) = hunt(
        "feedback_j2",
        bin,
        150,
        &["-j", "2", "--pct-steps", "120", "--pct-data-steps", "1"],
    );
    assert_eq!(key(&v1), key(&v2), "-j 1 and -j 2 hunts differ");
    assert_eq!(v1["coverage"], v2["coverage"]);
    assert!(
        stdout(&o1).contains("coverage: ") && stdout(&o2).contains("orders of two threads"),
        "{}",
        show(&o1)
    );
    let cov = &v1["coverage"];
    assert!(cov["pairs"].as_u64().unwrap_or(0) > 0, "{cov}");
    assert!(
        cov["mutated_runs"].as_u64().unwrap_or(0) > 0,
        "no run branched: {cov}"
    );
    let results = v1["results"].as_array().expect("results");
    let branched = results
        .iter()
        .find(|r| r["status"] == "fail" && !r["parent"].is_null())
        .unwrap_or_else(|| panic!("no branched run failed in 150:\n{}", show(&o1)));
    let line: Vec<&str> = branched["replay"]
        .as_str()
        .expect("replay")
        .split_whitespace()
        .skip(1)
        .collect();
    assert!(line.contains(&"--branch-at"), "{line:?}");
    let dash = line.iter().position(|a| *a == "--").expect("--");
    let mut args: Vec<&str> = line[..dash].to_vec();
    args.push("--verify");
    args.extend_from_slice(&line[dash..]);
    let r = detrun(&args);
    assert_eq!(code(&r), 1, "`detrun {}`:\n{}", args.join(" "), show(&r));
    assert!(stderr(&r).contains("replay verified"), "{}", show(&r));
}

/// A barrier of a shared counter and a `sched_yield` loop (4 threads, 3
/// rounds) completes under every policy: a yield lets another thread run,
/// PCT's highest thread included.
#[test]
fn yield_barrier_completes_under_every_policy() {
    let bin = build_c("disc_yield_barrier", false);
    let bin = path_str(&bin);
    let _g = heavy();
    let policies: [&[&str]; 6] = [
        &[],
        &["--policy", "default"],
        &["--policy", "chaos"],
        &["--policy", "pct", "--pct-depth", "1"],
        &["--policy", "pct", "--pct-depth", "2"],
        &["--policy", "pct", "--pct-depth", "3"],
    ];
    for p in policies {
        let mut extra = p.to_vec();
        extra.extend_from_slice(&["--timeout", "20"]);
        let (o, v) = hunt("yield_barrier", bin, 200, &extra);
        assert_eq!(
            v["failures"].as_u64(),
            Some(0),
            "yield barrier under `hunt {}` (200 seeds): runs failed or timed out:\n{}",
            p.join(" "),
            show(&o)
        );
    }
}

/// A plain load/store spinlock: the spin is preempted by a probe at a
/// point that is the same in every run (no watchdog hazard), so the
/// verified replays above hold and its summary shows no hazard.
#[test]
fn spin_wait_is_preempted_without_a_hazard() {
    let bin = build_c("disc_spinlock", false);
    let bin = path_str(&bin);
    let _g = heavy();
    let (o, v) = hunt("spin_hazard", bin, 300, &["--policy", "chaos"]);
    assert_eq!(
        code(&o),
        1,
        "the spinlock bug must be found in 300 chaos seeds:\n{}",
        show(&o)
    );
    let (seed, _, _, _) = first_failure(&v).expect("a failing seed");
    // Seeds where the probe preempted a spin: none may report a hazard.
    let mut spun = 0;
    for s in 1..=40u64 {
        let seed_s = s.to_string();
        let (r, sum) = detrun_summary(
            "discovery",
            "spin_summary",
            &["--chaos", "--seed", &seed_s, "--", bin],
        );
        assert!(matches!(code(&r), 0 | 1), "seed {s}:\n{}", show(&r));
        spun += sum["spin_points"].as_u64().unwrap_or(0);
        assert_eq!(
            sum["hazards"].as_array().map_or(0, Vec::len),
            0,
            "seed {s} of the spinlock reported a hazard: {}",
            sum["hazards"]
        );
    }
    let seed_s = seed.to_string();
    let (_, sum) = detrun_summary(
        "discovery",
        "spin_failing",
        &["--chaos", "--seed", &seed_s, "--", bin],
    );
    assert_eq!(
        sum["hazards"].as_array().map_or(1, Vec::len),
        0,
        "{}",
        sum["hazards"]
    );
    eprintln!("spinlock: {spun} spin points in seeds 1..=40; failing seed {seed}");
}

/// A thread polling `clock_gettime` (answered inside the tracee) until
/// another, after `usleep(1000)`, sets a flag: it sees the flag within 10x
/// the calls it takes natively.
#[test]
fn clock_polling_lets_the_sleeper_run() {
    let bin = build_c("disc_clock_poll", false);
    let bin = path_str(&bin);
    let calls = |o: &std::process::Output| -> u64 {
        stdout(o)
            .trim()
            .strip_prefix("calls=")
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no calls=N line:\n{}", show(o)))
    };
    let n = native(bin, &[]);
    let native_calls = calls(&n);
    for flags in [&[][..], &["--chaos"], &["--pct=2"]] {
        let mut args = flags.to_vec();
        args.extend_from_slice(&["--summary", "--", bin]);
        let o = detrun(&args);
        assert_eq!(code(&o), 0, "{}", show(&o));
        let c = calls(&o);
        assert!(
            stderr(&o).contains("time and") && !stderr(&o).contains(" 0 time and"),
            "the fast time path must answer the polls:\n{}",
            show(&o)
        );
        assert!(
            c <= 10 * native_calls,
            "`detrun {}`: {c} calls before the flag was seen, natively {native_calls}",
            args.join(" ")
        );
    }
}

/// Sync-op points are in the trace and the schedule file: a failure that
/// only a switch at an uncontended lock produces replays from its
/// recorded schedule under the default policy.
#[test]
fn sync_points_are_recorded_and_replayed() {
    let bin = build_c("disc_check_act_mutex", false);
    let bin = path_str(&bin);
    let dir = scratch_dir("discovery", "sync_schedule");
    let sched = dir.join("fail.sched");
    let trace = dir.join("t.jsonl");
    let mut found = None;
    for s in 1..=600u64 {
        let seed = s.to_string();
        let o = detrun(&[
            "--chaos",
            "--seed",
            &seed,
            "--record-schedule",
            path_str(&sched),
            "--trace",
            path_str(&trace),
            "--",
            bin,
        ]);
        if code(&o) == 1 {
            found = Some(s);
            break;
        }
    }
    let s = found.expect("chaos finds the check-then-act bug in 600 seeds");
    let text = std::fs::read_to_string(&trace).expect("trace");
    assert!(
        text.contains("\"sync\":\"pthread_mutex_lock\""),
        "the trace of seed {s} has no sync-op point"
    );
    let sc = std::fs::read_to_string(&sched).expect("schedule");
    assert!(
        sc.contains("points sync"),
        "the schedule must say its points:\n{sc}"
    );
    let o = detrun(&["--schedule", path_str(&sched), "--", bin]);
    assert_eq!(
        code(&o),
        1,
        "the recorded schedule of seed {s} must fail again:\n{}",
        show(&o)
    );
    assert!(stderr(&o).contains("BUG:"), "{}", show(&o));
}
