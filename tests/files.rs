//! A deterministic view of files, /proc and the machine (issue 9).

use detrun_tests::*;
use std::path::PathBuf;

/// A fresh directory for one test, removed at the end.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("detrun-files-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn run_in(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    let o = detrun_in(args, dir);
    assert_eq!(code(&o), 0, "{args:?}: {}", stderr(&o));
    o
}

/// Acceptance 1: 200 random names, listed with ls and find, identical twice.
#[test]
fn random_files_list_identically() {
    let script = "mkdir d && cd d && for i in $(seq 200); do touch \"f$(od -An -N4 -tx4 /dev/urandom | tr -d ' ')\"; done; \
                  ls -la --time-style=full-iso; find . -printf '%i %T@ %p\\n'";
    let _hog = Hog::start();
    let outs: Vec<String> = (0..2)
        .map(|_| {
            let t = TempDir::new("ls");
            stdout(&run_in(&t.0, &["--seed", "5", "--", "sh", "-c", script]))
        })
        .collect();
    assert_eq!(outs[0], outs[1], "listings differ between runs");
    assert!(outs[0].lines().count() > 400, "{}", outs[0]);
    // Files created in the run carry virtual times, seconds after the
    // epoch (2024-01-01): how many depends on the events before, which
    // grow with PATH's length (sh looks each command up in every entry).
    assert!(outs[0].contains("2024-01-01 00:00:0"), "{}", outs[0]);
}

/// Acceptance 2: /proc identity files come from the seed.
#[test]
fn proc_identity_files_follow_the_seed() {
    let cmd = ["sh", "-c", "cat /proc/sys/kernel/random/uuid /proc/sys/kernel/random/boot_id /proc/uptime /proc/loadavg"];
    let run = |seed: &str| {
        let mut a = vec!["--seed", seed, "--"];
        a.extend(cmd);
        stdout(&detrun(&a))
    };
    let (a, b, c) = (run("1"), run("1"), run("2"));
    assert_eq!(a, b);
    assert_eq!(a.lines().count(), 4, "{a}");
    let first = |s: &str| s.lines().next().unwrap_or("").to_string();
    assert_ne!(first(&a), first(&c), "the uuid must change with the seed");
    assert_ne!(
        a.lines().nth(1),
        c.lines().nth(1),
        "the boot id must change with the seed"
    );
}

/// Acceptance 3: times, load, CPUs, memory and uptime.
#[test]
fn process_times_load_cpus_memory_uptime() {
    let py = "import os, time; print(os.times(), time.process_time(), os.getloadavg())";
    let a = stdout(&run_in(
        &std::env::temp_dir(),
        &[
            "--",
            "sh",
            "-c",
            &format!("python3 -c '{py}'; nproc; free; uptime"),
        ],
    ));
    let b = stdout(&run_in(
        &std::env::temp_dir(),
        &[
            "--",
            "sh",
            "-c",
            &format!("python3 -c '{py}'; nproc; free; uptime"),
        ],
    ));
    assert_eq!(a, b);
    assert!(a.contains("\n4\n"), "nproc is the virtual CPU count: {a}");
    assert!(a.contains("4194304"), "free shows the virtual memory: {a}");
}

/// Acceptance 4: a make with generated files, and a tar of its output.
#[test]
fn make_and_tar_are_reproducible() {
    let src = root().join("testdata/make_project");
    let outs: Vec<String> = (0..2)
        .map(|_| {
            let t = TempDir::new("make");
            for f in ["Makefile", "spec.txt"] {
                std::fs::copy(src.join(f), t.0.join(f)).unwrap();
            }
            // Sources predate the run, as in a checkout.
            let o = run_in(
                &t.0,
                &[
                    "--",
                    "sh",
                    "-c",
                    "make -s && cat out/app.txt && tar --sort=name -cf - out | sha256sum",
                ],
            );
            stdout(&o)
        })
        .collect();
    assert_eq!(outs[0], outs[1]);
    assert!(outs[0].contains("#define A 1"), "{}", outs[0]);
}

