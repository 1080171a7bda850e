//! Shared harness for the integration tests: locate (or build) the `detrun`
//! binary, compile guest programs from `testdata/`, run things and compare.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, OnceLock};

/// Root of the workspace (the directory holding `testdata/`).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

fn target_dir() -> PathBuf {
    // current_exe is target/<profile>/deps/<test>-<hash>
    let exe = std::env::current_exe().expect("current_exe");
    exe.parent()
        .and_then(|p| p.parent())
        .expect("target/<profile>")
        .to_path_buf()
}

/// Path of the `detrun` binary of the same profile as the test, building it
/// if it is missing (so `cargo test` alone works from a clean clone).
pub fn detrun_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let dir = target_dir();
        let bin = dir.join("detrun");
        let release = dir.file_name().is_some_and(|n| n == "release");
        // The static build (scripts/build.sh), the one the README gives.
        let mut cmd = Command::new("bash");
        cmd.arg(root().join("scripts").join("build.sh"))
            .env("CARGO", env!("CARGO"))
            .current_dir(root());
        if !release {
            cmd.arg("--debug");
        }
        let st = cmd.status().expect("run scripts/build.sh");
        assert!(st.success(), "building detrun failed");
        assert!(bin.exists(), "detrun binary not found at {}", bin.display());
        bin
    })
    .clone()
}

/// Directory where compiled guests go.
pub fn guest_dir() -> PathBuf {
    let d = target_dir().join("guests");
    std::fs::create_dir_all(&d).expect("create guest dir");
    d
}

