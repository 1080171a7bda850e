//! `detrun explore`: when did this failure become likely?
//!
//! Runs one seed with a checkpoint every T of virtual time; from each
//! checkpoint, K branches whose remaining schedule (and network faults) come
//! from branch seeds 1..=K. The fraction of failing branches per checkpoint
//! is printed as a table and written as JSON and as an SVG plot against
//! virtual time. Each branch is (seed, checkpoint time, branch seed) and
//! replays from scratch with `detrun replay --branch-at T --branch-seed B`.
//! `--no-checkpoints` explores the same branches by re-running each one from
//! the start (the slow way, for comparison and as a cross-check).

use crate::hunt::{PolicyArg, SchedOpts};
use anyhow::{bail, Context, Result};
use detrun_tracer::summary::BranchResult;
use detrun_tracer::EXIT_INTERNAL;
use serde::Serialize;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub struct ExploreArgs {
    /// The seed whose history is explored (e.g. a failing seed from hunt).
    /// Example: --from-seed 1337
    #[arg(long)]
    from_seed: u64,
    /// Branches per checkpoint (branch seeds 1..=K). Example: --branches 20
    #[arg(long, default_value_t = 10)]
    branches: u64,
    /// Virtual time between checkpoints (`20ms`, `1s`). Example: --every 20ms
    #[arg(long)]
    every: String,
    /// Scheduling policy of the run and its branches. Example: --policy pct
    #[arg(long, value_enum, default_value_t = PolicyArg::Mix)]
    policy: PolicyArg,
    #[command(flatten)]
    sched: SchedOpts,
    /// Directory for the branches' outputs, results.json, explore.json and
    /// explore.svg (default: a new directory under the system temp dir).
    /// Example: --out explore-1337
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// What counts as a failing branch (repeatable), as for hunt: `exit`
    /// (the default), `signal`, `stdout-regex=RE`, `stderr-regex=RE`.
    /// Example: --fail-on stdout-regex='LOST UPDATE'
    #[arg(long, value_name = "RULE")]
    fail_on: Vec<String>,
    /// Checkpoints kept alive at once, waiting for their branches while the
    /// run goes on (each costs the memory its processes have changed since).
    /// Example: --max-checkpoints 4
    #[arg(long, default_value_t = 1)]
    max_checkpoints: usize,
    /// Re-run every branch from the start instead of from a checkpoint
    /// (same answers, for comparison). Example: --no-checkpoints
    #[arg(long)]
    no_checkpoints: bool,
    /// Wall-clock seconds after which the exploration (or, without
    /// checkpoints, one run) is stopped. Example: --timeout 600
    #[arg(long, default_value_t = 3600)]
    timeout: u64,
    #[command(flatten)]
    net: crate::netargs::NetOpts,
    #[command(flatten)]
    program: crate::Program,
}

/// One checkpoint's row of the report.
#[derive(Serialize)]
struct Row {
    checkpoint: usize,
    /// The branch point (virtual ns since the start).
    at_ns: u64,
    branches: usize,
    failed: usize,
    fraction: f64,
    failing_seeds: Vec<u64>,
    /// Mean memory a branch did not share with the checkpoint (KB).
    private_kb: u64,
    /// Command replaying the first failing branch from scratch.
    replay: Option<String>,
}

#[derive(Serialize)]
struct Report {
    seed: u64,
    policy: String,
    every_ns: u64,
    branches_per_checkpoint: u64,
    checkpoints: bool,
    /// Checkpoints kept alive at once (branches run as each is taken).
    checkpoints_alive_at_once: usize,
    base_exit_code: Option<i32>,
    wall_ms: u64,
    rows: Vec<Row>,
}

fn every_ns(s: &str) -> Result<u64> {
    match detrun_tracer::checkpoint::BranchAt::parse(s) {
        Ok(detrun_tracer::checkpoint::BranchAt::Time(t)) if t > 0 => Ok(t),
        Ok(_) => bail!("--every takes a virtual time, e.g. 20ms"),
        Err(e) => bail!("--every {e}"),
    }
}

/// Progress of a checkpointed exploration, from the run's `progress` file:
/// one line per checkpoint whose branches are all done.
struct Progress {
    path: PathBuf,
    per_checkpoint: u64,
    seen: usize,
    done: u64,
    failed: u64,
}

