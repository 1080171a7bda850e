//! `detrun`: run a program deterministically.

use anyhow::{Context, Result};
use clap::Parser;
use detrun_tracer::{RunConfig, Supervisor, EXIT_INTERNAL};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

const AFTER_HELP: &str = "\
EXAMPLES:
    detrun -- ./my-test                    run once, seed 0
    detrun --seed 42 -- python3 app.py     another reproducible history
    detrun --chaos --seed 7 -- ./flaky     a chaotic (but reproducible) schedule
    detrun --pct=3 --seed 9 -- ./flaky     PCT schedule of depth 3
    detrun --trace t.jsonl -- ./prog       write the schedule trace
    detrun --summary -- sh -c 'date; sleep 60; date'
    detrun --strict -- ./ci-step           fail if anything was not deterministic
    detrun --seed 9 --chaos --checkpoint-at 40ms --branch-seed 1 --branch-seed 2 --branch-out b/ -- ./flaky
                                           two alternate histories from one checkpoint
    detrun explore --from-seed 9 --every 20ms --branches 20 -- ./flaky
                                           failure probability over the run

EXIT STATUS:
    the program's own exit status; 128+N if it died from signal N;
    122  --strict and a nondeterminism hazard was seen (the program passed)
    121  replay --verify: the two runs differed
    123  deadlock: every thread blocked and nothing could wake them
    124  --virtual-timeout passed
    125  detrun itself failed (bad arguments, no ptrace, ...)
    126  the program exists but cannot be executed
    127  the program was not found

Same binary + arguments + environment + files + seed => same output.
Time, randomness, CPU identity, thread interleaving and PIDs are virtual.";

mod analyze;
mod explore;
mod feedback;
mod hunt;
mod netargs;

/// Deterministic execution sandbox: run PROGRAM so that every run with the
/// same seed is the same run.
#[derive(Parser, Debug)]
#[command(
    name = "detrun",
    version,
    after_help = AFTER_HELP,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
struct Cli {
    #[command(subcommand)]
    sub: Option<Sub>,

    #[command(flatten)]
    run: RunArgs,

    #[command(flatten)]
    program: crate::Program,
}

/// The plain `detrun [OPTIONS] -- PROGRAM` form, without the subcommands:
/// building every subcommand's ~70 options costs ~0.2 ms of each start.
#[derive(Parser, Debug)]
#[command(name = "detrun", version)]
struct PlainCli {
    #[command(flatten)]
    run: RunArgs,

    #[command(flatten)]
    program: crate::Program,
}

/// Can the arguments go to [`PlainCli`]? Not for a subcommand, nor for
/// help or the version (their text is the full command's).
fn plain_form(args: &[OsString]) -> bool {
    let first = args.get(1).and_then(|a| a.to_str()).unwrap_or("");
    if matches!(
        first,
        "hunt" | "replay" | "analyze" | "explore" | "syscalls" | "help"
    ) {
        return false;
    }
    !args
        .iter()
        .skip(1)
        .take_while(|a| *a != "--")
        .any(|a| matches!(a.to_str(), Some("-h" | "--help" | "-V" | "--version")))
}

#[derive(clap::Subcommand, Debug)]
enum Sub {
    /// Run a command under many seeds, J at a time, and report the failing
    /// ones grouped by failure. Example: detrun hunt --runs 500 -j 2 -- ./flaky
    Hunt(hunt::HuntArgs),
    /// Run the history of one seed again (optionally twice, comparing).
    /// Example: detrun replay --seed 1337 --policy chaos --verify -- ./flaky
    Replay(hunt::ReplayArgs),
    /// Find the scheduling decision that makes a failing seed fail.
    /// Example: detrun analyze --seed 1337 -- ./flaky
    Analyze(analyze::AnalyzeArgs),
    /// Branch alternate histories from checkpoints along one seed's run and
    /// report, per checkpoint, the fraction of branches that fail (table,
    /// JSON, SVG plot). Example: detrun explore --from-seed 9 --every 20ms --branches 20 -- ./flaky
    Explore(explore::ExploreArgs),
    /// What detrun does with each syscall: the filter's action, the handler
    /// and a note (all of them, or those named). Example: detrun syscalls futex read
    Syscalls(SyscallsArgs),
}

