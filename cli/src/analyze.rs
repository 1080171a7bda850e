//! `detrun analyze`: find the scheduling decision that makes a failing seed
//! fail.
//!
//! 1. Run the seed under its policy, recording its schedule F (n turns); it
//!    must fail. Run the seed under the default policy; it must pass.
//! 2. A prefix F[..k] followed by the default policy is a valid schedule.
//!    F[..0] passes and F[..n] fails: bisect for the smallest k whose
//!    hybrid fails. Turn k is the critical decision: taking it as F did
//!    (thread A) fails, letting the default policy decide (thread B, or A
//!    with a different slice) passes.
//! 3. Replay both hybrids once more to confirm the flip, with a trace and a
//!    backtrace of the thread at that turn, and print both events.

use crate::hunt::{run_child, PolicyArg};
use anyhow::{bail, Context, Result};
use detrun_tracer::schedule::Schedule;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct AnalyzeArgs {
    /// The failing seed. Example: --seed 1337
    #[arg(long)]
    seed: u64,
    /// The policy the seed fails under. Example: --policy pct
    #[arg(long, value_enum, default_value_t = PolicyArg::Chaos)]
    policy: PolicyArg,
    /// Depth for --policy pct. Example: --pct-depth 3
    #[arg(long, default_value_t = 2)]
    pct_depth: u32,
    /// Where to write the schedules (default ./detrun-analyze-SEED).
    /// Example: --out-dir /tmp/an
    #[arg(long, value_name = "DIR")]
    out_dir: Option<PathBuf>,
    /// Wall-clock seconds each probe run may take. Example: --timeout 30
    #[arg(long, default_value_t = 60)]
    timeout: u64,
    /// The command. Example: -- ./flaky-test
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "PROGRAM"
    )]
    command: Vec<OsString>,
}

struct Probe {
    failed: bool,
    stderr: String,
}

fn probe(args: Vec<String>, command: &[OsString], timeout: Duration) -> Result<Probe> {
    let (st, _out, err) = run_child(&args, command, timeout, &[])?;
    let failed = st.is_none_or(|s| s.code() != Some(0));
    Ok(Probe {
        failed,
        stderr: String::from_utf8_lossy(&err).into_owned(),
    })
}

fn write_prefix(full: &Schedule, k: usize, path: &Path) -> Result<()> {
    let s = Schedule {
        seed: full.seed,
        policy: full.policy.clone(),
        turns: full.turns[..k].to_vec(),
    };
    std::fs::write(path, s.render()).with_context(|| format!("writing {}", path.display()))
}

/// The thread and first syscall of turn `turn` (1-based) in a trace.
fn event_at(trace: &str, turn: usize) -> Option<(u64, String)> {
    let mut lines = trace.lines();
    let tag = format!("{{\"d\":{turn},");
    let dec = lines.by_ref().find(|l| l.starts_with(&tag))?;
    let v: serde_json::Value = serde_json::from_str(dec).ok()?;
    let tid = v["run"].as_u64()?;
    for l in lines {
        let e: serde_json::Value = serde_json::from_str(l).ok()?;
        if e.get("d").is_some() {
            break;
        }
        if e["tid"].as_u64() == Some(tid) {
            let args: Vec<String> = e["args"].as_array().map_or(vec![], |a| {
                a.iter().take(4).map(|x| x.to_string()).collect()
            });
            let mut s = format!(
                "thread {tid} calls {}({}) at virtual time {} ns",
                e["sys"].as_str().unwrap_or("?"),
                args.join(", "),
                e["t"]
            );
            if let Some(r) = e.get("ret") {
                s.push_str(&format!(" -> {r}"));
            }
            if let Some(p) = e.get("park") {
                s.push_str(&format!(" (parks on {p})"));
            }
            return Some((tid, s));
        }
    }
    Some((
        tid,
        format!("thread {tid} runs (no syscall before the next turn)"),
    ))
}

