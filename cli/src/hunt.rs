//! `detrun hunt` and `detrun replay`: many seeds in parallel, and one seed
//! again. Each run is a child `detrun` process (so a crash or hang of one
//! run is contained and reported), pinned to its own CPU.

use crate::feedback::{Feedback, Plan, Reached};
use anyhow::{Context, Result};
use serde::Serialize;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Exit status of `replay --verify` when the two runs differ.
pub const EXIT_DIVERGED: i32 = 121;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PolicyArg {
    /// A portfolio across seeds: chaos on five seeds in eight, PCT of
    /// depth 3 and 2 on seed % 8 = 3, 7, and PCT of depth 2 over data
    /// points on seed % 8 = 5 (chaos when the program has none), all with
    /// sync-op, data, thread-start and instruction-level points (the
    /// strongest default measured: bench/classes.sh).
    Mix,
    Chaos,
    Pct,
    Default,
}

impl PolicyArg {
    pub fn name(self) -> &'static str {
        match self {
            PolicyArg::Mix => "mix",
            PolicyArg::Chaos => "chaos",
            PolicyArg::Pct => "pct",
            PolicyArg::Default => "default",
        }
    }
}

/// The strategy of one run: a concrete policy (never Mix) and PCT's depth.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Strategy {
    pub policy: PolicyArg,
    pub depth: u32,
    /// PCT over data points (`--pct-data`).
    pub data: bool,
}

impl Strategy {
    pub fn name(self) -> String {
        match self.policy {
            PolicyArg::Pct if self.data => format!("pct-{}-data", self.depth),
            PolicyArg::Pct => format!("pct-{}", self.depth),
            p => p.name().to_string(),
        }
    }

    fn of(policy: PolicyArg, depth: u32) -> Strategy {
        Strategy {
            policy,
            depth,
            data: false,
        }
    }
}

/// Scheduling options shared by hunt, replay, analyze and explore: those
/// of a plain run, passed on to every run and printed in replay lines.
#[derive(clap::Args, Debug, Clone)]
pub struct SchedOpts {
    /// Depth for --policy pct. Example: --pct-depth 3
    #[arg(long, default_value_t = 2)]
    pub pct_depth: u32,
    /// Expected events per run for PCT (when not given, measured with one
    /// run of the program under the default policy with sync-op points,
    /// and printed). Example: --pct-steps 500
    #[arg(long)]
    pub pct_steps: Option<u64>,
    /// PCT over data points (see `detrun --help`). Example: --pct-data
    #[arg(long)]
    pub pct_data: bool,
    /// Data points per run for --pct-data and the portfolio's PCT over data
    /// points (when not given, measured with the --pct-steps run).
    /// Example: --pct-data-steps 12
    #[arg(long)]
    pub pct_data_steps: Option<u64>,
    /// Instruction budget of PCT's preemption points (see `detrun --help`).
    /// Example: --pct-insns 200
    #[arg(long, default_value_t = 1000)]
    pub pct_insns: u32,
    /// Chaos' instruction budget (see `detrun --help`). Example: --chaos-insns 50
    #[arg(long)]
    pub chaos_insns: Option<u32>,
    /// Reach PCT's instruction-level points with breakpoints too (see
    /// `detrun --help`). Example: --breakpoints
    #[arg(long)]
    pub breakpoints: bool,
    /// Reach chaos' instruction-level points by single-steps only.
    /// Example: --single-step
    #[arg(long, conflicts_with = "breakpoints")]
    pub single_step: bool,
    /// Events a thread may run before the turn moves on. Example: --quantum 100
    #[arg(long)]
    pub quantum: Option<u32>,
    /// Sync-op and thread-start points: auto, on or off (see `detrun
    /// --help`). Example: --sync-points off
    #[arg(long, value_name = "WHEN", value_parser = ["auto", "on", "off"])]
    pub sync_points: Option<String>,
    /// No spin probes (see `detrun --help`). Example: --no-spin-points
    #[arg(long)]
    pub no_spin_points: bool,
    /// No data points (see `detrun --help`). Example: --no-data-points
    #[arg(long)]
    pub no_data_points: bool,
}