impl Progress {
    fn poll(&mut self) {
        let Ok(s) = std::fs::read_to_string(&self.path) else {
            return;
        };
        let lines: Vec<&str> = s.lines().collect();
        for l in &lines[self.seen.min(lines.len())..] {
            let w: Vec<&str> = l.split_whitespace().collect();
            let (Some(c), Some(at), Some(code)) = (w.first(), w.get(1), w.get(2)) else {
                continue;
            };
            self.done += 1;
            self.failed += u64::from(*code != "0");
            if self.done == self.per_checkpoint {
                let at: u64 = at.parse().unwrap_or(0);
                eprintln!(
                    "  checkpoint {c} at {:.3} ms: {} of {} branches exited non-zero",
                    at as f64 / 1e6,
                    self.failed,
                    self.done
                );
                self.done = 0;
                self.failed = 0;
            }
        }
        self.seen = lines.len();
    }
}

/// Run `detrun ARGS -- COMMAND` with stdout and stderr to files.
fn run_to_files(
    args: &[String],
    command: &[OsString],
    out: &Path,
    err: &Path,
    timeout: Duration,
    mut progress: Option<&mut Progress>,
) -> Result<Option<i32>> {
    let exe = std::env::current_exe().context("locating the detrun binary")?;
    let mut child = Command::new(exe)
        .args(args)
        .arg("--")
        .args(command)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(out).with_context(|| format!("{}", out.display()))?)
        .stderr(std::fs::File::create(err).with_context(|| format!("{}", err.display()))?)
        .spawn()
        .context("starting detrun")?;
    let st = crate::hunt::wait_bounded(&mut child, timeout, Duration::from_millis(20), || {
        if let Some(p) = progress.as_deref_mut() {
            p.poll();
        }
    })?;
    use std::os::unix::process::ExitStatusExt;
    Ok(st.map(|st| st.code().or(st.signal().map(|s| 128 + s)).unwrap_or(0)))
}

pub fn explore(a: &ExploreArgs) -> Result<i32> {
    let every = every_ns(&a.every)?;
    let rules = crate::hunt::FailRules::parse(&a.fail_on)?;
    if a.branches == 0 {
        bail!("--branches must be at least 1");
    }
    if a.policy == PolicyArg::Default {
        eprintln!("detrun explore: warning: --policy default schedules without randomness, so every branch is the same history; use chaos or pct");
    }
    if let Err(e) = a.net.config() {
        bail!("{e}");
    }
    let dir = match &a.out {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!(
            "detrun-explore-{}-{}",
            a.from_seed,
            std::process::id()
        )),
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut base = vec!["--seed".to_string(), a.from_seed.to_string()];
    let mut sched = a.sched.clone();
    sched.resolve_steps(
        a.policy,
        &a.program.command,
        Duration::from_secs(a.timeout),
        "explore",
    )?;
    let strategy = sched.strategy(a.policy, a.from_seed);
    base.extend(sched.flags(strategy));
    base.extend(a.net.flags());
    let timeout = Duration::from_secs(a.timeout);
    let start = Instant::now();
    eprintln!(
        "detrun explore: seed {}, a checkpoint every {} ms, {} branches each{}; outputs in {}",
        a.from_seed,
        every as f64 / 1e6,
        a.branches,
        if a.no_checkpoints {
            " (re-executed from the start)"
        } else {
            ""
        },
        dir.display()
    );
    let (base_code, results) = if a.no_checkpoints {
        reexecute(a, &base, every, &dir, timeout)?
    } else {
        let mut args = base.clone();
        args.extend([
            "--checkpoint-every".to_string(),
            format!("{every}ns"),
            "--branch-out".to_string(),
            dir.display().to_string(),
            format!("--max-checkpoints={}", a.max_checkpoints.max(1)),
        ]);
        for b in 1..=a.branches {
            args.push(format!("--branch-seed={b}"));
        }
        let _ = std::fs::remove_file(dir.join("progress"));
        let mut progress = Progress {
            path: dir.join("progress"),
            per_checkpoint: a.branches,
            seen: 0,
            done: 0,
            failed: 0,
        };
        let code = run_to_files(
            &args,
            &a.program.command,
            &dir.join("base.out"),
            &dir.join("base.err"),
            timeout,
            Some(&mut progress),
        )?;
        let Ok(results) = std::fs::read_to_string(dir.join("results.json")) else {
            // The run did not start (program not found, bad option...): its
            // own message and status.
            let err = std::fs::read_to_string(dir.join("base.err")).unwrap_or_default();
            eprint!("{err}");
            return Ok(code.unwrap_or(EXIT_INTERNAL));
        };
        let r: Vec<BranchResult> =
            serde_json::from_str(&results).context("reading results.json")?;
        (code, r)
    };
    let rows = rows(a, &results, &rules, (strategy, &sched));
    print_table(&rows);
    let report = Report {
        seed: a.from_seed,
        policy: strategy.name(),
        every_ns: every,
        branches_per_checkpoint: a.branches,
        checkpoints: !a.no_checkpoints,
        checkpoints_alive_at_once: if a.no_checkpoints {
            0
        } else {
            a.max_checkpoints.max(1)
        },
        base_exit_code: base_code,
        wall_ms: start.elapsed().as_millis() as u64,
        rows,
    };
    let json = dir.join("explore.json");
    std::fs::write(&json, serde_json::to_string_pretty(&report)? + "\n")?;
    let svg = dir.join("explore.svg");
    std::fs::write(&svg, plot(&report))?;
    eprintln!(
        "detrun explore: {} checkpoints in {:.1} s ({} kept alive at once); report {}, plot {}",
        report.rows.len(),
        report.wall_ms as f64 / 1000.0,
        report.checkpoints_alive_at_once,
        json.display(),
        svg.display()
    );
    if report.rows.is_empty() {
        eprintln!("detrun explore: no checkpoint was taken: the run is shorter than --every, or could not be checkpointed (see {})", dir.join("base.err").display());
        return Ok(1);
    }
    Ok(0)
}

