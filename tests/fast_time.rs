//! The time fast path (issue 7): clock_gettime, gettimeofday and time are
//! answered inside the tracee from the shared clock page, with the same
//! virtual-time semantics as a trapped call, deterministically.

use detrun_tests::*;

fn summary(args: &[&str], name: &str) -> (String, serde_json::Value) {
    let (o, v) = detrun_summary("fast_time", name, args);
    assert_eq!(code(&o), 0, "{}", show(&o));
    assert!(v.is_object(), "no summary:\n{}", show(&o));
    (stdout(&o), v)
}

#[test]
fn a_clock_loop_is_answered_in_the_tracee() {
    for static_ in [false, true] {
        let bin = build_c("fast_time", static_);
        let (out, s) = summary(&["--", path_str(&bin), "loop", "200000"], "loop");
        let fast = s["fast_time_calls"].as_u64().unwrap_or(0);
        assert!(
            fast >= 199_000,
            "only {fast} of 200000 calls answered in the tracee: {s}"
        );
        assert!(
            s["syscalls_intercepted"].as_u64().unwrap_or(u64::MAX) < 2000,
            "{s}"
        );
        // Each call costs one event's virtual time, as a trapped one does.
        assert!(out.starts_with("delta 200000000\n"), "{out}");
        for l in [
            "realtime after monotonic: 1",
            "coarse after realtime: 1",
            "gettimeofday after realtime: 1",
            "time agrees: 1",
        ] {
            assert!(out.contains(l), "{l} missing:\n{out}");
        }
        let (again, _) = summary(&["--", path_str(&bin), "loop", "200000"], "loop2");
        assert_eq!(out, again, "two runs differ");
    }
}

/// The same clocks as when every call traps: realtime and monotonic keep
/// the same offset, and --no-fast-time answers nothing in the tracee.
#[test]
fn fast_and_trapped_clocks_agree() {
    let bin = build_c("fast_time", false);
    let (fast, _) = summary(&["--", path_str(&bin), "loop", "10"], "agree_fast");
    let (slow, s) = summary(
        &["--no-fast-time", "--", path_str(&bin), "loop", "10"],
        "agree_slow",
    );
    assert_eq!(s["fast_time_calls"].as_u64(), Some(0), "{s}");
    let offset = |o: &str| {
        o.lines()
            .find(|l| l.starts_with("offset "))
            .map(str::to_string)
    };
    assert!(offset(&fast).is_some(), "{fast}");
    assert_eq!(
        offset(&fast),
        offset(&slow),
        "fast:\n{fast}\ntrapped:\n{slow}"
    );
    assert_eq!(
        fast.lines().next(),
        slow.lines().next(),
        "fast:\n{fast}\ntrapped:\n{slow}"
    );
}

/// A thread spinning on the clock still gets its timer signal on virtual
/// time (the stubs trap when a deadline is due), without the watchdog.
#[test]
fn a_timer_fires_while_spinning_on_the_clock() {
    let bin = build_c("fast_time", false);
    let (out, s) = summary(&["--", path_str(&bin), "alarm"], "alarm");
    assert!(out.contains("at least one second"), "{out}");
    assert_eq!(s["hazards"].as_array().map(|h| h.len()), Some(0), "{s}");
    let (again, _) = summary(&["--", path_str(&bin), "alarm"], "alarm2");
    assert_eq!(out, again);
}

#[test]
fn threads_never_see_the_clock_go_back() {
    let bin = build_c("fast_time", false);
    let (out, s) = summary(
        &["--chaos", "--seed", "3", "--", path_str(&bin), "threads"],
        "threads",
    );
    assert_eq!(out, "went backwards: 0 0 0 0\n", "{s}");
    assert!(s["fast_time_calls"].as_u64().unwrap_or(0) > 390_000, "{s}");
    let (again, _) = summary(
        &["--chaos", "--seed", "3", "--", path_str(&bin), "threads"],
        "threads2",
    );
    assert_eq!(out, again);
}