impl SchedOpts {
    /// The strategy `policy` gives seed `seed`.
    pub fn strategy(&self, policy: PolicyArg, seed: u64) -> Strategy {
        match policy {
            PolicyArg::Mix => match seed % 8 {
                3 => Strategy::of(PolicyArg::Pct, 3),
                7 => Strategy::of(PolicyArg::Pct, 2),
                5 if self.pct_data_steps.unwrap_or(0) > 0 => Strategy {
                    data: true,
                    ..Strategy::of(PolicyArg::Pct, 2)
                },
                _ => Strategy::of(PolicyArg::Chaos, 0),
            },
            PolicyArg::Pct => Strategy {
                data: self.pct_data,
                ..Strategy::of(policy, self.pct_depth)
            },
            p => Strategy::of(p, 0),
        }
    }

    /// Does any run of `policy` use PCT (and so need --pct-steps)?
    pub fn uses_pct(&self, policy: PolicyArg) -> bool {
        matches!(policy, PolicyArg::Pct | PolicyArg::Mix)
    }

    /// The options of strategy `st` beyond its policy, as (name, value):
    /// the same in a run's flags and in a replay line.
    fn options(&self, st: Strategy) -> Vec<(&'static str, Option<String>)> {
        let mut v = Vec::new();
        if st.policy == PolicyArg::Pct {
            v.push(("pct-insns", Some(self.pct_insns.to_string())));
            if st.data {
                v.push(("pct-data", None));
            }
            let steps = if st.data {
                self.pct_data_steps
            } else {
                self.pct_steps
            };
            if let Some(k) = steps {
                v.push(("pct-steps", Some(k.to_string())));
            }
            if self.breakpoints {
                v.push(("breakpoints", None));
            }
        }
        if let Some(n) = self.chaos_insns {
            v.push(("chaos-insns", Some(n.to_string())));
        }
        if self.single_step && st.policy == PolicyArg::Chaos {
            v.push(("single-step", None));
        }
        if let Some(q) = self.quantum {
            v.push(("quantum", Some(q.to_string())));
        }
        if let Some(w) = &self.sync_points {
            v.push(("sync-points", Some(w.clone())));
        }
        if self.no_spin_points {
            v.push(("no-spin-points", None));
        }
        if self.no_data_points {
            v.push(("no-data-points", None));
        }
        v
    }

    /// The run flags of strategy `st`: the policy's, then every option
    /// given. The same list is what a replay line carries.
    pub fn flags(&self, st: Strategy) -> Vec<String> {
        let mut v = match st.policy {
            PolicyArg::Chaos => vec!["--chaos".to_string()],
            PolicyArg::Pct => vec![format!("--pct={}", st.depth)],
            PolicyArg::Default | PolicyArg::Mix => vec![],
        };
        for (k, val) in self.options(st) {
            v.push(match val {
                Some(x) => format!("--{k}={x}"),
                None => format!("--{k}"),
            });
        }
        v
    }

    /// The `replay` options that give strategy `st` again.
    fn replay_flags(&self, st: Strategy) -> String {
        let mut s = format!(" --policy {}", st.policy.name());
        if st.policy == PolicyArg::Pct {
            s.push_str(&format!(" --pct-depth {}", st.depth));
        }
        for (k, val) in self.options(st) {
            let k = if st.data && k == "pct-steps" {
                "pct-data-steps"
            } else {
                k
            };
            s.push_str(&format!(" --{k}"));
            if let Some(x) = val {
                s.push_str(&format!(" {x}"));
            }
        }
        s
    }

    /// Fill in --pct-steps for `policy` when PCT needs it, measuring one
    /// run, and say so.
    pub fn resolve_steps(
        &mut self,
        policy: PolicyArg,
        command: &[OsString],
        timeout: Duration,
        what: &str,
    ) -> Result<()> {
        let data = self.pct_data || policy == PolicyArg::Mix;
        let need = self.pct_steps.is_none() || (data && self.pct_data_steps.is_none());
        if self.uses_pct(policy) && need {
            let sync = self.sync_points.as_deref() != Some("off");
            let (k, d) = measure_steps(command, timeout, sync, !self.no_data_points)?;
            let k = *self.pct_steps.get_or_insert(k);
            let d = *self.pct_data_steps.get_or_insert(d);
            eprintln!(
                "detrun {what}: --pct-steps {k}, --pct-data-steps {d} (the events and data \
                 points of one run under the default policy{})",
                if sync { ", sync-op points on" } else { "" }
            );
        }
        Ok(())
    }
}

