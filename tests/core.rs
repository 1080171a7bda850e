//! Acceptance tests of the core: `detrun -- PROGRAM` runs unmodified
//! programs deterministically (issue 2).

use detrun_tests::*;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn lines_with<'a>(out: &'a str, key: &str) -> Vec<&'a str> {
    out.lines().filter(|l| l.starts_with(key)).collect()
}

fn value<'a>(out: &'a str, key: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix(": ")))
        .unwrap_or_else(|| panic!("no `{key}` line in:\n{out}"))
}

/// Acceptance 1: every source of nondeterminism the guest can observe is the
/// same in two runs with one seed, and random bytes change with the seed.
fn nondet(static_: bool) {
    let bin = build_c("nondet", static_);
    let bin = bin.to_str().unwrap();
    let _hog = Hog::start();
    let a = detrun(&["--seed", "7", "--", bin]);
    let b = detrun(&["--seed", "7", "--", bin]);
    assert_eq!(code(&a), 0, "nondet failed: {}", stderr(&a));
    assert_same(&a, &b, "nondet, same seed");
    let out = stdout(&a);
    // Everything the guest prints is there, including what the vDSO would
    // otherwise answer without a syscall.
    for key in [
        "clock_realtime",
        "clock_monotonic",
        "clock_boottime",
        "gettimeofday",
        "time",
        "rdtsc",
        "rdtscp",
        "getrandom",
        "dev_urandom",
        "dev_random",
        "at_random",
        "malloc_64",
        "stack_var",
        "getpid",
        "getppid",
        "hostname",
        "cpuid_rdrand",
    ] {
        assert_eq!(
            lines_with(&out, &format!("{key}:")).len(),
            1,
            "{key} missing:\n{out}"
        );
    }
    // Virtual time starts at the fixed epoch (2024-01-01) and is not the host's.
    assert!(value(&out, "time").starts_with("1704067"), "{out}");
    assert_eq!(value(&out, "hostname"), "detrun");
    assert_eq!(value(&out, "rdtsc_increasing"), "yes");
    let c = detrun(&["--seed", "8", "--", bin]);
    let other = stdout(&c);
    for key in ["getrandom", "dev_urandom", "dev_random", "at_random"] {
        assert_ne!(
            value(&out, key),
            value(&other, key),
            "{key} must depend on the seed"
        );
    }
    // The run is also not the native one: native random bytes differ.
    let n = native(bin, &[]);
    assert_ne!(value(&out, "getrandom"), value(&stdout(&n), "getrandom"));
}

#[test]
fn nondeterminism_sources_dynamic() {
    nondet(false);
}

#[test]
fn nondeterminism_sources_static() {
    nondet(true);
}

/// Acceptance 2: 60 s of sleeping take virtual time, not wall time.
#[test]
fn sixty_seconds_of_sleep_take_no_wall_time() {
    let bin = build_c("sleeper", false);
    let t = Instant::now();
    let o = detrun(&["--", bin.to_str().unwrap()]);
    let wall = t.elapsed();
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    let ms: u64 = value(&out, "elapsed_ms").parse().unwrap();
    assert!(ms >= 60_000, "virtual elapsed {ms} ms < 60 s:\n{out}");
    assert!(wall < Duration::from_secs(2), "took {wall:?} of wall time");
    for step in [
        "nanosleep",
        "clock_nanosleep_monotonic",
        "clock_nanosleep_realtime_abs",
        "select",
        "poll",
    ] {
        assert!(
            out.contains(&format!("{step}: done")),
            "{step} missing:\n{out}"
        );
    }
}

fn twice_same(args: &[&str]) -> String {
    let _hog = Hog::start();
    let a = detrun(args);
    let b = detrun(args);
    assert_eq!(code(&a), 0, "{args:?} failed: {}", stderr(&a));
    assert_same(&a, &b, &format!("{args:?}"));
    stdout(&a)
}

/// Acceptance 3: real programs from the machine.
#[test]
fn date_is_deterministic() {
    let out = twice_same(&["--", "date", "+%s %N"]);
    assert!(out.starts_with("1704067200 "), "{out}");
}

#[test]
fn python_time_random_urandom_uuid_hash() {
    let py = "import time, random, os, uuid; print(time.time(), random.random(), os.urandom(8).hex(), uuid.uuid4(), hash('x'))";
    let out = twice_same(&["--", "python3", "-c", py]);
    let other = stdout(&detrun(&["--seed", "1", "--", "python3", "-c", py]));
    assert_ne!(
        out, other,
        "a different seed must give different random values"
    );
}