#[derive(clap::Args, Debug)]
struct SyscallsArgs {
    /// Syscall names or numbers (x86_64); none lists every syscall.
    names: Vec<String>,
    /// A Markdown table (docs/syscalls.md is this output).
    #[arg(long)]
    markdown: bool,
}

/// The program to run, after `--`.
#[derive(clap::Args, Debug, Clone)]
pub struct Program {
    /// The program and its arguments. Example: -- ./server --port 8080
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "PROGRAM"
    )]
    pub command: Vec<OsString>,
}

/// Options of one run (also accepted by `replay`).
#[derive(clap::Args, Debug, Clone)]
pub struct RunArgs {
    /// Seed of the virtual world (time, randomness, schedule); default 0, or
    /// the seed recorded in --schedule. Example: --seed 1337
    #[arg(long)]
    seed: Option<u64>,

    /// Realtime clock at the start, in seconds since the Unix epoch
    /// (default 2024-01-01T00:00:00Z). Example: --epoch 1700000000
    #[arg(long, default_value_t = 1_704_067_200)]
    epoch: u64,

    /// Virtual nanoseconds that each intercepted event costs.
    /// Example: --event-cost-ns 500
    #[arg(long, default_value_t = 1_000)]
    event_cost_ns: u64,

    /// Intercepted events a thread may run before the turn moves on.
    /// Example: --quantum 100
    #[arg(long, default_value_t = 10_000)]
    quantum: u32,

    /// Seeded random scheduling at every scheduling point (rr-style chaos).
    /// Example: --chaos --seed 3
    #[arg(long)]
    chaos: bool,

    /// Probabilistic Concurrency Testing: random thread priorities and
    /// DEPTH-1 seeded priority-change points (finds bugs of depth DEPTH).
    /// Example: --pct=3 --seed 12
    #[arg(long, value_name = "DEPTH", num_args = 0..=1, default_missing_value = "2", conflicts_with = "chaos")]
    pct: Option<u32>,

    /// Expected number of intercepted events of a run, over which PCT
    /// spreads its change points. Example: --pct-steps 50000
    #[arg(long, default_value_t = 1_000)]
    pct_steps: u64,

    /// PCT's instruction budget: at a change point, let the running thread
    /// run a seeded 1..=N more instructions (single-stepped) before it is
    /// preempted, so races with no syscall in their window are reached;
    /// 0 switches only at syscalls. Costs ~30 us per instruction, at
    /// DEPTH-1 points per run. Example: --pct-insns 200
    #[arg(long, default_value_t = 1000)]
    pct_insns: u32,

    /// PCT over data points: --pct-steps counts accesses of watched globals
    /// only (see --no-data-points), and a change point drops the thread
    /// right after such an access. Example: --pct 2 --pct-data --pct-steps 10
    #[arg(long, requires = "pct")]
    pct_data: bool,

    /// Chaos' instruction budget: at the start of some turns and the end of
    /// some slices, let the thread run seeded further instructions before
    /// switching, so races with no syscall in their window are reached; 0
    /// switches only at events. Example: --chaos --chaos-insns 50
    #[arg(long, default_value_t = 200)]
    chaos_insns: u32,

    /// Reach instruction-level points with a breakpoint: a few single-steps
    /// pick an instruction, then an int3 counts N of its executions (cheap
    /// inside loops; N is drawn from the budget). The default of --chaos;
    /// PCT single-steps unless given. Example: --pct --breakpoints
    #[arg(long)]
    breakpoints: bool,

    /// Reach --chaos's instruction-level points by single-stepping only
    /// (~30 us an instruction) instead of breakpoints. Example: --chaos --single-step
    #[arg(long, conflicts_with = "breakpoints")]
    single_step: bool,