/// No heap allocation per intercepted syscall: the supervisor makes as many
/// allocations for 11000 trapped clock_gettime calls as for 1000, and about
/// as many for 8 MB through a pipe as for 1 MB.
#[test]
fn trapped_calls_allocate_nothing_in_the_supervisor() {
    let bin = build_c("fast_time", false);
    let counts = |n: &str| {
        let (_, s) = summary(
            &["--no-fast-time", "--", path_str(&bin), "loop", n],
            &format!("allocs-{n}"),
        );
        assert!(s["syscalls_intercepted"].as_u64().unwrap_or(0) > n.parse().unwrap_or(0));
        s["supervisor_allocs"].as_u64().expect("supervisor_allocs")
    };
    let (small, big) = (counts("1000"), counts("11000"));
    assert!(small > 0, "the allocator does not count");
    assert_eq!(small, big, "allocations for 1000 vs 11000 trapped calls");

    // Pipe reads and writes that park and that the supervisor completes:
    // eight times the bytes, thousands more stops, (almost) no allocation
    // more (vectors that grow once to the largest size seen).
    let pipe = |n: &str| {
        let cmd = format!("head -c {n} /dev/zero | cat > /dev/null");
        let (_, s) = summary(&["--", "sh", "-c", &cmd], &format!("allocs-pipe-{n}"));
        let allocs = s["supervisor_allocs"].as_u64().expect("supervisor_allocs");
        (allocs, s["syscalls_intercepted"].as_u64().unwrap_or(0))
    };
    let ((a1, s1), (a8, s8)) = (pipe("1000000"), pipe("8000000"));
    assert!(s8 > s1 + 2000, "{s1} vs {s8} stops");
    assert!(
        a8 <= a1 + 16,
        "{a1} allocations for 1 MB, {a8} for 8 MB through a pipe"
    );
}

/// Instruction-level preemption points never stop a thread inside detrun's
/// code in the tracee (a thread stopped in the middle of entering an inode
/// would leave the table half-written for the others, and `--breakpoints`
/// would write its int3 into the file every process maps). Under PCT with
/// instruction budgets, points that fall in the stubs are moved past them
/// (counted in the summary), no reader sees the clock go backwards, and a
/// seed's run is the same twice.
#[test]
fn preemption_points_are_moved_out_of_the_stubs() {
    let bin = build_c("fast_time", false);
    let g = path_str(&bin);
    let mut moved = 0;
    for seed in 1..=24 {
        let s = seed.to_string();
        let dir = scratch_dir("fast_time", &format!("pct{seed}"));
        let args = |t: &str| {
            vec![
                "--pct=8".to_string(),
                "--pct-steps".into(),
                "300".into(),
                "--pct-insns".into(),
                "300".into(),
                "--seed".into(),
                s.clone(),
                "--trace".into(),
                path_str(&dir.join(t)).to_string(),
                "--".into(),
                g.to_string(),
                "threads".into(),
            ]
        };
        let a1 = args("a.trace");
        let a1: Vec<&str> = a1.iter().map(|x| x.as_str()).collect();
        let (out, sum) = summary(&a1, &format!("pct{seed}a"));
        assert!(
            out.contains("went backwards: 0 0 0 0"),
            "seed {seed}: {out}"
        );
        moved += sum["insn_points_moved"].as_u64().unwrap_or(0);
        let a2 = args("b.trace");
        let a2: Vec<&str> = a2.iter().map(|x| x.as_str()).collect();
        let (again, _) = summary(&a2, &format!("pct{seed}b"));
        assert_eq!(out, again, "seed {seed}");
        let read = |t: &str| std::fs::read(dir.join(t)).expect("trace");
        assert!(
            read("a.trace") == read("b.trace"),
            "seed {seed}: traces differ"
        );
    }
    assert!(moved > 0, "no point fell inside the stubs in 24 seeds");
}

/// An `rdtsc` site of the usual form (`rdtsc; shl rdx, 32; or rax, rdx`)
/// is patched at its third fault: later reads come from the clock page, and
/// give the values trapped reads give, dynamic and static. (Fewer reads
/// than a scheduling quantum: trapped ones are events, patched ones not.)
#[test]
fn rdtsc_sites_are_answered_in_the_tracee() {
    for static_ in [false, true] {
        let bin = build_c("fast_time", static_);
        let g = path_str(&bin);
        let (fast, s) = summary(&["--", g, "rdtsc", "2000"], "rdtsc");
        let (slow, t) = summary(&["--no-fast-time", "--", g, "rdtsc", "2000"], "rdtsc-slow");
        assert_eq!(fast, slow, "patched and trapped reads differ");
        assert!(
            fast.contains("tsc delta ") && fast.contains("not increasing 0\noutside the clock 0\n"),
            "{fast}"
        );
        assert_eq!(s["rdtsc_sites_patched"].as_u64(), Some(1), "{s}");
        let trapped = s["rdtsc"].as_u64().unwrap_or(u64::MAX);
        assert!(trapped < 20, "{trapped} reads still trapped: {s}");
        assert!(t["rdtsc"].as_u64().unwrap_or(0) > 2000, "{t}");
    }
}
