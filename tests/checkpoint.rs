//! Acceptance tests of checkpoints and alternate histories (issue 8): a
//! branch run from a fork-based checkpoint is the same run as that branch
//! replayed from scratch (output, exit status, schedule trace), `explore`
//! shows when a failure became likely, checkpoints beat re-execution, and
//! nothing is left alive afterwards.

// Branches and resumed runs are compared with chaos at syscall, sync-op
// and thread-start points (`--chaos-insns 0`): instruction-level points do
// not yet land on the same instruction in a copy as in a run from scratch
// in every case (copy mode's filter traps calls a plain run does not, and
// answers some at their seccomp stop); two such cases are fixed, others
// remain (issue 17's closing note).

use detrun_tests::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(120);

/// `detrun ARGS` with stdout and stderr going to `dir/NAME.out|err` (files,
/// so that branch outputs can start with the output before the checkpoint).
fn to_files(args: &[&str], dir: &Path, name: &str) -> i32 {
    let f = |ext: &str| std::fs::File::create(dir.join(format!("{name}.{ext}"))).expect("create");
    let mut cmd = Command::new(detrun_bin());
    cmd.args(args)
        .current_dir(root())
        .stdin(Stdio::null())
        .stdout(f("out"))
        .stderr(f("err"));
    let mut child = cmd.spawn().expect("start detrun");
    let st = wait_limited(&mut child, LIMIT, &format!("detrun {args:?}"));
    use std::os::unix::process::ExitStatusExt;
    st.code().unwrap_or_else(|| 128 + st.signal().unwrap_or(0))
}

/// `detrun --seed 4 --chaos --chaos-insns 0 EXTRA -- GUEST`: chaos at
/// syscall, sync-op and thread-start points (see DESIGN-NOTES, copies).
fn chaos_at_syscalls(guest: &str, extra: &[&str]) -> std::process::Output {
    let mut a = vec!["--seed", "4", "--chaos", "--chaos-insns", "0"];
    a.extend_from_slice(extra);
    a.extend_from_slice(&["--", guest]);
    detrun_limit(&a, LIMIT)
}

