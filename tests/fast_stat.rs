//! The stat fast path (issue 7): stat-family calls answered inside the
//! tracee at patched call sites give the answers the trapped calls give,
//! run after run, for dynamic and static programs, forks and threads.

use detrun_tests::*;

fn run(args: &[&str], name: &str) -> (String, serde_json::Value) {
    let work = scratch_dir("fast_stat", &format!("{name}-work"));
    let w = path_str(&work).to_string();
    let a: Vec<&str> = args
        .iter()
        .map(|x| if *x == "WORK" { w.as_str() } else { x })
        .collect();
    let (o, v) = detrun_summary("fast_stat", name, &a);
    assert_eq!(code(&o), 0, "{}", show(&o));
    assert!(v.is_object(), "no summary:\n{}", show(&o));
    (stdout(&o).replace(&w, "WORK"), v)
}

fn n(v: &serde_json::Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or(0)
}

/// One file through stat, lstat, fstat, fstatat, statx and readdir: one
/// inode and device; the same bytes with and without the fast path, and
/// twice in a row; nearly every call answered in the tracee.
#[test]
fn stat_calls_answered_in_the_tracee_match_trapped_ones() {
    for static_ in [false, true] {
        let bin = build_c("fast_stat", static_);
        let g = path_str(&bin);
        let (fast, s) = run(&["--", g, "WORK"], "fast");
        let (again, _) = run(&["--", g, "WORK"], "again");
        let (slow, t) = run(&["--no-fast-stat", "--", g, "WORK"], "slow");
        assert!(
            fast.contains("loop same 4000 of 4000\nmissing -1 2\n"),
            "{fast}"
        );
        assert!(
            fast.contains("\nbad 0\n") && !fast.contains("MISMATCH"),
            "{fast}"
        );
        // Files written during the run are newer than those before it.
        assert!(fast.contains(" mtime 1704067200."), "{fast}");
        assert_eq!(fast, again, "two runs differ (static: {static_})");
        assert_eq!(
            fast, slow,
            "fast path and trapped calls differ (static: {static_})"
        );
        assert!(n(&s, "fast_stat_calls") > 4000, "{s}");
        assert!(n(&s, "stat_sites_patched") >= 2, "{s}");
        assert!(n(&s, "syscalls_intercepted") < 400, "{s}");
        assert_eq!(n(&t, "fast_stat_calls"), 0, "{t}");
        assert!(n(&t, "syscalls_intercepted") > 4000, "{t}");
    }
}

/// Threads stat the same files in a seeded interleaving: the numbering
/// (first sight) is the same in every run of a seed, under load.
#[test]
fn threads_number_files_alike_under_load() {
    let bin = build_c("fast_stat", false);
    let g = path_str(&bin);
    let _hogs = (Hog::start(), Hog::start());
    let args = ["--seed", "3", "--chaos", "--", g, "threads"];
    let (first, s) = run(&args, "t0");
    assert!(n(&s, "fast_stat_calls") > 1000, "{s}");
    for i in 1..4 {
        let (o, _) = run(&args, &format!("t{i}"));
        assert_eq!(first, o, "run {i} differs");
    }
    assert!(!first.contains("MISMATCH"), "{first}");
}

/// A file whose stamps say "written during the run" (here: another
/// program set its mtime ahead) is answered by detrun instead of the stat
/// code, quietly: the schedule trace is the one of a run where it is not.
#[test]
fn files_changed_by_others_do_not_change_the_schedule() {
    let bin = build_c("fast_stat", false);
    let g = path_str(&bin);
    let dir = scratch_dir("fast_stat", "watch");
    let f = dir.join("watched");
    std::fs::write(&f, "x").expect("write");
    // Older than a clock tick before the runs start.
    std::thread::sleep(std::time::Duration::from_millis(60));
    let fs = path_str(&f).to_string();
    let trace = |name: &str| {
        let t = dir.join(format!("{name}.trace"));
        let ts = path_str(&t).to_string();
        let (o, s) = run(&["--trace", &ts, "--", g, "watch", &fs], name);
        assert_eq!(o, "watch ok 500\n");
        (std::fs::read(&t).expect("trace"), n(&s, "fast_stat_calls"))
    };
    let (old, fast_old) = trace("old");
    let st = std::process::Command::new("touch")
        .args(["-d", "+1 hour", &fs])
        .status()
        .expect("touch");
    assert!(st.success());
    std::thread::sleep(std::time::Duration::from_millis(60));
    let (ahead, fast_ahead) = trace("ahead");
    assert!(
        fast_old >= 490 && fast_ahead + 450 <= fast_old,
        "in the tracee: {fast_old} calls for the old file, {fast_ahead} for the one from the future"
    );
    assert!(old == ahead, "schedule traces differ ({})", dir.display());
}

/// `ls -la` of a big directory: the same listing with the fast path and
/// without it, nearly without stops.
#[test]
fn ls_of_a_big_directory_is_the_same_listing() {
    let (fast, s) = run(
        &["--", "ls", "-la", "--time-style=full-iso", "/usr/bin"],
        "ls",
    );
    let (slow, _) = run(
        &[
            "--no-fast-stat",
            "--",
            "ls",
            "-la",
            "--time-style=full-iso",
            "/usr/bin",
        ],
        "ls_slow",
    );
    assert_eq!(fast, slow);
    let entries = fast.lines().count() as u64;
    assert!(entries > 100, "{fast}");
    assert!(n(&s, "fast_stat_calls") + 10 >= entries, "{s}");
}

/// read(2) of a regular file is made in the tracee once glibc's read site
/// is patched (its third trap); the same site still hands pipes and
/// /dev/urandom (seeded) to detrun. The same bytes as with every read
/// trapped, dynamic and static, and twice alike.
#[test]
fn reads_of_regular_files_are_made_in_the_tracee() {
    let file = root().join("testdata").join("fast_stat.c");
    let f = path_str(&file);
    for static_ in [false, true] {
        let bin = build_c("fast_stat", static_);
        let g = path_str(&bin);
        let (fast, s) = run(&["--", g, "read", f], "read-fast");
        let (again, _) = run(&["--", g, "read", f], "read-again");
        let (slow, t) = run(&["--no-fast-stat", "--", g, "read", f], "read-slow");
        assert_eq!(fast, slow, "fast and trapped reads differ");
        assert_eq!(fast, again, "two runs differ");
        let size = std::fs::metadata(&file).expect("size").len();
        assert!(fast.starts_with(&format!("file {size} bytes")), "{fast}");
        assert!(fast.contains("pipe 500 bytes\nurandom "), "{fast}");
        let chunks = size / 100;
        assert!(n(&s, "read_sites_patched") >= 1, "{s}");
        assert!(
            n(&s, "fast_read_calls") + 5 >= chunks,
            "{chunks} reads: {s}"
        );
        assert_eq!(n(&t, "fast_read_calls"), 0, "{t}");
    }
}