/// Without checkpoints: the base run's length, then every branch from scratch.
fn reexecute(
    a: &ExploreArgs,
    base: &[String],
    every: u64,
    dir: &Path,
    timeout: Duration,
) -> Result<(Option<i32>, Vec<BranchResult>)> {
    let sum = dir.join("base.summary.json");
    let mut args = base.to_vec();
    args.extend(["--summary-json".to_string(), sum.display().to_string()]);
    let code = run_to_files(
        &args,
        &a.program.command,
        &dir.join("base.out"),
        &dir.join("base.err"),
        timeout,
        None,
    )?;
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&sum)?)?;
    let total = v["virtual_ns"].as_u64().unwrap_or(0);
    let mut out = Vec::new();
    let mut i = 1;
    while every * i < total {
        let at = every * i;
        for b in 1..=a.branches {
            let name = format!("c{}-b{b}", i - 1);
            let mut args = base.to_vec();
            args.extend([
                "--branch-at".to_string(),
                format!("{at}ns"),
                "--branch-seed".to_string(),
                b.to_string(),
            ]);
            let t = Instant::now();
            let o = dir.join(format!("{name}.out"));
            let e = dir.join(format!("{name}.err"));
            let code = run_to_files(&args, &a.program.command, &o, &e, timeout, None)?;
            if b == a.branches {
                let failed = out
                    .iter()
                    .filter(|r: &&BranchResult| r.checkpoint == i as usize - 1 && r.exit_code != 0)
                    .count()
                    + usize::from(code != Some(0));
                eprintln!(
                    "  checkpoint {} at {:.3} ms: {failed} of {} branches exited non-zero",
                    i - 1,
                    at as f64 / 1e6,
                    a.branches
                );
            }
            out.push(BranchResult {
                checkpoint: i as usize - 1,
                at_ns: at,
                requested_ns: at,
                decisions: 0,
                seed: Some(b),
                exit_code: code.unwrap_or(124),
                virtual_ns: 0,
                wall_ms: t.elapsed().as_millis() as u64,
                error: None,
                private_dirty_kb: 0,
                stdout: Some(o.display().to_string()),
                stderr: Some(e.display().to_string()),
            });
        }
        i += 1;
    }
    Ok((code, out))
}

