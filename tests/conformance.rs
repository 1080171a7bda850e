//! Conformance: small self-deterministic C guests (`testdata/conf_*.c`) must
//! behave under `detrun` exactly as they do natively.
//!
//! Each guest exercises files, pipes, fork/exec/wait, signals or threads and
//! prints only things that do not depend on timing, pids, addresses or
//! scheduling, so its native stdout and exit status are the reference: a
//! correct sandbox must reproduce both byte for byte.

use detrun_tests::{build_c, code, detrun, native, stderr, stdout};
use std::process::Output;

/// At most this many lines of each output are shown in a failure message.
const SHOW_LINES: usize = 40;

fn excerpt(s: &str) -> String {
    let lines: Vec<&str> = s.lines().collect();
    let mut out: String = lines
        .iter()
        .take(SHOW_LINES)
        .map(|l| format!("    | {l}\n"))
        .collect();
    if lines.len() > SHOW_LINES {
        out.push_str(&format!(
            "    | ... ({} more lines)\n",
            lines.len() - SHOW_LINES
        ));
    }
    if out.is_empty() {
        out.push_str("    | <empty>\n");
    }
    out
}

fn describe(o: &Output) -> String {
    format!(
        "exit {}\n  stdout:\n{}  stderr:\n{}",
        code(o),
        excerpt(&stdout(o)),
        excerpt(&stderr(o))
    )
}

/// Build `testdata/<name>.c`, run it natively and under `detrun`, and require
/// identical stdout and exit status.
fn check(name: &str, static_: bool) {
    let kind = if static_ { "static" } else { "dynamic" };
    let bin = build_c(name, static_);
    let bin = bin.to_str().expect("guest path is UTF-8");

    let nat = native(bin, &[]);
    assert_eq!(
        code(&nat),
        0,
        "{name} ({kind}): the guest itself fails natively, fix the guest first\n  native: {}",
        describe(&nat)
    );

    let det = detrun(&["--", bin]);
    let (sn, sd) = (stdout(&nat), stdout(&det));
    if sn != sd {
        let (ln, ld): (Vec<&str>, Vec<&str>) = (sn.lines().collect(), sd.lines().collect());
        let first = ln
            .iter()
            .zip(ld.iter())
            .position(|(a, b)| a != b)
            .unwrap_or(ln.len().min(ld.len()));
        panic!(
            "{name} ({kind}): stdout under detrun differs from native at line {}\n  \
             native: {:?}\n  detrun: {:?}\n\nnative run: {}\ndetrun run: {}",
            first + 1,
            ln.get(first).copied().unwrap_or("<end of output>"),
            ld.get(first).copied().unwrap_or("<end of output>"),
            describe(&nat),
            describe(&det)
        );
    }
    assert_eq!(
        code(&det),
        code(&nat),
        "{name} ({kind}): exit status under detrun differs from native (stdout matched)\n\
         detrun run: {}",
        describe(&det)
    );
}

/// `guest!(name)` adds test `name::dynamic`; `guest!(name, static)` also adds
/// `name::static_linked` for the `-static` build.
macro_rules! guest {
    ($name:ident) => {
        mod $name {
            #[test]
            fn dynamic() {
                super::check(stringify!($name), false);
            }
        }
    };
    ($name:ident, static) => {
        mod $name {
            #[test]
            fn dynamic() {
                super::check(stringify!($name), false);
            }

            #[test]
            fn static_linked() {
                super::check(stringify!($name), true);
            }
        }
    };
}

/// `guests! { a, b: static, ... }` expands `guest!` for each entry and
/// records the names in `ALL_GUESTS`.
macro_rules! guests {
    ($($name:ident $(: $st:ident)?),* $(,)?) => {
        $(guest!($name $(, $st)?);)*

        const ALL_GUESTS: &[&str] = &[$(stringify!($name)),*];
    };
}

guests! {
    // Files and descriptors.
    conf_files,
    conf_dup_fcntl,
    conf_getdents_sorted,
    conf_mmap,
    conf_fifo,
    conf_badptr: static,
    // Pipes and sockets.
    conf_pipe,
    conf_big_pipe_write,
    conf_poll_pipe,
    conf_socketpair,
    conf_pipeline_fork,
    // The virtual network: AF_INET/AF_INET6 on loopback.
    conf_net_tcp: static,
    conf_net_udp: static,
    conf_net_v6,
    conf_net_badptr: static,
    // Processes: fork, exec, wait, exit statuses.
    conf_fork_wait: static,
    conf_exec: static,
    conf_vfork: static,
    conf_waitpid_order,
    conf_exit_codes: static,
    conf_exec_thread: static,
    // Signals.
    conf_signals: static,
    conf_sigprocmask,
    conf_sigchld,
    conf_kill_child,
    conf_alarm_handler,
    conf_itimer,
    // Threads and synchronization.
    conf_threads_join: static,
    conf_clone_cleartid: static,
    conf_mutex,
    conf_condvar,
    conf_sem_shared,
}

/// Every `testdata/conf_*.c` must have a test above (and vice versa).
#[test]
fn all_guests_registered() {
    let dir = detrun_tests::root().join("testdata");
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .expect("read testdata/")
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            let stem = name.strip_suffix(".c")?;
            stem.starts_with("conf_").then(|| stem.to_string())
        })
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = ALL_GUESTS.iter().map(|s| s.to_string()).collect();
    listed.sort();
    assert_eq!(
        on_disk, listed,
        "testdata/conf_*.c and the guests! list in tests/conformance.rs disagree"
    );
}