#[test]
fn perl_rand_and_time() {
    let out = twice_same(&["--", "perl", "-e", "print rand(), ' ', time, qq{\\n}"]);
    assert!(out.contains("1704067"), "{out}");
}

#[test]
fn shell_pipeline_with_pids() {
    let out = twice_same(&[
        "--",
        "sh",
        "-c",
        "echo pid=$$; seq 1 2000 | sort -r | head -3; sh -c 'echo inner=$$'",
    ]);
    assert!(
        out.contains("pid=2"),
        "the guest is PID 2 of its namespace: {out}"
    );
}

/// Acceptance 5: exit statuses mirror the program.
#[test]
fn exit_status_of_false() {
    assert_eq!(code(&detrun(&["--", "false"])), 1);
    assert_eq!(code(&detrun(&["--", "sh", "-c", "exit 42"])), 42);
}

#[test]
fn death_by_signal_is_128_plus_n() {
    let bin = build_c("selfkill", false);
    let o = detrun(&["--", bin.to_str().unwrap()]);
    assert_eq!(code(&o), 137);
    assert_eq!(stdout(&o), "before\n");
    let o = detrun(&["--", "sh", "-c", "kill -TERM $$"]);
    assert_eq!(code(&o), 143);
}

#[test]
fn missing_program_is_127_with_its_name() {
    let o = detrun(&["--", "no-such-program-xyz"]);
    assert_eq!(code(&o), 127);
    assert!(stderr(&o).contains("no-such-program-xyz"), "{}", stderr(&o));
    let o = detrun(&["--", "/etc/passwd"]);
    assert_eq!(code(&o), 126, "not executable: {}", stderr(&o));
}

fn processes_with(marker: &str) -> Vec<u32> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let zombie = state
            .rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z'));
        if !zombie && String::from_utf8_lossy(&cmd).contains(marker) {
            v.push(pid);
        }
    }
    v
}