/// Acceptance 5: 5000 entries, complete and in one order, whatever the
/// buffer size.
#[test]
fn big_directory_lists_completely_in_one_order() {
    let t = TempDir::new("big");
    let d = t.0.join("many");
    std::fs::create_dir(&d).unwrap();
    for i in 0..5000 {
        std::fs::write(d.join(format!("e{:x}", i * 7919 % 5003)), b"").unwrap();
    }
    let bin = build_c("fs_listdir", false);
    let list = |bufsize: &str| {
        let o = run_in(&t.0, &["--", bin.to_str().unwrap(), "many", bufsize]);
        stdout(&o)
    };
    let a = list("65536");
    let b = list("65536");
    let c = list("100");
    let e = list("1048576");
    assert_eq!(a, b);
    assert_eq!(a, c, "small buffer changes the order or misses entries");
    assert_eq!(a, e);
    let names: Vec<&str> = a.lines().collect();
    assert_eq!(names.len(), 5002, "5000 entries plus . and ..");
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "listing is sorted by name");
}

/// /proc/<pid>/stat and status: virtual CPU times, no fault or context
/// switch counters, the namespace's PIDs.
#[test]
fn proc_self_stat_and_status_are_virtual() {
    let cmd = "cat /proc/self/stat; grep -E 'ctxt|Cpus_allowed' /proc/self/status; \
               python3 -c \"print(open('/proc/self/stat').read().split()[9:17])\"";
    let a = stdout(&detrun(&["--", "sh", "-c", cmd]));
    let b = stdout(&detrun(&["--", "sh", "-c", cmd]));
    assert_eq!(a, b);
    let first: Vec<&str> = a.lines().next().unwrap_or("").split_whitespace().collect();
    assert!(first.len() > 22, "{a}");
    assert_eq!(first[2], "R", "{a}");
    assert_eq!(&first[9..13], &["0", "0", "0", "0"], "fault counters: {a}");
    assert!(a.contains("voluntary_ctxt_switches:\t0"), "{a}");
    assert!(a.contains("Cpus_allowed_list:\t0-3"), "{a}");
}

/// Python sources that predate the run keep their real times, so CPython
/// uses its bytecode cache instead of recompiling every import; any other
/// file keeps the fixed virtual instant, and `--fs-times strict` gives
/// Python sources that instant too.
#[test]
fn python_sources_keep_their_bytecode_cache() {
    let t = TempDir::new("pyc");
    std::fs::write(t.0.join("foo.py"), "X = 1\n").unwrap();
    std::fs::write(t.0.join("data.txt"), "x\n").unwrap();
    let native = std::process::Command::new("sh")
        .arg("-c")
        .arg("touch -d 2020-01-02 foo.py data.txt && python3 -m py_compile foo.py")
        .current_dir(&t.0)
        .status()
        .expect("python3");
    assert!(native.success());
    let prog =
        "import os, foo; print(int(os.stat('foo.py').st_mtime), int(os.stat('data.txt').st_mtime))";
    let o = run_in(&t.0, &["--", "python3", "-v", "-c", prog]);
    assert_eq!(code(&o), 0, "{}", show(&o));
    let real = std::fs::metadata(t.0.join("foo.py")).unwrap();
    use std::os::unix::fs::MetadataExt;
    let (py, txt) = stdout(&o)
        .trim()
        .split_once(' ')
        .map(|(a, b)| (a.parse::<i64>().unwrap_or(0), b.parse::<i64>().unwrap_or(0)))
        .unwrap_or((0, 0));
    assert_eq!(py, real.mtime(), "foo.py's real mtime:\n{}", show(&o));
    assert_ne!(
        txt,
        real.mtime(),
        "data.txt kept its real mtime:\n{}",
        show(&o)
    );
    let err = stderr(&o);
    assert!(
        err.contains("foo.cpython") && err.contains("matches"),
        "the cache was not used:\n{err}"
    );
    let strict = run_in(
        &t.0,
        &["--fs-times", "strict", "--", "python3", "-v", "-c", prog],
    );
    assert!(
        stderr(&strict).contains("bytecode is stale for 'foo'"),
        "{}",
        show(&strict)
    );
}