fn read(p: PathBuf) -> Vec<u8> {
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// For `points` × `seeds`: the branches from one checkpoint per point must
/// equal the same branches run from scratch, byte for byte.
fn branches_match_scratch(guest: &str, points: &[&str], seeds: &[u64]) {
    branches_match_scratch_args(guest, &[], points, seeds)
}

fn branches_match_scratch_args(guest: &str, gargs: &[&str], points: &[&str], seeds: &[u64]) {
    let bin = build_c(guest, false);
    let g = path_str(&bin);
    let dir = scratch_dir("checkpoint", guest);
    let d = path_str(&dir);
    let mut distinct = std::collections::BTreeSet::new();
    for (i, at) in points.iter().enumerate() {
        let out = dir.join(format!("p{i}"));
        std::fs::create_dir_all(&out).expect("mkdir");
        let trace = out.join("base.trace");
        let mut args = vec![
            "--seed",
            "3",
            "--chaos",
            "--chaos-insns",
            "0",
            "--checkpoint-at",
            at,
            "--branch-out",
            path_str(&out),
            "--trace",
            path_str(&trace),
        ];
        let seed_args: Vec<String> = seeds.iter().map(|s| format!("--branch-seed={s}")).collect();
        args.extend(seed_args.iter().map(|s| s.as_str()));
        args.extend(["--", g]);
        args.extend(gargs);
        to_files(&args, &out, "base");
        let results = String::from_utf8_lossy(&read(out.join("results.json"))).into_owned();
        for &b in seeds {
            let name = format!("s{i}-{b}");
            let strace = dir.join(format!("{name}.trace"));
            let bs = b.to_string();
            let rc = to_files(
                &[
                    "--seed",
                    "3",
                    "--chaos",
                    "--chaos-insns",
                    "0",
                    "--branch-at",
                    at,
                    "--branch-seed",
                    &bs,
                    "--trace",
                    path_str(&strace),
                    "--",
                    g,
                ]
                .iter()
                .chain(gargs)
                .copied()
                .collect::<Vec<_>>(),
                &dir,
                &name,
            );
            let what = format!("{guest} at {at}, branch seed {b}");
            let ck_out = read(out.join(format!("c0-b{b}.out")));
            assert_eq!(
                String::from_utf8_lossy(&ck_out),
                String::from_utf8_lossy(&read(dir.join(format!("{name}.out")))),
                "{what}: stdout differs between the checkpoint branch and the replay from scratch"
            );
            assert_eq!(
                read(out.join(format!("c0-b{b}.err"))),
                read(dir.join(format!("{name}.err"))),
                "{what}: stderr differs"
            );
            assert!(
                read(out.join(format!("c0-b{b}.trace"))) == read(strace.clone()),
                "{what}: schedule traces differ ({d})"
            );
            assert!(
                results.contains(&format!("\"seed\": {b},\n    \"exit_code\": {rc},")),
                "{what}: exit status {rc} from scratch, results.json says otherwise:\n{results}"
            );
            distinct.insert(ck_out);
        }
    }
    // The branches are alternate histories, not copies of one run.
    assert!(
        distinct.len() >= points.len() * seeds.len() / 2,
        "{guest}: only {} distinct outputs among the branches",
        distinct.len()
    );
}

#[test]
fn threads_branch_from_checkpoint_equals_scratch() {
    // With a CPU hog on both cores: wall-clock timing must not leak in.
    let _hogs = (Hog::start(), Hog::start());
    branches_match_scratch(
        "ckpt_threads",
        &["4ms", "12ms", "21ms", "30ms"],
        &[1, 2, 3, 4, 5],
    );
}

#[test]
fn processes_and_pipe_branch_from_checkpoint_equals_scratch() {
    let _hogs = (Hog::start(), Hog::start());
    branches_match_scratch(
        "ckpt_procs",
        &["5ms", "17ms", "29ms", "41ms"],
        &[1, 2, 3, 4, 5],
    );
}

#[test]
fn resuming_from_a_checkpoint_is_the_run_itself() {
    // No branch seed: the run goes on from the copy unchanged.
    for guest in ["ckpt_threads", "ckpt_procs"] {
        let bin = build_c(guest, false);
        let g = path_str(&bin);
        let plain = detrun_limit(
            &["--seed", "7", "--chaos", "--chaos-insns", "0", "--", g],
            LIMIT,
        );
        let ck = detrun_limit(
            &[
                "--seed",
                "7",
                "--chaos",
                "--chaos-insns",
                "0",
                "--checkpoint-at",
                "20ms",
                "--",
                g,
            ],
            LIMIT,
        );
        assert_same(&plain, &ck, guest);
        assert_eq!(code(&ck), 0, "{}", show(&ck));
    }
}

#[test]
fn shell_and_python_resume_from_checkpoints() {
    // Pipelines, command substitution, a background job, Python threads and
    // a subprocess (vfork + exec): resuming from a checkpoint anywhere in the
    // run gives the run itself, and branches equal their scratch replays.
    let dir = scratch_dir("checkpoint", "real");
    let sh = dir.join("s.sh");
    std::fs::write(
        &sh,
        "for i in 1 2 3 4 5 6; do echo \"tick $i $$\"; sleep 0.01; done | while read l; do echo \"got $l\"; done\n\
         echo \"sub: $(echo inner; sleep 0.005; echo inner2)\"\n\
         ( sleep 0.02; echo bg done ) &\nwait\necho end $?\n",
    )
    .expect("write script");
    let py = dir.join("p.py");
    std::fs::write(
        &py,
        "import threading, time, random, os, subprocess\n\
         out = []\nlock = threading.Lock()\n\
         def w(i):\n    for k in range(5):\n        with lock:\n            out.append((i, k, random.random() < 0.5))\n        time.sleep(0.002 * (i + 1))\n\
         ts = [threading.Thread(target=w, args=(i,)) for i in range(3)]\n\
         [t.start() for t in ts]\n[t.join() for t in ts]\nprint(out)\nprint(os.getpid(), os.getppid())\n\
         r = subprocess.run(['sh', '-c', 'echo child $$; exit 3'], capture_output=True, text=True)\n\
         print(r.returncode, r.stdout.strip(), time.monotonic())\n",
    )
    .expect("write script");
    let cases: [(&str, &str, &[&str]); 2] = [
        ("sh", path_str(&sh), &["5ms", "25ms", "45ms"]),
        ("python3", path_str(&py), &["5ms", "15ms", "25ms"]),
    ];
    for (prog, script, points) in cases {
        let plain = detrun_limit(
            &[
                "--seed",
                "2",
                "--chaos",
                "--chaos-insns",
                "0",
                "--",
                prog,
                script,
            ],
            LIMIT,
        );
        assert_eq!(code(&plain), 0, "{}", show(&plain));
        for at in points {
            let ck = detrun_limit(
                &[
                    "--seed",
                    "2",
                    "--chaos",
                    "--chaos-insns",
                    "0",
                    "--checkpoint-at",
                    at,
                    "--",
                    prog,
                    script,
                ],
                LIMIT,
            );
            assert!(
                !stderr(&ck).contains("checkpoint"),
                "{prog} at {at}: {}",
                show(&ck)
            );
            assert_same(&plain, &ck, &format!("{prog} resumed from {at}"));
            let b = detrun_limit(
                &[
                    "--seed",
                    "2",
                    "--chaos",
                    "--chaos-insns",
                    "0",
                    "--checkpoint-at",
                    at,
                    "--branch-seed",
                    "5",
                    "--",
                    prog,
                    script,
                ],
                LIMIT,
            );
            assert!(
                !stderr(&b).contains("checkpoint"),
                "{prog} branch at {at}: {}",
                show(&b)
            );
            let s = detrun_limit(
                &[
                    "--seed",
                    "2",
                    "--chaos",
                    "--chaos-insns",
                    "0",
                    "--branch-at",
                    at,
                    "--branch-seed",
                    "5",
                    "--",
                    prog,
                    script,
                ],
                LIMIT,
            );
            assert_same(&s, &b, &format!("{prog} branch 5 at {at}"));
        }
    }
}

#[test]
fn conformance_guests_resume_from_a_checkpoint() {
    // Signals, SIGCHLD siginfo, wait orders, exec, pipes, files, mmap,
    // threads, bad pointers: a checkpoint early in the run (where most
    // of these short guests still run) and the resume give the run itself.
    let guests = [
        "conf_alarm_handler",
        "conf_badptr",
        "conf_big_pipe_write",
        "conf_clone_cleartid",
        "conf_condvar",
        "conf_exec",
        "conf_exec_thread",
        "conf_exit_codes",
        "conf_files",
        "conf_fork_wait",
        "conf_getdents_sorted",
        "conf_itimer",
        "conf_kill_child",
        "conf_mmap",
        "conf_mutex",
        "conf_pipe",
        "conf_pipeline_fork",
        "conf_poll_pipe",
        "conf_sem_shared",
        "conf_sigchld",
        "conf_signals",
        "conf_sigprocmask",
        "conf_threads_join",
        "conf_waitpid_order",
        "sched_counter",
        "sched_pipes",
        "sched_prodcons",
        "nondet",
    ];
    for guest in guests {
        let bin = build_c(guest, false);
        let g = path_str(&bin);
        let plain = chaos_at_syscalls(g, &[]);
        let mut taken = 0;
        for at in ["1us", "300us", "1ms"] {
            let ck = chaos_at_syscalls(g, &["--checkpoint-at", at]);
            if stderr(&ck).contains("no checkpoint was taken") {
                continue; // the guest ended before `at`
            }
            taken += 1;
            assert_eq!(stdout(&plain), stdout(&ck), "{guest} resumed from {at}");
            assert_eq!(
                code(&plain),
                code(&ck),
                "{guest} resumed from {at}: {}",
                show(&ck)
            );
        }
        assert!(taken > 0, "{guest}: no checkpoint was ever taken");
    }
    // What a checkpoint cannot copy: refused with the reason, or (if the
    // first scheduling point comes before it exists) taken and faithful.
    for (guest, why) in [
        ("conf_socketpair", "socket"),
        ("conf_vfork", "vfork"),
        ("conf_fifo", "blocked in the kernel"),
        ("conf_dup_fcntl", "file lock"),
    ] {
        let bin = build_c(guest, false);
        let g = path_str(&bin);
        let plain = chaos_at_syscalls(g, &[]);
        let ck = chaos_at_syscalls(g, &["--checkpoint-at", "1us"]);
        let err = stderr(&ck);
        if err.contains("no checkpoint was taken") {
            assert!(err.contains(why), "{guest}: {}", show(&ck));
        } else {
            assert_eq!(stdout(&plain), stdout(&ck), "{guest}");
        }
    }
    // A socket open at the checkpoint is always refused.
    let ck = detrun_limit(
        &[
            "--checkpoint-at",
            "500ms",
            "--",
            "python3",
            "-c",
            "import socket, time\na, b = socket.socketpair()\ntime.sleep(0.6)\ntime.sleep(0.6)\nprint('ok')",
        ],
        LIMIT,
    );
    let err = stderr(&ck);
    assert!(
        err.contains("socket") && err.contains("no checkpoint was taken"),
        "{}",
        show(&ck)
    );
    assert_eq!(stdout(&ck), "ok\n");
}

#[test]
fn a_branch_costs_only_the_memory_it_changes() {
    // 64 MB written before the checkpoint, 2 or 16 MB after it: the
    // branch's private memory is about what it wrote (copy-on-write).
    let bin = build_c("ckpt_memory", false);
    let dir = scratch_dir("checkpoint", "memory");
    for dirty_mb in [2u64, 16] {
        let out = dir.join(format!("d{dirty_mb}"));
        std::fs::create_dir_all(&out).expect("mkdir");
        let mb = dirty_mb.to_string();
        let o = detrun_limit(
            &[
                "--checkpoint-at",
                "1us",
                "--branch-seed",
                "1",
                "--branch-out",
                path_str(&out),
                "--",
                path_str(&bin),
                "64",
                &mb,
            ],
            LIMIT,
        );
        assert_eq!(code(&o), 0, "{}", show(&o));
        let v: serde_json::Value =
            serde_json::from_slice(&read(out.join("results.json"))).expect("results.json");
        let kb = v[0]["private_dirty_kb"].as_u64().expect("private_dirty_kb");
        let want = dirty_mb * 1024;
        assert!(
            kb >= want && kb < want + 4096,
            "{dirty_mb} MB written after the checkpoint, {kb} KB private"
        );
    }
}

#[test]
fn go_tokio_and_node_resume_and_branch() {
    // epoll and eventfd are rebuilt in the copy; V8 keeps its heap out of
    // forks (MADV_DONTFORK), which the checkpoint copies anyway.
    let go = build_go("go_guest");
    let tokio = build_cargo_guest("tokio_guest");
    let dir = scratch_dir("checkpoint", "runtimes");
    let js = dir.join("w.js");
    std::fs::write(
        &js,
        "const { Worker, isMainThread, parentPort } = require('worker_threads');\n\
         if (isMainThread) {\n  let got = [];\n\
           const ws = [0, 1].map(i => { const w = new Worker(__filename); w.on('message', m => got.push(i + ':' + m)); return w; });\n\
           setTimeout(() => { console.log(got.join(' ')); ws.forEach(w => w.terminate()); }, 50);\n\
           setInterval(() => got.push('tick'), 7).unref();\n\
         } else {\n  let n = 0;\n\
           const t = setInterval(() => { parentPort.postMessage(n++); if (n > 4) clearInterval(t); }, 3);\n}\n",
    )
    .expect("write js");
    let cases: [(Vec<&str>, &[&str]); 3] = [
        (vec![path_str(&go)], &["1ms", "5ms"]),
        (vec![path_str(&tokio)], &["1ms", "5ms", "20ms"]),
        (vec!["node", path_str(&js)], &["5ms", "30ms"]),
    ];
    for (cmd, points) in cases {
        let run = |extra: &[&str]| {
            // The runtimes' copies do not yet always equal their scratch
            // runs with sync-op points and spin probes on (Go's branch 2
            // at 1ms differed once in a suite run, not in 20 by hand):
            // compared at syscall points, as before issue 17.
            let mut a = vec![
                "--seed",
                "4",
                "--chaos",
                "--chaos-insns",
                "0",
                "--sync-points",
                "off",
                "--no-spin-points",
            ];
            a.extend(extra);
            a.push("--");
            a.extend(cmd.iter().copied());
            detrun_limit(&a, LIMIT)
        };
        let plain = run(&[]);
        assert_eq!(code(&plain), 0, "{}", show(&plain));
        for &at in points {
            let ck = run(&["--checkpoint-at", at]);
            assert!(
                !stderr(&ck).contains("checkpoint"),
                "{cmd:?} at {at}: {}",
                show(&ck)
            );
            assert_same(&plain, &ck, &format!("{cmd:?} resumed from {at}"));
            let b = run(&["--checkpoint-at", at, "--branch-seed", "2"]);
            let s = run(&["--branch-at", at, "--branch-seed", "2"]);
            assert_same(&s, &b, &format!("{cmd:?} branch 2 at {at}"));
        }
    }
}

fn explore_rows(dir: &Path) -> Vec<(u64, f64, String)> {
    let v: serde_json::Value =
        serde_json::from_slice(&read(dir.join("explore.json"))).expect("explore.json");
    v["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| {
            (
                r["at_ns"].as_u64().expect("at_ns"),
                r["fraction"].as_f64().expect("fraction"),
                r["failing_seeds"].to_string(),
            )
        })
        .collect()
}