fn rows(
    a: &ExploreArgs,
    results: &[BranchResult],
    rules: &crate::hunt::FailRules,
    (strategy, sched): (crate::hunt::Strategy, &SchedOpts),
) -> Vec<Row> {
    let text = |p: &Option<String>| {
        p.as_ref()
            .and_then(|p| std::fs::read(p).ok())
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    };
    let mut rows: Vec<Row> = Vec::new();
    for r in results {
        let Some(seed) = r.seed else { continue };
        if rows.last().is_none_or(|x| x.checkpoint != r.checkpoint) {
            rows.push(Row {
                checkpoint: r.checkpoint,
                at_ns: r.requested_ns,
                branches: 0,
                failed: 0,
                fraction: 0.0,
                failing_seeds: Vec::new(),
                private_kb: 0,
                replay: None,
            });
        }
        let row = rows.last_mut().expect("pushed above");
        row.branches += 1;
        row.private_kb += r.private_dirty_kb;
        if rules.failed(r.exit_code, &text(&r.stdout), &text(&r.stderr)) {
            row.failed += 1;
            row.failing_seeds.push(seed);
        }
    }
    for row in &mut rows {
        row.fraction = row.failed as f64 / row.branches.max(1) as f64;
        row.private_kb /= row.branches.max(1) as u64;
        if let Some(&b) = row.failing_seeds.first() {
            let mut s = crate::hunt::replay_command(
                &crate::feedback::Plan::fresh(a.from_seed, strategy),
                sched,
                &a.net,
                &a.program.command,
            );
            let pos = s.find(" -- ").unwrap_or(s.len());
            s.insert_str(
                pos,
                &format!(" --branch-at {}ns --branch-seed {b}", row.at_ns),
            );
            row.replay = Some(s);
        }
    }
    rows
}

fn print_table(rows: &[Row]) {
    println!("checkpoint  virtual time   branches  failed  fraction  KB/branch");
    for r in rows {
        println!(
            "{:>10}  {:>10.3} ms  {:>8}  {:>6}  {:>7.0}%  {:>9}  {}",
            r.checkpoint,
            r.at_ns as f64 / 1e6,
            r.branches,
            r.failed,
            r.fraction * 100.0,
            r.private_kb,
            "#".repeat((r.fraction * 20.0).round() as usize)
        );
    }
}

/// The failure probability against virtual time, as a standalone SVG.
fn plot(r: &Report) -> String {
    let (w, h, l, b, t, rm) = (720.0, 360.0, 60.0, 40.0, 30.0, 20.0);
    let pw = w - l - rm;
    let ph = h - t - b;
    let tmax = r.rows.iter().map(|x| x.at_ns).max().unwrap_or(1).max(1) as f64;
    let x = |ns: u64| l + pw * ns as f64 / tmax;
    let y = |f: f64| t + ph * (1.0 - f);
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\">\n\
         <title>detrun explore: seed {} ({}), {} branches per checkpoint</title>\n\
         <rect width=\"{w}\" height=\"{h}\" fill=\"white\"/>\n",
        r.seed, r.policy, r.branches_per_checkpoint
    );
    // Axes, grid and labels.
    s += &format!(
        "<line x1=\"{l}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n<line x1=\"{l}\" y1=\"{t}\" x2=\"{l}\" y2=\"{}\" stroke=\"black\"/>\n",
        t + ph,
        l + pw,
        t + ph,
        t + ph
    );
    for i in 0..=4 {
        let f = i as f64 / 4.0;
        s += &format!(
            "<line x1=\"{l}\" y1=\"{0:.1}\" x2=\"{1}\" y2=\"{0:.1}\" stroke=\"#ddd\"/><text x=\"{2}\" y=\"{3:.1}\" font-size=\"11\" text-anchor=\"end\">{4:.0}%</text>\n",
            y(f),
            l + pw,
            l - 6.0,
            y(f) + 4.0,
            f * 100.0
        );
    }
    s += &format!(
        "<text x=\"{}\" y=\"{}\" font-size=\"12\" text-anchor=\"middle\">virtual time (ms), 0 to {:.1}</text>\n\
         <text x=\"14\" y=\"{}\" font-size=\"12\" transform=\"rotate(-90 14 {})\" text-anchor=\"middle\">failing branches</text>\n",
        l + pw / 2.0,
        h - 8.0,
        tmax / 1e6,
        t + ph / 2.0,
        t + ph / 2.0
    );
    let pts: Vec<String> = r
        .rows
        .iter()
        .map(|p| format!("{:.1},{:.1}", x(p.at_ns), y(p.fraction)))
        .collect();
    s += &format!(
        "<polyline fill=\"none\" stroke=\"#c0392b\" stroke-width=\"2\" points=\"{}\"/>\n",
        pts.join(" ")
    );
    for p in &r.rows {
        s += &format!(
            "<circle class=\"point\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"4\" fill=\"#c0392b\" data-t-ns=\"{}\" data-fraction=\"{:.4}\"><title>{:.3} ms: {} of {} branches fail</title></circle>\n",
            x(p.at_ns),
            y(p.fraction),
            p.at_ns,
            p.fraction,
            p.at_ns as f64 / 1e6,
            p.failed,
            p.branches
        );
    }
    s += "</svg>\n";
    s
}