/// Compile `testdata/<name>.c` with gcc (`-pthread`, optionally `-static`)
/// and return the binary's path. Compilation failures fail the test loudly.
pub fn build_c(name: &str, static_: bool) -> PathBuf {
    static LOCK: Mutex<()> = Mutex::new(());
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let src = root().join("testdata").join(format!("{name}.c"));
    assert!(src.exists(), "missing guest source {}", src.display());
    let out = guest_dir().join(if static_ {
        format!("{name}.static")
    } else {
        name.to_string()
    });
    let fresh = match (std::fs::metadata(&src), std::fs::metadata(&out)) {
        (Ok(s), Ok(o)) => o.modified().ok() >= s.modified().ok(),
        _ => false,
    };
    if !fresh {
        let mut cmd = Command::new("gcc");
        cmd.args(["-O1", "-g", "-Wall", "-pthread", "-o"])
            .arg(&out)
            .arg(&src);
        if static_ {
            cmd.arg("-static");
        }
        let o = cmd.output().expect("gcc must be installed (see .ci/run)");
        assert!(
            o.status.success(),
            "gcc failed for {name}:\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    out
}

/// Run `detrun ARGS...` with stdin closed, capturing output.
pub fn detrun(args: &[&str]) -> Output {
    detrun_in(args, &root())
}

/// Like [`detrun`] but in a given working directory.
pub fn detrun_in(args: &[&str], cwd: &Path) -> Output {
    let mut cmd = Command::new(detrun_bin());
    cmd.args(args).current_dir(cwd);
    run_bounded(cmd, RUN_LIMIT)
}

/// A hung run must fail its test, not hang the suite.
pub const RUN_LIMIT: std::time::Duration = std::time::Duration::from_secs(120);

/// Run with stdin closed, capturing output, killing the child after `limit`.
/// Wait for `child`; kill it and fail the test after `limit`.
pub fn wait_limited(
    child: &mut std::process::Child,
    limit: std::time::Duration,
    what: &str,
) -> std::process::ExitStatus {
    let start = std::time::Instant::now();
    loop {
        if let Some(st) = child.try_wait().expect("wait") {
            return st;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not finish within {limit:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

pub fn run_bounded(mut cmd: Command, limit: std::time::Duration) -> Output {
    use std::io::Read;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let t_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let t_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let status = wait_limited(&mut child, limit, &format!("{cmd:?}"));
    Output {
        status,
        stdout: t_out.join().unwrap_or_default(),
        stderr: t_err.join().unwrap_or_default(),
    }
}

/// Run a program natively with stdin closed.
pub fn native(prog: &str, args: &[&str]) -> Output {
    Command::new(prog)
        .args(args)
        .current_dir(root())
        .stdin(Stdio::null())
        .output()
        .expect("spawn native")
}

/// Exit code, or 128+signal like a shell.
pub fn code(o: &Output) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    o.status
        .code()
        .unwrap_or_else(|| 128 + o.status.signal().unwrap_or(0))
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Assert two runs are byte-identical in stdout and exit status, with a
/// readable first difference.
pub fn assert_same(a: &Output, b: &Output, what: &str) {
    let (sa, sb) = (stdout(a), stdout(b));
    if sa != sb {
        let first = sa
            .lines()
            .zip(sb.lines())
            .position(|(x, y)| x != y)
            .unwrap_or(sa.lines().count().min(sb.lines().count()));
        panic!(
            "{what}: outputs differ at line {first}:\n--- a\n{}\n--- b\n{}\n--- stderr a\n{}",
            sa.lines().nth(first).unwrap_or("<eof>"),
            sb.lines().nth(first).unwrap_or("<eof>"),
            stderr(a)
        );
    }
    assert_eq!(code(a), code(b), "{what}: exit statuses differ");
}

/// A CPU hog on the other core for the lifetime of the value: determinism
/// must hold under load.
pub struct Hog(std::process::Child);

impl Hog {
    pub fn start() -> Hog {
        let c = Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn hog");
        Hog(c)
    }
}

impl Drop for Hog {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A fresh scratch directory for one test: `<tmp>/detrun-<suite>-tests-<pid>-<name>`.
pub fn scratch_dir(suite: &str, name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "detrun-{suite}-tests-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create scratch dir");
    d
}

pub fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// `detrun ARGS...` from the workspace root, killed after `limit`.
pub fn detrun_limit(args: &[&str], limit: std::time::Duration) -> Output {
    let mut cmd = Command::new(detrun_bin());
    cmd.args(args).current_dir(root());
    run_bounded(cmd, limit)
}

/// An output's status, stdout and stderr, for failure messages.
pub fn show(o: &Output) -> String {
    format!(
        "exit status {}\n--- stdout\n{}\n--- stderr\n{}",
        code(o),
        stdout(o),
        stderr(o)
    )
}

/// Run `detrun ARGS` (a replay of failing seed `seed` of `guest`) `times`
/// times: every run must fail, with the hunted run's exit code when known,
/// and with the guest's own message on stderr (`GUEST:`).
pub fn assert_replays_fail(
    guest: &str,
    seed: u64,
    args: &[&str],
    expected: Option<i64>,
    times: usize,
) {
    for i in 0..times {
        let p = detrun(args);
        assert_ne!(
            code(&p),
            0,
            "{guest}: replay {i} of failing seed {seed} (`detrun {}`) passed:\n{}",
            args.join(" "),
            show(&p)
        );
        if let Some(c) = expected {
            assert_eq!(
                code(&p) as i64,
                c,
                "{guest}: replay {i} of seed {seed} exited unlike the hunted run:\n{}",
                show(&p)
            );
        }
        assert!(
            stderr(&p).contains(&format!("{guest}:")),
            "{guest}: replay {i} of seed {seed} failed for another reason:\n{}",
            show(&p)
        );
    }
}

/// Run `detrun --summary-json FILE ARGS` (FILE in the suite's scratch
/// directory `name`); the summary is Null if the run wrote none.
pub fn detrun_summary(suite: &str, name: &str, args: &[&str]) -> (Output, serde_json::Value) {
    let json = scratch_dir(suite, name).join("s.json");
    let mut a = vec!["--summary-json", path_str(&json)];
    a.extend_from_slice(args);
    let o = detrun(&a);
    let v = std::fs::read_to_string(&json)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(serde_json::Value::Null);
    (o, v)
}

/// Run `detrun ARGS` `n` times; every run must exit 0 and be byte-identical
/// (stdout, stderr and status) to the first. Returns the first run.
pub fn same_runs(n: usize, args: &[&str], what: &str) -> Output {
    let first = detrun(args);
    assert_eq!(
        code(&first),
        0,
        "{what}: `detrun {}` failed:\n{}",
        args.join(" "),
        show(&first)
    );
    for i in 1..n {
        let again = detrun(args);
        assert_same(&first, &again, &format!("{what} (run {i} vs run 0)"));
    }
    first
}

/// Build the Go guest in testdata/NAME with `go build`; returns the binary.
pub fn build_go(name: &str) -> PathBuf {
    let out = guest_dir().join(name);
    let o = Command::new("go")
        .args(["build", "-buildvcs=false", "-o"])
        .arg(&out)
        .arg(".")
        .current_dir(root().join("testdata").join(name))
        .output()
        .expect("`go` must be installed to test the Go guests (apt-get install golang-go)");
    assert!(
        o.status.success(),
        "go build of testdata/{name} failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

/// Build the Rust guest crate in testdata/NAME (its own workspace, release);
/// returns the binary.
pub fn build_cargo_guest(name: &str) -> PathBuf {
    let guest = root().join("testdata").join(name);
    let target = guest.join("target");
    let st = Command::new(env!("CARGO"))
        .args(["build", "--release", "--manifest-path"])
        .arg(guest.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target)
        .current_dir(root())
        .status()
        .unwrap_or_else(|e| panic!("run cargo build for {name}: {e}"));
    assert!(st.success(), "building testdata/{name} failed");
    let bin = target.join("release").join(name);
    assert!(bin.exists(), "{} missing after build", bin.display());
    bin
}