    /// Scheduling points at the entries of pthread and semaphore functions
    /// (mutex, rwlock, condition, barrier, spin lock, create, join; found
    /// by symbol, reached by breakpoints) and at thread start, where the
    /// new thread may run before its creator's next instruction: `auto`
    /// (on under --chaos and --pct, and when --schedule was recorded with
    /// them), `on` or `off`. Example: --sync-points off
    #[arg(long, value_name = "WHEN", default_value = "auto", value_parser = ["auto", "on", "off"])]
    sync_points: String,

    /// Do not probe threads that run without syscalls for spins (a loop
    /// that changes nothing, preempted at a point that is the same in every
    /// run): only the --watchdog-ms preemption remains. Example: --no-spin-points
    #[arg(long)]
    no_spin_points: bool,

    /// With sync-op points on, no data points: otherwise up to four of the
    /// globals the program's code writes, drawn from the seed, are watched
    /// by the CPU's debug registers, and each read or write of them is a
    /// scheduling point (128 per global and process). Example: --no-data-points
    #[arg(long)]
    no_data_points: bool,

    /// Write the schedule trace (decisions and intercepted syscalls, JSON
    /// lines; same bytes for the same seed). Example: --trace run.jsonl
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,

    /// Write the run's coverage as JSON: the ordered pairs of two threads'
    /// events on one synchronization object (sync-op points' objects and
    /// atomics' memory), as hashes of the two operations and code sites.
    /// hunt reads it to prefer schedules that reach new pairs.
    /// Example: --coverage cov.json
    #[arg(long, value_name = "FILE")]
    coverage: Option<PathBuf>,

    /// Hostname the guest sees. Example: --hostname node1
    #[arg(long, default_value = "detrun")]
    hostname: String,

    /// Number of CPUs the guest sees (affinity, cpuid topology).
    /// Example: --cpus 8
    #[arg(long, default_value_t = 4)]
    cpus: u32,

    /// Pin detrun and the guest to this CPU (default: the current one).
    /// Example: --cpu 1
    #[arg(long)]
    cpu: Option<usize>,

    /// Do not pin to one CPU (slower: ptrace stops across CPUs cost ~20x).
    /// Example: --no-pin
    #[arg(long)]
    no_pin: bool,

    /// Do not use PID/UTS/mount namespaces (PIDs become a reported hazard).
    /// Example: --no-namespaces
    #[arg(long)]
    no_namespaces: bool,

    /// Treat every nondeterminism hazard as a failure (exit 122) and refuse
    /// unknown syscalls with ENOSYS. Example: --strict
    #[arg(long)]
    strict: bool,

    /// Timestamps of files that existed before the run: `virtual` (one
    /// fixed instant, except Python sources (`*.py`), which keep their real
    /// times so that CPython's bytecode cache stays valid; files written
    /// during the run get virtual times, and inode numbers and directory
    /// order are virtualized too), `strict` (like virtual, Python sources
    /// too) or `real` (the host's metadata, passed through).
    /// Example: --fs-times strict
    #[arg(long, value_name = "POLICY", default_value = "virtual", value_parser = ["virtual", "strict", "real"])]
    fs_times: String,

    /// Print the run summary (syscalls, virtual time, hazards) to stderr.
    /// Example: --summary
    #[arg(long)]
    summary: bool,

    /// Write the run summary as JSON. Example: --summary-json run.json
    #[arg(long, value_name = "FILE")]
    summary_json: Option<PathBuf>,

    /// Milliseconds (wall and CPU time) before the watchdog preempts a thread
    /// that makes no syscalls (reported as a hazard). Example: --watchdog-ms 200
    #[arg(long, default_value_t = 250)]
    watchdog_ms: u64,

    /// Warn on stderr about each syscall that is passed through unvirtualized.
    /// Example: -v
    #[arg(long, short)]
    verbose: bool,

    /// Follow this schedule file's turns first (see `--record-schedule`),
    /// then the default policy. Example: --schedule fail.sched
    #[arg(long, value_name = "FILE")]
    schedule: Option<PathBuf>,