fn quote(command: &[OsString]) -> String {
    command
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn analyze(a: &AnalyzeArgs) -> Result<i32> {
    let timeout = Duration::from_secs(a.timeout.max(1));
    let dir = a
        .out_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("detrun-analyze-{}", a.seed)));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let full_path = dir.join("recorded.sched");
    let seed = a.seed.to_string();
    let mut args = vec![
        "--seed".to_string(),
        seed.clone(),
        "--record-schedule".into(),
        full_path.to_string_lossy().into_owned(),
    ];
    args.extend(a.policy.flags(a.pct_depth));
    if !probe(args, &a.command, timeout)?.failed {
        bail!(
            "seed {} does not fail under --policy {}: nothing to analyze",
            a.seed,
            a.policy.name()
        );
    }
    if probe(vec!["--seed".into(), seed.clone()], &a.command, timeout)?.failed {
        bail!("seed {} fails under the default policy too: the failure does not depend on the schedule", a.seed);
    }
    let full = Schedule::load(&full_path).map_err(anyhow::Error::msg)?;
    let n = full.turns.len();
    let probe_path = dir.join("probe.sched");
    let run_prefix = |k: usize| -> Result<Probe> {
        write_prefix(&full, k, &probe_path)?;
        let args = vec![
            "--seed".to_string(),
            seed.clone(),
            "--schedule".into(),
            probe_path.to_string_lossy().into_owned(),
        ];
        probe(args, &a.command, timeout)
    };
    // Invariant: prefix lo passes, prefix hi fails.
    let (mut lo, mut hi) = (0usize, n);
    if !run_prefix(n)?.failed {
        bail!("replaying the recorded schedule does not fail: the failure is not reproducible by schedule alone");
    }
    let mut probes = 3;
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        probes += 1;
        if run_prefix(mid)?.failed {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    let k = hi;
    let fail_sched = dir.join("fail.sched");
    let pass_sched = dir.join("pass.sched");
    write_prefix(&full, k, &fail_sched)?;
    write_prefix(&full, k - 1, &pass_sched)?;
    // Confirm the flip, with traces and backtraces at the critical turn.
    let confirm = |sched: &Path, name: &str| -> Result<(Probe, String)> {
        let trace = dir.join(format!("{name}.trace.jsonl"));
        let args = vec![
            "--seed".to_string(),
            seed.clone(),
            "--schedule".into(),
            sched.to_string_lossy().into_owned(),
            "--trace".into(),
            trace.to_string_lossy().into_owned(),
            "--backtrace-turn".into(),
            k.to_string(),
        ];
        let p = probe(args, &a.command, timeout)?;
        Ok((p, std::fs::read_to_string(&trace).unwrap_or_default()))
    };
    let (fp, ftrace) = confirm(&fail_sched, "fail")?;
    let (pp, ptrace) = confirm(&pass_sched, "pass")?;
    let _ = std::fs::remove_file(&probe_path);
    if !fp.failed || pp.failed {
        bail!("the flip at turn {k} did not reproduce (failing schedule failed: {}, passing schedule failed: {})", fp.failed, pp.failed);
    }
    println!(
        "critical decision {k} of {n} turns (seed {}, policy {}, {probes} probe runs)",
        a.seed,
        a.policy.name()
    );
    let bt = |stderr: &str| -> Vec<String> {
        stderr
            .lines()
            .filter_map(|l| l.strip_prefix("detrun-bt:   "))
            .map(str::to_string)
            .collect()
    };
    let show = |label: &str, trace: &str, stderr: &str, outcome: &str| {
        match event_at(trace, k) {
            Some((_, ev)) => println!("{label}: {ev}   [{outcome}]"),
            None => println!("{label}: (turn {k} not found in the trace)   [{outcome}]"),
        }
        for f in bt(stderr) {
            println!("    {f}");
        }
    };
    show("event A", &ftrace, &fp.stderr, "taking this turn fails");
    show(
        "event B",
        &ptrace,
        &pp.stderr,
        "taking this turn instead passes",
    );
    if let Some((_, prev)) = event_at(&ftrace, k - 1) {
        println!("  (turn {} before it: {prev})", k - 1);
    }
    let cmd = quote(&a.command);
    println!(
        "replay failing: detrun --schedule {} -- {cmd}",
        fail_sched.display()
    );
    println!(
        "replay passing: detrun --schedule {} -- {cmd}",
        pass_sched.display()
    );
    Ok(0)
}