/// A failing seed of ckpt_late_race (the race is in the last fifth).
/// Chaos at syscall points only: ckpt_late_race's window holds a yield,
/// and is written for a schedule that rarely preempts in its prefix.
const SYSCALL_CHAOS: [&str; 5] = ["--chaos", "--chaos-insns", "0", "--sync-points", "off"];

fn failing_seed(g: &str) -> u64 {
    (1..200)
        .find(|s| {
            let seed = s.to_string();
            let mut a = vec!["--seed", &seed];
            a.extend(SYSCALL_CHAOS);
            a.extend(["--", g]);
            code(&detrun_limit(&a, LIMIT)) == 1
        })
        .expect("some seed below 200 fails ckpt_late_race")
}

#[test]
fn explore_shows_when_the_failure_became_likely() {
    let bin = build_c("ckpt_late_race", false);
    let g = path_str(&bin);
    let seed = failing_seed(g).to_string();
    let dir = scratch_dir("checkpoint", "explore");
    let o = detrun_limit(
        &[
            "explore",
            "--from-seed",
            &seed,
            "--policy",
            "chaos",
            "--chaos-insns",
            "0",
            "--sync-points",
            "off",
            "--every",
            "20ms",
            "--branches",
            "20",
            "--out",
            path_str(&dir),
            "--",
            g,
        ],
        LIMIT,
    );
    assert_eq!(code(&o), 0, "{}", show(&o));
    assert!(stdout(&o).contains("fraction"), "no table:\n{}", show(&o));
    let rows = explore_rows(&dir);
    assert!(rows.len() >= 10, "too few checkpoints: {rows:?}");
    // The prefix (first half) cannot fail by itself: only the rest of the
    // run can, in some branches (its window holds a sched_yield, and since
    // issue 17 a yield lets the others run under chaos too, so about a
    // third of them). After the lost update every branch fails.
    let half = rows.len() / 2;
    let early: f64 = rows[..half].iter().map(|r| r.1).sum::<f64>() / half as f64;
    let late = rows.last().expect("rows").1;
    assert!(
        early <= 0.5,
        "early checkpoints fail too often ({early}): {rows:?}"
    );
    assert!(
        late >= 0.9,
        "the last checkpoint should fail nearly always: {rows:?}"
    );
    assert!(late > early + 0.4, "{rows:?}");
    // The plot is well-formed SVG with one point per checkpoint.
    let svg = dir.join("explore.svg");
    let py = Command::new("python3")
        .args([
            "-c",
            "import sys, xml.etree.ElementTree as E\n\
             r = E.parse(sys.argv[1]).getroot()\n\
             ns = '{http://www.w3.org/2000/svg}'\n\
             assert r.tag == ns + 'svg', r.tag\n\
             print(len([c for c in r.iter(ns + 'circle') if c.get('data-fraction')]))",
            path_str(&svg),
        ])
        .output()
        .expect("python3 must be installed (see .ci/run)");
    assert!(py.status.success(), "{}", show(&py));
    assert_eq!(
        stdout(&py).trim(),
        rows.len().to_string(),
        "points in the plot"
    );
    // A failing branch replays from scratch as failing.
    let v: serde_json::Value =
        serde_json::from_slice(&read(dir.join("explore.json"))).expect("explore.json");
    let replay = v["rows"]
        .as_array()
        .and_then(|r| r.iter().rev().find_map(|x| x["replay"].as_str()))
        .expect("a replay command")
        .to_string();
    let words: Vec<&str> = replay.split_whitespace().skip(1).collect();
    let o = detrun_limit(&words, LIMIT);
    assert_eq!(code(&o), 1, "{replay}\n{}", show(&o));
}