/// Acceptance 5: killing detrun with SIGKILL leaves no guest alive.
#[test]
fn sigkill_of_detrun_leaves_no_guest() {
    let marker = format!("detrun-marker-{}", std::process::id());
    let script = "(while :; do :; done) & (sleep 1000000; echo) & while :; do :; done";
    let mut child = Command::new(detrun_bin())
        .args(["--", "sh", "-c", script, &marker])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the guest's processes exist.
    let t = Instant::now();
    while processes_with(&marker).len() < 2 {
        assert!(t.elapsed() < Duration::from_secs(20), "guest did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let t = Instant::now();
    loop {
        let left = processes_with(&marker);
        if left.is_empty() {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "guest processes survived detrun: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGTERM sent to detrun reaches the guest (Docker's `stop`).
#[test]
fn sigterm_is_forwarded_to_the_guest() {
    let script = "trap 'echo got-term; exit 3' TERM; echo ready; while :; do sleep 1; done";
    let mut child = Command::new(detrun_bin())
        .args(["--", "sh", "-c", script])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    use std::io::{BufRead, BufReader};
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, "ready\n");
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    line.clear();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, "got-term\n");
    let st = child.wait().unwrap();
    assert_eq!(st.code(), Some(3));
}

/// detrun as PID 1 (a container entrypoint) runs and reaps.
#[test]
fn detrun_as_pid_1() {
    let o = run_bounded(
        {
            let mut c = Command::new("unshare");
            c.args(["--pid", "--fork", "--mount-proc"])
                .arg(detrun_bin())
                .args(["--", "sh", "-c", "sleep 5 & sleep 1 & wait; echo reaped"]);
            c
        },
        RUN_LIMIT,
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o), "reaped\n");
}

/// Acceptance 6: the README's two commands, and `.ci/run` runs the same
/// test command.
#[test]
fn readme_states_the_setup_commands() {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let ci = std::fs::read_to_string(root().join(".ci/run")).expect(".ci/run");
    let test_cmd = "./scripts/test.sh";
    assert!(
        readme.contains(test_cmd),
        "README must give the test command {test_cmd}"
    );
    assert!(ci.contains(test_cmd), ".ci/run must run {test_cmd}");
    assert!(
        readme.contains("detrun -- "),
        "README must show detrun on a real program"
    );
}

/// Acceptance 7: every option in --help has an example.
#[test]
fn help_documents_every_option_with_an_example() {
    let o = detrun(&["--help"]);
    assert_eq!(code(&o), 0);
    let help = stdout(&o);
    // An option starts a line indented by at most 6 spaces; its
    // description runs until the next option.
    let mut blocks: Vec<(String, String)> = Vec::new();
    for line in help.lines() {
        if line.starts_with("EXAMPLES") {
            break;
        }
        let indent = line.len() - line.trim_start().len();
        let t = line.trim_start();
        if indent <= 6 && t.starts_with('-') {
            let name = t.split([' ', ',']).next().unwrap_or("").to_string();
            blocks.push((name, t.to_string()));
        } else if let Some(b) = blocks.last_mut() {
            b.1.push(' ');
            b.1.push_str(t);
        }
    }
    assert!(blocks.len() >= 10, "too few options found in:\n{help}");
    for (opt, text) in &blocks {
        if opt == "-h" || opt == "-V" {
            continue;
        }
        assert!(
            text.contains("Example"),
            "option {opt} has no example: {text}"
        );
    }
    assert!(help.contains("EXIT STATUS"), "{help}");
}

/// A tracee cannot trace: refused with EPERM and listed as a hazard.
#[test]
fn guest_ptrace_is_refused_and_reported() {
    let bin = build_c("hazard_ptrace", false);
    let dir = std::env::temp_dir().join(format!("detrun-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("ptrace.json");
    let o = detrun(&[
        "--summary-json",
        json.to_str().unwrap(),
        "--",
        bin.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0);
    assert!(
        stdout(&o).starts_with("ptrace: -1 Operation not permitted"),
        "{}",
        stdout(&o)
    );
    let sum: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let hazards = sum["hazards"].to_string();
    assert!(hazards.contains("ptrace"), "{hazards}");
    // --strict turns the hazard into a failure.
    let o = detrun(&["--strict", "--", bin.to_str().unwrap()]);
    assert_eq!(code(&o), 122);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `kill -9 $$` works: the guest is not its namespace's init.
#[test]
fn kill_minus_nine_self() {
    assert_eq!(
        code(&detrun(&["--", "sh", "-c", "kill -9 $$; echo survived"])),
        137
    );
}

/// The summary counts what happened, in JSON.
#[test]
fn summary_json_counts_syscalls_and_virtual_time() {
    let dir = std::env::temp_dir().join(format!("detrun-sum-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("s.json");
    let o = detrun(&[
        "--summary-json",
        json.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "sleep 3; echo x | cat",
    ]);
    assert_eq!(code(&o), 0);
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(s["virtual_ns"].as_u64().unwrap() >= 3_000_000_000, "{s}");
    assert!(s["processes"].as_u64().unwrap() >= 3, "{s}");
    assert!(
        s["syscalls"]["clock_nanosleep"].as_u64().unwrap() >= 1,
        "{s}"
    );
    assert_eq!(s["exit_code"], 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// An AF_INET socket is virtual (no hazard, fine under --strict); with
/// --net=host it is a hazard and --strict refuses it.
#[test]
fn inet_sockets_are_reported_only_on_the_host_network() {
    let inet = "import socket; socket.socket(); print('made')";
    let o = detrun(&["--summary", "--", "python3", "-c", inet]);
    assert_eq!(stdout(&o), "made\n");
    assert!(
        stderr(&o).contains("hazards             none"),
        "{}",
        stderr(&o)
    );
    let o = detrun(&["--strict", "--", "python3", "-c", inet]);
    assert_eq!(code(&o), 0, "{}", show(&o));
    let o = detrun(&["--net=host", "--summary", "--", "python3", "-c", inet]);
    assert!(stderr(&o).contains("network: AF_INET"), "{}", stderr(&o));
    let o = detrun(&["--net=host", "--strict", "--", "python3", "-c", inet]);
    assert_ne!(code(&o), 0, "--strict must refuse the host network");
}

/// The guest gets SIGPIPE as detrun's parent left it, not as Rust's
/// runtime sets it for detrun: `detrun -- yes | head -1` dies of SIGPIPE
/// silently as natively (141), and a parent that ignores SIGPIPE still
/// passes that on (yes then reports the broken pipe and exits 1).
#[test]
fn guest_inherits_sigpipe_disposition() {
    let d = detrun_bin();
    let run = |prelude: &str| {
        let script = format!(
            "{prelude} set -o pipefail; '{}' -- yes | head -1",
            d.display()
        );
        Command::new("bash")
            .arg("-c")
            .arg(script)
            .output()
            .expect("bash")
    };
    let o = run("");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(141), "stderr: {err}");
    assert!(err.is_empty(), "silent as natively: {err}");
    assert_eq!(String::from_utf8_lossy(&o.stdout), "y\n");
    let o = run("trap '' PIPE;");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "stderr: {err}");
    assert!(err.contains("Broken pipe"), "{err}");
}