#[derive(clap::Args, Debug)]
pub struct HuntArgs {
    /// Number of seeds to try. Example: --runs 500
    #[arg(long, default_value_t = 100)]
    runs: u64,
    /// Runs at a time (default: the number of CPUs); each run is pinned to
    /// its own CPU. Example: -j 2
    #[arg(long, short = 'j')]
    jobs: Option<usize>,
    /// Scheduling policy of the runs (mix: the portfolio; see below).
    /// Example: --policy pct
    #[arg(long, value_enum, default_value_t = PolicyArg::Mix)]
    policy: PolicyArg,
    #[command(flatten)]
    sched: SchedOpts,
    /// First seed; runs use SEED, SEED+1, ... Example: --seed-start 1000
    #[arg(long, default_value_t = 1)]
    seed_start: u64,
    /// What counts as a failure (repeatable): `exit` (non-zero exit or a
    /// signal; the default), `signal`, `stdout-regex=RE`, `stderr-regex=RE`.
    /// Example: --fail-on stderr-regex='panicked at'
    #[arg(long, value_name = "RULE")]
    fail_on: Vec<String>,
    /// Wall-clock seconds after which a run is killed and reported as hung.
    /// Example: --timeout 30
    #[arg(long, default_value_t = 60)]
    timeout: u64,
    /// Virtual seconds after which a run is stopped and reported as hung
    /// (a sleep loop costs no wall time). Example: --virtual-timeout 600
    #[arg(long, value_name = "SECS", default_value_t = 3600)]
    virtual_timeout: u64,
    /// Give each run its own empty TMPDIR. Example: --tmpdir-per-run
    #[arg(long)]
    tmpdir_per_run: bool,
    /// Write the machine-readable report (JSON, see docs/hunt-report.schema.json).
    /// Example: --report hunt.json
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// Write a JUnit XML file (one test case per seed). Example: --junit hunt.xml
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// No progress bar (it is also hidden when stderr is not a terminal).
    /// Example: --no-progress
    #[arg(long)]
    no_progress: bool,
    /// Every run a fresh seed: no runs branched from those that reached new
    /// orders at sync objects (coverage is still measured and printed).
    /// Example: --no-feedback
    #[arg(long)]
    no_feedback: bool,
    #[command(flatten)]
    net: crate::netargs::NetOpts,
    #[command(flatten)]
    program: crate::Program,
}

#[derive(clap::Args, Debug)]
pub struct ReplayArgs {
    /// The seed to replay. Example: --seed 1337
    #[arg(long)]
    seed: u64,
    /// The policy the seed was found with (mix: the strategy hunt's
    /// portfolio gives this seed). Example: --policy chaos
    #[arg(long, value_enum, default_value_t = PolicyArg::Mix)]
    policy: PolicyArg,
    #[command(flatten)]
    sched: SchedOpts,
    /// Give the run its own empty TMPDIR, as hunt --tmpdir-per-run did.
    /// Example: --tmpdir-per-run
    #[arg(long)]
    tmpdir_per_run: bool,
    /// Run twice and fail (exit 121) if stdout, stderr, exit status or the
    /// schedule trace differ, printing the first difference. Example: --verify
    #[arg(long)]
    verify: bool,
    /// Replay a branch (from `explore`, or a hunt run branched by coverage
    /// feedback): at this virtual time or scheduling decision (`event:N`)
    /// the schedule switches to --branch-seed; repeatable, ascending.
    /// Example: --branch-at 40000000ns
    #[arg(long, value_name = "WHEN", requires = "branch_seed")]
    branch_at: Vec<String>,
    /// The branch's seed (one per --branch-at). Example: --branch-seed 3
    #[arg(long, requires = "branch_at")]
    branch_seed: Vec<u64>,
    #[command(flatten)]
    net: crate::netargs::NetOpts,
    #[command(flatten)]
    program: crate::Program,
}

/// The outcome of one child run.
#[derive(Clone, Debug, Serialize)]
pub struct RunResult {
    pub seed: u64,
    /// The strategy the seed ran under (`chaos`, `pct-3`, ...).
    pub strategy: String,
    /// The corpus run this one branched from (coverage feedback).
    pub parent: Option<u64>,
    /// Orders at sync objects this run reached first.
    pub new_pairs: u64,
    pub status: String,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub signature: String,
    pub stderr_tail: String,
    pub failed_tests: Vec<String>,
    pub replay: String,
}