#[test]
fn explore_with_checkpoints_agrees_with_reexecution_and_leaves_nothing() {
    let bin = build_c("ckpt_late_race", false);
    // A copy with a name of its own, to look for leftovers by.
    let dir = scratch_dir("checkpoint", "agree");
    let exe = dir.join("ckpt_leak_probe");
    std::fs::copy(&bin, &exe).expect("copy guest");
    let g = path_str(&exe);
    let run = |extra: &[&str], out: &str| {
        let o = dir.join(out);
        let mut args = vec![
            "explore",
            "--from-seed",
            "9",
            "--every",
            "40ms",
            "--branches",
            "6",
            "--out",
            path_str(&o),
        ];
        args.extend(extra);
        args.extend(["--", g, "60"]);
        let r = detrun_limit(&args, LIMIT);
        assert_eq!(code(&r), 0, "{}", show(&r));
        (stdout(&r), explore_rows(&o))
    };
    let (t1, r1) = run(&[], "ck");
    let (_, r2) = run(&["--no-checkpoints"], "re");
    let (t3, r3) = run(&["--max-checkpoints", "3"], "keep3");
    assert!(r1.len() >= 3, "{t1}");
    assert_eq!(r1, r2, "checkpoints and re-execution disagree:\n{t1}");
    assert_eq!(
        (t1, r1),
        (t3, r3),
        "keeping 3 checkpoints alive changed the answers"
    );
    // No guest or checkpoint process is left (not even a zombie).
    let left: Vec<String> = std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(|e| {
            let p = e.ok()?.path();
            let comm = std::fs::read_to_string(p.join("comm")).ok()?;
            comm.starts_with("ckpt_leak_probe")
                .then(|| format!("{} {}", p.display(), comm.trim()))
        })
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn a_checkpoint_with_sockets_is_refused_with_the_reason() {
    let bin = build_c("net_echo", false);
    let o = detrun_limit(
        &["--checkpoint-at", "1ms", "--summary", "--", path_str(&bin)],
        LIMIT,
    );
    let err = stderr(&o);
    assert!(
        err.contains("no checkpoint was taken") && err.contains("socket"),
        "{}",
        show(&o)
    );
}

/// Not a timed assertion: prints what checkpoints save on a long prefix.
#[test]
fn bench_explore_checkpoints_vs_reexecution() {
    let bin = build_c("ckpt_late_race", false);
    let g = path_str(&bin);
    let dir = scratch_dir("checkpoint", "bench");
    let mut times = Vec::new();
    for extra in [&[][..], &["--no-checkpoints"][..]] {
        let o = dir.join(format!("o{}", times.len()));
        let mut args = vec![
            "explore",
            "--from-seed",
            "9",
            "--every",
            "200ms",
            "--branches",
            "5",
            "--out",
            path_str(&o),
        ];
        args.extend(extra);
        args.extend(["--", g, "2000"]);
        let t = std::time::Instant::now();
        let r = detrun_limit(&args, LIMIT * 5);
        assert_eq!(code(&r), 0, "{}", show(&r));
        times.push(t.elapsed().as_secs_f64());
    }
    eprintln!(
        "explore, 2000-step prefix, 5 branches per checkpoint: checkpoints {:.2} s, re-execution {:.2} s, ratio {:.2}x",
        times[0],
        times[1],
        times[1] / times[0]
    );
}

#[test]
fn explore_reports_a_program_that_cannot_start() {
    let dir = scratch_dir("checkpoint", "missing");
    let o = detrun_limit(
        &[
            "explore",
            "--from-seed",
            "1",
            "--every",
            "1ms",
            "--out",
            path_str(&dir),
            "--",
            "/no/such/program",
        ],
        LIMIT,
    );
    assert_eq!(code(&o), 127, "{}", show(&o));
    assert!(stderr(&o).contains("/no/such/program"), "{}", show(&o));
}

/// Stat calls answered inside the tracee at patched sites: a branch from a
/// checkpoint numbers files as the branch from scratch does (the patched
/// code is in the copied memory, the numbering tables come back with the
/// checkpoint).
#[test]
fn stat_fast_path_branches_equal_scratch() {
    let _hogs = (Hog::start(), Hog::start());
    branches_match_scratch_args(
        "fast_stat",
        &["threads"],
        &["event:3", "event:8", "event:14", "event:20"],
        &[1, 2, 3, 4, 5],
    );
}