    /// Write the turns this run took as a schedule file (format v1, see the
    /// README). Example: --record-schedule run.sched
    #[arg(long, value_name = "FILE")]
    record_schedule: Option<PathBuf>,

    /// Stop the run after this many seconds of virtual time (exit 124): a
    /// program that sleeps or times out forever cannot hang CI.
    /// Example: --virtual-timeout 3600
    #[arg(long, value_name = "SECS")]
    virtual_timeout: Option<u64>,

    /// Print a symbolized backtrace of the thread given turn N at its first
    /// syscall of that turn (used by analyze). Example: --backtrace-turn 12
    #[arg(long, value_name = "N", hide = true)]
    backtrace_turn: Option<u64>,

    #[command(flatten)]
    net: netargs::NetOpts,

    /// Make every time call trap instead of answering clock_gettime,
    /// gettimeofday and time inside the tracee from the shared clock page
    /// (same results, ~100x slower per call). Example: --no-fast-time
    #[arg(long)]
    no_fast_time: bool,

    /// Make every stat call trap instead of answering stat, lstat, fstat,
    /// newfstatat and statx inside the tracee, at call sites patched after
    /// their first traps, and every read of a regular file trap instead of
    /// being made there (same results). Example: --no-fast-stat
    #[arg(long)]
    no_fast_stat: bool,

    /// Take a checkpoint at the first scheduling point at or after this
    /// virtual time (`250ms`, `1.5s`) or count of scheduling decisions
    /// (`event:1200`): every guest process is forked copy-on-write and the
    /// run continues from the copy, or, with --branch-seed, each branch runs
    /// from it. Example: --checkpoint-at 40ms --branch-seed 7 --branch-seed 8
    #[arg(long, value_name = "WHEN", conflicts_with = "branch_at")]
    checkpoint_at: Option<String>,

    /// Branch in place (no checkpoint): from this point on, scheduling and
    /// network faults come from --branch-seed. The same history as the branch
    /// run from a checkpoint at this point. Repeatable (ascending, one
    /// --branch-seed each): a history branched again later.
    /// Example: --branch-at 40ms --branch-seed 7
    #[arg(long, value_name = "WHEN", requires = "branch_seed")]
    branch_at: Vec<String>,

    /// Seed of the rest of the run after --branch-at or --checkpoint-at;
    /// with --checkpoint-at it may repeat, one branch each. Example: --branch-seed 7
    #[arg(long, value_name = "SEED")]
    branch_seed: Vec<u64>,

    /// Write each branch's stdout, stderr (and trace, with --trace) and
    /// results.json here. When detrun's own stdout and stderr are files, a
    /// branch's files begin with the output from before the checkpoint.
    /// Example: --branch-out branches/
    #[arg(long, value_name = "DIR")]
    branch_out: Option<PathBuf>,

    /// A checkpoint every this much virtual time, the --branch-seed
    /// branches from each, the run going on after (used by explore).
    #[arg(long, value_name = "TIME", hide = true, conflicts_with_all = ["checkpoint_at", "branch_at"])]
    checkpoint_every: Option<String>,

    /// With --checkpoint-every: checkpoints kept alive, waiting for their
    /// branches, while the run goes on (used by explore).
    #[arg(long, value_name = "N", hide = true, default_value_t = 1)]
    max_checkpoints: usize,
}

