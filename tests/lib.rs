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
        let mut cmd = Command::new(env!("CARGO"));
        cmd.args(["build", "-q", "-p", "detrun"]).current_dir(root());
        if release {
            cmd.arg("--release");
        }
        let st = cmd.status().expect("cargo build -p detrun");
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
    Command::new(detrun_bin())
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .output()
        .expect("spawn detrun")
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
