//! `detrun analyze`: find the scheduling decision that makes a failing seed
//! fail.
//!
//! 1. Run the seed under its policy, recording its schedule F (n turns); it
//!    must fail. Run the seed under the default policy; it must pass.
//! 2. Look for a passing schedule next to F: from the last turn backwards,
//!    swap two adjacent turns of different threads (F[..i], then turn i+1,
//!    then turn i, then the default policy). The latest swap that passes
//!    names the racing pair: the two threads' steps in that order fail, in
//!    the other order pass.
//! 3. If no single swap flips the outcome, bisect instead: a prefix F[..k]
//!    followed by the default policy is a valid schedule; F[..0] passes and
//!    F[..n] fails, so there is a smallest failing k, and turn k is the
//!    critical decision.
//! 4. Replay both sides to confirm the flip, with a trace and backtraces of
//!    each thread as it gets its turn and at its first call, and print both
//!    events.

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
    #[arg(long, value_enum, default_value_t = PolicyArg::Mix)]
    policy: PolicyArg,
    #[command(flatten)]
    sched: crate::hunt::SchedOpts,
    /// Where to write the schedules (default ./detrun-analyze-SEED).
    /// Example: --out-dir /tmp/an
    #[arg(long, value_name = "DIR")]
    out_dir: Option<PathBuf>,
    /// Wall-clock seconds each probe run may take. Example: --timeout 30
    #[arg(long, default_value_t = 60)]
    timeout: u64,
    #[command(flatten)]
    net: crate::netargs::NetOpts,
    #[command(flatten)]
    program: crate::Program,
}

struct Probe {
    failed: bool,
    /// The run could not follow the schedule it was given.
    diverged: bool,
    stderr: String,
}

fn probe(
    mut args: Vec<String>,
    net: &[String],
    command: &[OsString],
    timeout: Duration,
) -> Result<Probe> {
    args.extend_from_slice(net);
    let sum = std::env::temp_dir().join(format!("detrun-analyze-{}.json", std::process::id()));
    args.push("--summary-json".into());
    args.push(sum.to_string_lossy().into_owned());
    let (st, _out, err) = run_child(&args, command, timeout, &[])?;
    let failed = st.is_none_or(|s| s.code() != Some(0));
    let diverged = std::fs::read_to_string(&sum).is_ok_and(|t| t.contains("schedule-diverged"));
    let _ = std::fs::remove_file(&sum);
    Ok(Probe {
        failed,
        diverged,
        stderr: String::from_utf8_lossy(&err).into_owned(),
    })
}

fn write_prefix(full: &Schedule, k: usize, path: &Path) -> Result<()> {
    let s = Schedule {
        seed: full.seed,
        policy: full.policy.clone(),
        sync: full.sync,
        turns: full.turns[..k].to_vec(),
    };
    std::fs::write(path, s.render()).with_context(|| format!("writing {}", path.display()))
}