/// The branch plan of the run options (None: no branching).
fn branch_plan(
    cli: &RunArgs,
) -> std::result::Result<Option<detrun_tracer::config::BranchPlan>, String> {
    use detrun_tracer::checkpoint::BranchAt;
    use detrun_tracer::config::BranchPlan;
    let seeds: Vec<Option<u64>> = cli.branch_seed.iter().map(|&s| Some(s)).collect();
    if let Some(d) = &cli.branch_out {
        std::fs::create_dir_all(d).map_err(|e| format!("--branch-out {}: {e}", d.display()))?;
    }
    let plan = if !cli.branch_at.is_empty() {
        if cli.branch_seed.len() != cli.branch_at.len() {
            return Err("each --branch-at takes one --branch-seed".into());
        }
        let at = cli
            .branch_at
            .iter()
            .map(|w| BranchAt::parse(w))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        BranchPlan {
            at,
            seeds,
            ..Default::default()
        }
    } else if let Some(w) = &cli.checkpoint_at {
        BranchPlan {
            at: vec![BranchAt::parse(w)?],
            seeds: if seeds.is_empty() { vec![None] } else { seeds },
            checkpoint: true,
            out_dir: cli.branch_out.clone(),
            ..Default::default()
        }
    } else if let Some(w) = &cli.checkpoint_every {
        let every = match BranchAt::parse(w)? {
            BranchAt::Time(t) if t > 0 => t,
            _ => return Err("--checkpoint-every takes a virtual time, e.g. 20ms".into()),
        };
        BranchPlan {
            every: Some(every),
            seeds,
            checkpoint: true,
            continue_base: true,
            out_dir: cli.branch_out.clone(),
            max_alive: cli.max_checkpoints.max(1),
            ..Default::default()
        }
    } else {
        if !cli.branch_seed.is_empty() {
            return Err("--branch-seed needs --branch-at or --checkpoint-at".into());
        }
        return Ok(None);
    };
    Ok(Some(plan))
}

/// Find `prog` the way a shell would. Errors carry the exit code.
fn resolve(prog: &OsString) -> std::result::Result<PathBuf, (i32, String)> {
    let p = Path::new(prog);
    let name = p.display().to_string();
    let check = |c: &Path| -> Option<std::result::Result<PathBuf, (i32, String)>> {
        use std::os::unix::fs::PermissionsExt;
        let md = std::fs::metadata(c).ok()?;
        if md.is_dir() {
            return Some(Err((126, format!("detrun: {name}: is a directory"))));
        }
        if md.permissions().mode() & 0o111 == 0 {
            return Some(Err((126, format!("detrun: {name}: permission denied"))));
        }
        Some(Ok(c.to_path_buf()))
    };
    if prog.to_string_lossy().contains('/') {
        return check(p)
            .unwrap_or_else(|| Err((127, format!("detrun: {name}: no such file or directory"))));
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    let mut denied = None;
    for dir in std::env::split_paths(&path) {
        match check(&dir.join(p)) {
            Some(Ok(found)) => return Ok(found),
            Some(Err(e)) => denied = denied.or(Some(e)),
            None => {}
        }
    }
    Err(denied.unwrap_or((127, format!("detrun: {name}: command not found"))))
}

/// Run `command` once under `cli` in this process. Returns the exit code.
pub fn run(cli: &RunArgs, command: &[OsString]) -> Result<i32> {
    let Some(first) = command.first() else {
        eprintln!("detrun: no program given (usage: detrun [OPTIONS] -- PROGRAM [ARGS...])");
        return Ok(EXIT_INTERNAL);
    };
    let program = match resolve(first) {
        Ok(p) => p,
        Err((code, msg)) => {
            eprintln!("{msg}");
            return Ok(code);
        }
    };
    let mut script = None;
    let mut seed = cli.seed.unwrap_or(0);
    let mut sync_points = cli.chaos || cli.pct.is_some();
    if let Some(f) = &cli.schedule {
        let sc = detrun_tracer::schedule::Schedule::load(f).map_err(anyhow::Error::msg)?;
        if cli.seed.is_none() {
            seed = sc.seed;
        }
        sync_points |= sc.sync;
        script = Some(sc.turns);
    }
    let policy_name = match (cli.pct, cli.chaos) {
        (Some(d), _) => format!("pct={d}"),
        (None, true) => "chaos".to_string(),
        (None, false) => "default".to_string(),
    };
    let (net, net_host) = match cli.net.config() {
        Ok(x) => x,
        Err(e) => {
            eprintln!("detrun: {e}");
            return Ok(2);
        }
    };
    let branch = match branch_plan(cli) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("detrun: {e}");
            return Ok(2);
        }
    };
    let sync_on = match cli.sync_points.as_str() {
        "on" => true,
        "off" => false,
        _ => sync_points,
    };
    let cfg = RunConfig {
        capture_branches: cli.branch_out.is_some(),
        branch,
        fast_time: !cli.no_fast_time,
        fast_stat: !cli.no_fast_stat,
        net,
        net_host,
        program,
        argv: command.to_vec(),
        seed,
        script,
        record_schedule: cli.record_schedule.clone().map(|p| (p, policy_name)),
        backtrace_turn: cli.backtrace_turn,
        virtual_timeout_ns: cli.virtual_timeout.map(|s| s.saturating_mul(1_000_000_000)),
        epoch_secs: cli.epoch,
        event_cost_ns: cli.event_cost_ns.max(1),
        quantum: cli.quantum.max(1),
        chaos: cli.chaos,
        pct: cli
            .pct
            .map(|d| (d.clamp(1, 64), cli.pct_steps.max(1), cli.pct_insns)),
        chaos_insns: cli.chaos_insns,
        breakpoints: cli.breakpoints || (cli.chaos && !cli.single_step),
        sync_points: sync_on,
        data_points: sync_on && !cli.no_data_points,
        pct_data: cli.pct_data,
        spin_points: !cli.no_spin_points,
        trace: cli.trace.clone(),
        coverage: cli.coverage.clone(),
        hostname: cli.hostname.clone(),
        ncpus: cli.cpus.clamp(1, 64),
        cpu: cli.cpu,
        pin: !cli.no_pin,
        strict: cli.strict,
        fs_virtual: cli.fs_times != "real",
        py_real_times: cli.fs_times == "virtual",
        namespaces: !cli.no_namespaces,
        watchdog_ms: cli.watchdog_ms.max(10),
        verbose: cli.verbose,
        debug: std::env::var_os("DETRUN_DEBUG").is_some(),
        files_dir: None,
    };
    let (code, summary) = Supervisor::new(cfg).run().context("running the guest")?;
    if cli.summary {
        eprint!("{}", summary.render());
    }
    if let Some(f) = &cli.summary_json {
        let json = serde_json::to_string_pretty(&summary)?;
        std::fs::write(f, json + "\n").with_context(|| format!("writing {}", f.display()))?;
    }
    Ok(code)
}