/// Run `detrun ARGS -- COMMAND` as a child, bounded by `timeout`.
pub fn run_child(
    args: &[String],
    command: &[OsString],
    timeout: Duration,
    env: &[(&str, &Path)],
) -> Result<(Option<std::process::ExitStatus>, Vec<u8>, Vec<u8>)> {
    use std::io::Read;
    let exe = std::env::current_exe().context("locating the detrun binary")?;
    let mut cmd = Command::new(exe);
    cmd.args(args).arg("--").args(command);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting a run")?;
    let mut out = child.stdout.take().context("stdout")?;
    let mut err = child.stderr.take().context("stderr")?;
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
    let status = wait_bounded(&mut child, timeout, Duration::from_millis(2), || {})?;
    Ok((
        status,
        t_out.join().unwrap_or_default(),
        t_err.join().unwrap_or_default(),
    ))
}

/// Wait for `child`, checking every `tick` (and calling `each` then); kill
/// it after `timeout` (None).
pub fn wait_bounded(
    child: &mut std::process::Child,
    timeout: Duration,
    tick: Duration,
    mut each: impl FnMut(),
) -> Result<Option<std::process::ExitStatus>> {
    let start = Instant::now();
    loop {
        each();
        if let Some(st) = child.try_wait()? {
            each();
            return Ok(Some(st));
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
        std::thread::sleep(tick);
    }
}

/// How hunt (and explore) judge a run.
pub struct FailRules {
    exit: bool,
    signal: bool,
    stdout: Vec<regex::Regex>,
    stderr: Vec<regex::Regex>,
}

impl FailRules {
    pub fn parse(rules: &[String]) -> Result<FailRules> {
        let mut r = FailRules {
            exit: rules.is_empty(),
            signal: false,
            stdout: vec![],
            stderr: vec![],
        };
        for rule in rules {
            if rule == "exit" {
                r.exit = true;
            } else if rule == "signal" {
                r.signal = true;
            } else if let Some(re) = rule.strip_prefix("stdout-regex=") {
                r.stdout.push(
                    regex::Regex::new(re)
                        .with_context(|| format!("bad regex in --fail-on {rule}"))?,
                );
            } else if let Some(re) = rule.strip_prefix("stderr-regex=") {
                r.stderr.push(
                    regex::Regex::new(re)
                        .with_context(|| format!("bad regex in --fail-on {rule}"))?,
                );
            } else {
                anyhow::bail!("unknown --fail-on rule `{rule}` (exit, signal, stdout-regex=RE, stderr-regex=RE)");
            }
        }
        Ok(r)
    }

    pub fn failed(&self, code: i32, out: &str, err: &str) -> bool {
        (self.exit && code != 0)
            || (self.signal && code > 128)
            || self.stdout.iter().any(|re| re.is_match(out))
            || self.stderr.iter().any(|re| re.is_match(err))
    }
}

fn shell_quote(a: &OsString) -> String {
    let s = a.to_string_lossy();
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@".contains(c))
    {
        s.into_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

pub fn replay_command(
    plan: &Plan,
    sched: &SchedOpts,
    net: &crate::netargs::NetOpts,
    command: &[OsString],
) -> String {
    let mut s = format!(
        "detrun replay --seed {}{}",
        plan.base,
        sched.replay_flags(plan.st)
    );
    for (at, b) in &plan.branches {
        s.push_str(&format!(" --branch-at event:{at} --branch-seed {b}"));
    }
    for f in net.flags() {
        s.push(' ');
        s.push_str(&shell_quote(&OsString::from(f)));
    }
    s.push_str(" --");
    for a in command {
        s.push(' ');
        s.push_str(&shell_quote(a));
    }
    s
}

/// The line a failure is known by: detrun's own report of how the run
/// ended (a deadlock's first line, not its per-thread lines), else the
/// last line of stderr.
fn headline(err: &str) -> String {
    err.lines()
        .find(|l| l.starts_with("detrun: deadlock") || l.starts_with("detrun: virtual timeout"))
        .map_or_else(|| tail(err, 1), str::to_string)
}

/// Last lines of the guest's stderr, without detrun's own summary.
fn tail(err: &str, n: usize) -> String {
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

fn failed_tests(out: &str) -> Vec<String> {
    // libtest prints `test NAME ... FAILED`, and with -q `NAME --- FAILED`
    // (the latter also heads each failure's captured output).
    let re = regex::Regex::new(
        r"(?m)^(?:test (\S+) \.\.\. FAILED|---- (\S+) stdout ----|(\S+) --- FAILED)\s*$",
    )
    .expect("static regex");
    let mut v: Vec<String> = re
        .captures_iter(out)
        .filter_map(|c| {
            c.get(1)
                .or(c.get(2))
                .or(c.get(3))
                .map(|m| m.as_str().to_string())
        })
        .collect();
    v.sort();
    v.dedup();
    v
}

#[derive(Serialize)]
struct Group {
    signature: String,
    count: usize,
    seeds: Vec<u64>,
}

#[derive(Serialize)]
struct Report<'a> {
    version: u32,
    command: Vec<String>,
    policy: &'a str,
    runs: u64,
    jobs: usize,
    failures: usize,
    wall_ms: u64,
    runs_per_sec: f64,
    results: &'a [RunResult],
    groups: Vec<Group>,
    coverage: crate::feedback::CoverageReport,
}

fn xml_escape(s: &str) -> String {
    s.chars()
        .filter(|&c| c == '\n' || c == '\t' || !c.is_control())
        .map(|c| match c {
            '&' => "&amp;".to_string(),
            '<' => "&lt;".to_string(),
            '>' => "&gt;".to_string(),
            '"' => "&quot;".to_string(),
            '\'' => "&apos;".to_string(),
            c => c.to_string(),
        })
        .collect()
}

fn junit(results: &[RunResult], secs: f64) -> String {
    let failures = results.iter().filter(|r| r.status != "pass").count();
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    x.push_str(&format!(
        "<testsuites tests=\"{}\" failures=\"{failures}\" time=\"{secs:.3}\">\n  <testsuite name=\"detrun hunt\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" time=\"{secs:.3}\">\n",
        results.len(),
        results.len()
    ));
    for r in results {
        x.push_str(&format!(
            "    <testcase classname=\"detrun.hunt\" name=\"seed-{}\"",
            r.seed
        ));
        if r.status == "pass" {
            x.push_str("/>\n");
        } else {
            x.push_str(&format!(
                ">\n      <failure message=\"{}\" type=\"{}\">{}\n{}</failure>\n    </testcase>\n",
                xml_escape(&r.signature),
                xml_escape(&r.status),
                xml_escape(&r.replay),
                xml_escape(&r.stderr_tail)
            ));
        }
    }
    x.push_str("  </testsuite>\n</testsuites>\n");
    x
}

/// Events and data points of one run under the default policy (with
/// sync-op and data points when the runs have them): PCT's `k`, over all
/// events and over data points.
fn measure_steps(
    command: &[OsString],
    timeout: Duration,
    sync: bool,
    data: bool,
) -> Result<(u64, u64)> {
    let f = std::env::temp_dir().join(format!("detrun-steps-{}.json", std::process::id()));
    let mut args = vec![
        "--summary-json".to_string(),
        f.to_string_lossy().into_owned(),
    ];
    if sync {
        args.push("--sync-points=on".into());
    }
    if !data {
        args.push("--no-data-points".into());
    }
    run_child(&args, command, timeout, &[])?;
    let text = std::fs::read_to_string(&f).unwrap_or_default();
    let _ = std::fs::remove_file(&f);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    let get = |k: &str| v[k].as_u64().unwrap_or(0);
    let n = [
        "syscalls_intercepted",
        "rdtsc",
        "cpuid",
        "threads",
        "sync_points",
        "data_points",
    ]
    .iter()
    .map(|k| get(k))
    .sum::<u64>();
    Ok((n.max(1), get("data_points")))
}

/// What every run of a hunt shares.
struct HuntRun {
    command: Vec<OsString>,
    sched: SchedOpts,
    net: crate::netargs::NetOpts,
    rules: Arc<FailRules>,
    timeout: Duration,
    vtimeout: u64,
    tmp_per_run: bool,
}

impl HuntRun {
    /// Run `plan` on CPU `cpu`: its result, and the coverage it reported.
    fn run(&self, plan: &Plan, cpu: usize) -> Result<(RunResult, Option<Reached>)> {
        let seed = plan.seed;
        let tag = format!("{}-{seed}", std::process::id());
        let cov = std::env::temp_dir().join(format!("detrun-hunt-cov-{tag}.json"));
        let mut args = vec![
            "--seed".to_string(),
            plan.base.to_string(),
            "--cpu".into(),
            cpu.to_string(),
            "--virtual-timeout".into(),
            self.vtimeout.to_string(),
            "--coverage".into(),
            cov.to_string_lossy().into_owned(),
        ];
        args.extend(self.sched.flags(plan.st));
        args.extend(self.net.flags());
        args.extend(plan.branch_flags());
        let tmp = std::env::temp_dir().join(format!("detrun-hunt-{tag}"));
        let mut env: Vec<(&str, &Path)> = Vec::new();
        if self.tmp_per_run {
            std::fs::create_dir_all(&tmp)?;
            env.push(("TMPDIR", &tmp));
        }
        let (status, out, err) = run_child(&args, &self.command, self.timeout, &env)?;
        if self.tmp_per_run {
            let _ = std::fs::remove_dir_all(&tmp);
        }
        let reached = std::fs::read_to_string(&cov)
            .ok()
            .and_then(|t| Reached::parse(&t));
        let _ = std::fs::remove_file(&cov);
        let (o, e) = (String::from_utf8_lossy(&out), String::from_utf8_lossy(&err));
        let (code, sig) = match status {
            Some(st) => {
                let c = st.code().unwrap_or(125);
                (Some(c), (c > 128 && c < 128 + 65).then_some(c - 128))
            }
            None => (None, None),
        };
        let (status_s, signature) = match code {
            None => (
                "timeout".to_string(),
                format!("timeout after {}s", self.timeout.as_secs()),
            ),
            Some(124) if e.contains("detrun: virtual timeout") => (
                "timeout".to_string(),
                format!("virtual timeout after {}s", self.vtimeout),
            ),
            Some(c) if self.rules.failed(c, &o, &e) => {
                let what = match sig {
                    Some(s) => format!("signal {s}"),
                    None => format!("exit {c}"),
                };
                let last = headline(&e);
                (
                    "fail".to_string(),
                    if last.is_empty() {
                        what
                    } else {
                        format!("{what}: {last}")
                    },
                )
            }
            Some(_) => ("pass".to_string(), String::new()),
        };
        let r = RunResult {
            seed,
            strategy: plan.st.name(),
            parent: plan.parent,
            new_pairs: 0,
            status: status_s,
            exit_code: code,
            signal: sig,
            signature,
            stderr_tail: tail(&e, 5),
            failed_tests: failed_tests(&o),
            replay: replay_command(plan, &self.sched, &self.net, &self.command),
        };
        Ok((r, reached))
    }
}

pub fn hunt(h: &HuntArgs) -> Result<i32> {
    let rules = Arc::new(FailRules::parse(&h.fail_on)?);
    if let Err(e) = h.net.config() {
        eprintln!("detrun: {e}");
        return Ok(2);
    }
    let mut sched = h.sched.clone();
    sched.resolve_steps(
        h.policy,
        &h.program.command,
        Duration::from_secs(h.timeout.max(1)),
        "hunt",
    )?;
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
    let jobs = h.jobs.unwrap_or(ncpu).clamp(1, 256);
    let runs = h.runs;
    let next = Arc::new(AtomicU64::new(0));
    let results: Arc<Mutex<Vec<RunResult>>> = Arc::new(Mutex::new(Vec::new()));
    let failures = Arc::new(AtomicU64::new(0));
    let feedback = Arc::new((Mutex::new(Feedback::new(!h.no_feedback)), Condvar::new()));
    let abort = Arc::new(AtomicBool::new(false));
    let hidden = h.no_progress || !std::io::IsTerminal::is_terminal(&std::io::stderr());
    let bar = if hidden {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new(runs)
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{bar:30} {pos}/{len} runs, {msg} failed, {per_sec}, ETA {eta}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar.set_message("0");
    let shared = Arc::new(HuntRun {
        command: h.program.command.clone(),
        sched: sched.clone(),
        net: h.net.clone(),
        rules,
        timeout: Duration::from_secs(h.timeout.max(1)),
        vtimeout: h.virtual_timeout,
        tmp_per_run: h.tmpdir_per_run,
    });
    let start = Instant::now();
    let mut workers = Vec::new();
    for w in 0..jobs {
        let (next, results, failures, bar) =
            (next.clone(), results.clone(), failures.clone(), bar.clone());
        let (feedback, abort, shared) = (feedback.clone(), abort.clone(), shared.clone());
        let policy = h.policy;
        let seed_start = h.seed_start;
        let cpu = w % ncpu;
        workers.push(std::thread::spawn(move || -> Result<()> {
            let (fb, cv) = &*feedback;
            let lock = || fb.lock().map_err(|_| anyhow::anyhow!("poisoned"));
            loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= runs {
                    return Ok(());
                }
                let seed = seed_start.wrapping_add(i);
                let plan = {
                    let mut f = lock()?;
                    while f.folded < f.needs(i) {
                        if abort.load(Ordering::SeqCst) {
                            return Ok(());
                        }
                        f = cv
                            .wait_timeout(f, Duration::from_millis(100))
                            .map_err(|_| anyhow::anyhow!("poisoned"))?
                            .0;
                    }
                    f.plan(i, seed, shared.sched.strategy(policy, seed))
                };
                let outcome = shared.run(&plan, cpu);
                let reached = match outcome {
                    Ok((r, reached)) => {
                        if r.status != "pass" {
                            let n = failures.fetch_add(1, Ordering::SeqCst) + 1;
                            bar.set_message(n.to_string());
                        }
                        results
                            .lock()
                            .map_err(|_| anyhow::anyhow!("poisoned"))?
                            .push(r);
                        reached
                    }
                    Err(e) => {
                        abort.store(true, Ordering::SeqCst);
                        cv.notify_all();
                        return Err(e);
                    }
                };
                lock()?.finished(i, plan, reached);
                cv.notify_all();
                bar.inc(1);
            }
        }));
    }
    for w in workers {
        w.join()
            .map_err(|_| anyhow::anyhow!("a hunt worker panicked"))??;
    }
    bar.finish_and_clear();
    let wall = start.elapsed();
    let fb = std::mem::take(&mut *feedback.0.lock().map_err(|_| anyhow::anyhow!("poisoned"))?);
    let mut results =
        std::mem::take(&mut *results.lock().map_err(|_| anyhow::anyhow!("poisoned"))?);
    results.sort_by_key(|r| r.seed.wrapping_sub(h.seed_start));
    for r in &mut results {
        r.new_pairs = fb
            .new_pairs
            .get(&r.seed.wrapping_sub(h.seed_start))
            .copied()
            .unwrap_or(0);
    }
    let mut groups: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for r in results.iter().filter(|r| r.status != "pass") {
        groups.entry(r.signature.clone()).or_default().push(r.seed);
    }
    let nfail = results.iter().filter(|r| r.status != "pass").count();
    let rate = results.len() as f64 / wall.as_secs_f64().max(1e-9);
    println!(
        "detrun hunt: {} runs, {nfail} failed ({:.1}%), {jobs} jobs, {rate:.1} runs/s, policy {}",
        results.len(),
        100.0 * nfail as f64 / results.len().max(1) as f64,
        h.policy.name()
    );
    println!("{}", fb.summary(results.len() as u64));
    let mut group_list: Vec<Group> = groups
        .into_iter()
        .map(|(signature, seeds)| Group {
            count: seeds.len(),
            signature,
            seeds,
        })
        .collect();
    group_list.sort_by(|a, b| b.count.cmp(&a.count).then(a.signature.cmp(&b.signature)));
    if !group_list.is_empty() {
        println!("  {:>5}  {:<50}  seeds", "count", "failure");
        for g in &group_list {
            let seeds: Vec<String> = g.seeds.iter().take(10).map(u64::to_string).collect();
            let more = if g.seeds.len() > 10 { ", ..." } else { "" };
            println!(
                "  {:>5}  {:<50}  {}{more}",
                g.count,
                truncate(&g.signature, 50),
                seeds.join(", ")
            );
            let first = g.seeds[0];
            if let Some(r) = results.iter().find(|r| r.seed == first) {
                println!("         replay: {}", r.replay);
            }
        }
        let tests: std::collections::BTreeSet<&String> =
            results.iter().flat_map(|r| r.failed_tests.iter()).collect();
        if !tests.is_empty() {
            println!(
                "  failing tests: {}",
                tests.into_iter().cloned().collect::<Vec<_>>().join(", ")
            );
        }
    }
    if let Some(f) = &h.report {
        let rep = Report {
            version: 1,
            command: h
                .program
                .command
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            policy: h.policy.name(),
            runs: results.len() as u64,
            jobs,
            failures: nfail,
            wall_ms: wall.as_millis() as u64,
            runs_per_sec: rate,
            results: &results,
            groups: group_list,
            coverage: fb.report(results.len() as u64),
        };
        std::fs::write(f, serde_json::to_string_pretty(&rep)? + "\n")
            .with_context(|| format!("writing {}", f.display()))?;
    }
    if let Some(f) = &h.junit {
        std::fs::write(f, junit(&results, wall.as_secs_f64()))
            .with_context(|| format!("writing {}", f.display()))?;
    }
    Ok(if nfail > 0 { 1 } else { 0 })
}

fn truncate(s: &str, n: usize) -> String {
    let first = s.lines().next().unwrap_or("");
    if first.chars().count() <= n {
        first.to_string()
    } else {
        first.chars().take(n - 1).collect::<String>() + "…"
    }
}

pub fn replay(r: &ReplayArgs) -> Result<i32> {
    let mut sched = r.sched.clone();
    sched.resolve_steps(
        r.policy,
        &r.program.command,
        Duration::from_secs(3600),
        "replay",
    )?;
    let st = sched.strategy(r.policy, r.seed);
    if r.policy == PolicyArg::Mix {
        eprintln!(
            "detrun replay: seed {} runs under {} in the portfolio",
            r.seed,
            st.name()
        );
    }
    let mut args = vec!["--seed".to_string(), r.seed.to_string()];
    args.extend(sched.flags(st));
    if let Err(e) = r.net.config() {
        eprintln!("detrun: {e}");
        return Ok(2);
    }
    args.extend(r.net.flags());
    if r.branch_at.len() != r.branch_seed.len() {
        eprintln!("detrun: each --branch-at takes one --branch-seed");
        return Ok(2);
    }
    for (at, b) in r.branch_at.iter().zip(&r.branch_seed) {
        args.extend([
            "--branch-at".into(),
            at.clone(),
            "--branch-seed".into(),
            b.to_string(),
        ]);
    }
    let tmp = std::env::temp_dir().join(format!("detrun-replay-{}", std::process::id()));
    let mut env: Vec<(&str, &Path)> = Vec::new();
    if r.tmpdir_per_run {
        env.push(("TMPDIR", &tmp));
    }
    // A fresh empty TMPDIR for each run, as hunt gave the seed.
    let fresh = || -> Result<()> {
        if r.tmpdir_per_run {
            let _ = std::fs::remove_dir_all(&tmp);
            std::fs::create_dir_all(&tmp)?;
        }
        Ok(())
    };
    if !r.verify {
        fresh()?;
        let (st, out, err) = run_child(
            &args,
            &r.program.command,
            Duration::from_secs(u64::MAX / 4),
            &env,
        )?;
        let _ = std::fs::remove_dir_all(&tmp);
        use std::io::Write;
        std::io::stdout().write_all(&out)?;
        std::io::stderr().write_all(&err)?;
        return Ok(st.and_then(|s| s.code()).unwrap_or(125));
    }
    let dir = std::env::temp_dir().join(format!("detrun-verify-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let mut runs = Vec::new();
    for i in 0..2 {
        let trace = dir.join(format!("trace{i}.jsonl"));
        let mut a = args.clone();
        a.push("--trace".into());
        a.push(trace.to_string_lossy().into_owned());
        fresh()?;
        let (st, out, err) = run_child(
            &a,
            &r.program.command,
            Duration::from_secs(u64::MAX / 4),
            &env,
        )?;
        let t = std::fs::read(&trace).unwrap_or_default();
        runs.push((st.and_then(|s| s.code()).unwrap_or(125), out, err, t));
    }
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&tmp);
    let (a, b) = (&runs[0], &runs[1]);
    use std::io::Write;
    std::io::stdout().write_all(&a.1)?;
    std::io::stderr().write_all(&a.2)?;
    let what = [
        ("stdout", &a.1, &b.1),
        ("stderr", &a.2, &b.2),
        ("schedule trace", &a.3, &b.3),
    ];
    for (name, x, y) in what {
        if x != y {
            let (xs, ys) = (String::from_utf8_lossy(x), String::from_utf8_lossy(y));
            let line = xs
                .lines()
                .zip(ys.lines())
                .position(|(p, q)| p != q)
                .unwrap_or(xs.lines().count().min(ys.lines().count()));
            eprintln!(
                "detrun: replay diverged: {name} differs at line {}:\n  run 1: {}\n  run 2: {}",
                line + 1,
                xs.lines().nth(line).unwrap_or("<end>"),
                ys.lines().nth(line).unwrap_or("<end>")
            );
            return Ok(EXIT_DIVERGED);
        }
    }
    if a.0 != b.0 {
        eprintln!("detrun: replay diverged: exit status {} then {}", a.0, b.0);
        return Ok(EXIT_DIVERGED);
    }
    eprintln!("detrun: replay verified: two runs identical (exit {})", a.0);
    Ok(a.0)
}