/// The thread of turn `turn` (1-based) in a trace, the call it resumes
/// from, and its first call of the turn.
fn event_at(trace: &str, turn: usize) -> Option<(u64, String)> {
    let tag = format!("{{\"d\":{turn},");
    let lines: Vec<&str> = trace.lines().collect();
    let at = lines.iter().position(|l| l.starts_with(&tag))?;
    let v: serde_json::Value = serde_json::from_str(lines[at]).ok()?;
    let tid = v["run"].as_u64()?;
    let describe = |e: &serde_json::Value| {
        let args: Vec<String> = e["args"].as_array().map_or(vec![], |a| {
            a.iter().take(4).map(|x| x.to_string()).collect()
        });
        let mut s = format!(
            "{}({}) at {} ns",
            e["sys"].as_str().unwrap_or("?"),
            args.join(", "),
            e["t"]
        );
        if let Some(r) = e.get("ret") {
            s.push_str(&format!(" -> {r}"));
        }
        if let Some(p) = e.get("park") {
            s.push_str(&format!(", parks on {p}"));
        }
        s
    };
    let parse = |l: &&str| serde_json::from_str::<serde_json::Value>(l).ok();
    let before = lines[..at]
        .iter()
        .rev()
        .filter_map(parse)
        .find(|e| e["tid"].as_u64() == Some(tid));
    let first = lines[at + 1..]
        .iter()
        .filter_map(parse)
        .take_while(|e| e.get("d").is_none())
        .find(|e| e["tid"].as_u64() == Some(tid));
    let mut s = format!("thread {tid}");
    if let Some(b) = before {
        s.push_str(&format!(" resumes from {}", describe(&b)));
    }
    match first {
        Some(f) => s.push_str(&format!("; then calls {}", describe(&f))),
        None => s.push_str("; makes no call before the next turn"),
    }
    Some((tid, s))
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
    if let Err(e) = a.net.config() {
        bail!("{e}");
    }
    let netf = a.net.flags();
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
    let mut sched = a.sched.clone();
    sched.resolve_steps(a.policy, &a.program.command, timeout, "analyze")?;
    let strategy = sched.strategy(a.policy, a.seed);
    args.extend(sched.flags(strategy));
    if !probe(args, &netf, &a.program.command, timeout)?.failed {
        bail!(
            "seed {} does not fail under {}: nothing to analyze",
            a.seed,
            strategy.name()
        );
    }
    if probe(
        vec!["--seed".into(), seed.clone()],
        &netf,
        &a.program.command,
        timeout,
    )?
    .failed
    {
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
        probe(args, &netf, &a.program.command, timeout)
    };
    if !run_prefix(n)?.failed {
        bail!("replaying the recorded schedule does not fail: the failure is not reproducible by schedule alone");
    }
    let mut probes = 3;
    let fail_sched = dir.join("fail.sched");
    let pass_sched = dir.join("pass.sched");
    let write = |turns: Vec<detrun_scheduler::Segment>, path: &Path| -> Result<()> {
        let sc = Schedule {
            seed: full.seed,
            policy: full.policy.clone(),
            sync: full.sync,
            turns,
        };
        std::fs::write(path, sc.render()).with_context(|| format!("writing {}", path.display()))
    };
    // Step 2: the latest adjacent swap that passes.
    let mut swap = None;
    for i in (0..n.saturating_sub(1)).rev().take(400) {
        if full.turns[i].tid == full.turns[i + 1].tid {
            continue;
        }
        let mut cand = full.turns[..i].to_vec();
        cand.push(full.turns[i + 1]);
        cand.push(full.turns[i]);
        write(cand.clone(), &probe_path)?;
        probes += 1;
        let args = vec![
            "--seed".to_string(),
            seed.clone(),
            "--schedule".into(),
            probe_path.to_string_lossy().into_owned(),
        ];
        let p = probe(args, &netf, &a.program.command, timeout)?;
        // A swap the run could not follow says nothing about the race.
        if !p.failed && !p.diverged {
            swap = Some((i, cand));
            break;
        }
    }
    // The turns (1-based) whose events are shown, and in which run.
    let (turn_a, turn_b, b_in_pass, heading) = match swap {
        Some((i, cand)) => {
            write(full.turns.clone(), &fail_sched)?;
            write(cand, &pass_sched)?;
            let h = format!(
                "critical decision {} of {n} turns: turns {} and {} race (seed {}, policy {}, {probes} probe runs); \
                 in this order the run fails, swapped it passes",
                i + 1,
                i + 1,
                i + 2,
                a.seed,
                a.policy.name()
            );
            (i + 1, i + 2, false, h)
        }
        None => {
            // Step 3: bisect. Invariant: prefix lo passes, prefix hi fails.
            let (mut lo, mut hi) = (0usize, n);
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                probes += 1;
                if run_prefix(mid)?.failed {
                    hi = mid;
                } else {
                    lo = mid;
                }
            }
            write_prefix(&full, hi, &fail_sched)?;
            write_prefix(&full, hi - 1, &pass_sched)?;
            let h = format!(
                "critical decision {hi} of {n} turns (seed {}, policy {}, {probes} probe runs; no single swap flips it)",
                a.seed,
                a.policy.name()
            );
            (hi, hi, true, h)
        }
    };
    let _ = std::fs::remove_file(&probe_path);
    // Step 4: confirm, with traces and backtraces.
    let confirm = |sched: &Path, name: &str, turn: usize| -> Result<(Probe, String)> {
        let trace = dir.join(format!("{name}.trace.jsonl"));
        let args = vec![
            "--seed".to_string(),
            seed.clone(),
            "--schedule".into(),
            sched.to_string_lossy().into_owned(),
            "--trace".into(),
            trace.to_string_lossy().into_owned(),
            "--backtrace-turn".into(),
            turn.to_string(),
        ];
        let p = probe(args, &netf, &a.program.command, timeout)?;
        Ok((p, std::fs::read_to_string(&trace).unwrap_or_default()))
    };
    let (fa, ftrace) = confirm(&fail_sched, "fail", turn_a)?;
    let (fb, btrace) = if b_in_pass {
        confirm(&pass_sched, "pass", turn_b)?
    } else {
        confirm(&fail_sched, "fail-b", turn_b)?
    };
    let passes = probe(
        vec![
            "--seed".to_string(),
            seed.clone(),
            "--schedule".into(),
            pass_sched.to_string_lossy().into_owned(),
        ],
        &netf,
        &a.program.command,
        timeout,
    )?;
    if !fa.failed || passes.failed {
        bail!(
            "the flip did not reproduce (failing schedule failed: {}, passing schedule failed: {})",
            fa.failed,
            passes.failed
        );
    }
    println!("{heading}");
    let bt = |stderr: &str| -> Vec<String> {
        let mut v = Vec::new();
        for l in stderr.lines() {
            if let Some(f) = l.strip_prefix("detrun-bt:   ") {
                v.push(format!("    {f}"));
            } else if let Some(h) = l.strip_prefix("detrun-bt: ") {
                v.push(format!("  {h}"));
            }
        }
        v
    };
    let show = |label: &str, trace: &str, stderr: &str, turn: usize, outcome: &str| {
        match event_at(trace, turn) {
            Some((_, ev)) => println!("{label}: turn {turn}: {ev}   [{outcome}]"),
            None => println!("{label}: turn {turn} not found in the trace   [{outcome}]"),
        }
        for f in bt(stderr) {
            println!("{f}");
        }
    };
    if b_in_pass {
        show(
            "event A",
            &ftrace,
            &fa.stderr,
            turn_a,
            "taking this turn fails",
        );
        show(
            "event B",
            &btrace,
            &fb.stderr,
            turn_b,
            "taking this turn instead passes",
        );
    } else {
        show(
            "event A",
            &ftrace,
            &fa.stderr,
            turn_a,
            "runs first in the failing order",
        );
        show(
            "event B",
            &btrace,
            &fb.stderr,
            turn_b,
            "runs second in the failing order",
        );
    }
    let cmd = quote(&a.program.command);
    let net: String = netf.iter().map(|f| format!(" {f}")).collect();
    println!(
        "replay failing: detrun{net} --schedule {} -- {cmd}",
        fail_sched.display()
    );
    println!(
        "replay passing: detrun{net} --schedule {} -- {cmd}",
        pass_sched.display()
    );
    Ok(0)
}