#[global_allocator]
static ALLOC: detrun_tracer::alloc::Counting = detrun_tracer::alloc::Counting;

/// Runs before Rust's runtime, which sets SIGPIPE to ignored for detrun:
/// the guest must start with the disposition detrun inherited.
extern "C" fn before_runtime() {
    detrun_tracer::spawn::note_inherited_sigpipe();
}

#[used]
#[link_section = ".init_array"]
static BEFORE_RUNTIME: extern "C" fn() = before_runtime;

fn main() {
    detrun_tracer::supervisor::note_start();
    let args: Vec<OsString> = std::env::args_os().collect();
    if plain_form(&args) {
        // Anything it does not take, the full command reports.
        if let Ok(p) = PlainCli::try_parse_from(&args) {
            let code = match run(&p.run, &p.program.command) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("detrun: {e:#}");
                    EXIT_INTERNAL
                }
            };
            std::process::exit(code);
        }
    }
    let cli = Cli::parse_from(&args);
    let r = match &cli.sub {
        Some(Sub::Hunt(h)) => hunt::hunt(h),
        Some(Sub::Replay(r)) => hunt::replay(r),
        Some(Sub::Analyze(a)) => analyze::analyze(a),
        Some(Sub::Explore(e)) => explore::explore(e),
        Some(Sub::Syscalls(a)) => match detrun_tracer::table::render(&a.names, a.markdown) {
            Ok(t) => {
                print!("{t}");
                Ok(0)
            }
            Err(e) => {
                eprintln!("detrun: {e}");
                Ok(EXIT_INTERNAL)
            }
        },
        None => run(&cli.run, &cli.program.command),
    };
    let code = match r {
        Ok(c) => c,
        Err(e) => {
            eprintln!("detrun: {e:#}");
            EXIT_INTERNAL
        }
    };
    std::process::exit(code);
}
