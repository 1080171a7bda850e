//! Options of one sandboxed run, as the CLI parsed them.

use std::ffi::OsString;
use std::path::PathBuf;

#[derive(Clone, Debug)]
pub struct RunConfig {
    /// Resolved program path and argv (argv[0] as the user typed it).
    pub program: PathBuf,
    pub argv: Vec<OsString>,
    pub seed: u64,
    pub epoch_secs: u64,
    pub event_cost_ns: u64,
    pub quantum: u32,
    pub chaos: bool,
    /// PCT with (depth, expected steps, instruction budget), instead of
    /// chaos/default.
    pub pct: Option<(u32, u64, u32)>,
    /// Chaos' instruction budget (0: chaos switches only at syscalls).
    pub chaos_insns: u32,
    /// Reach instruction-level points with breakpoints (see the world).
    pub breakpoints: bool,
    /// Entries of pthread/semaphore functions and thread start are
    /// scheduling points (`syncpoints`).
    pub sync_points: bool,
    /// Threads spinning on memory are found by probes and preempted at a
    /// point that is the same in every run (`supervisor/spin.rs`).
    pub spin_points: bool,
    /// Written globals of the program watched as points (`datapoints`).
    pub data_points: bool,
    /// PCT's steps are data points (`World::tick_data`).
    pub pct_data: bool,
    /// Write the schedule trace (JSON lines) here.
    pub trace: Option<PathBuf>,
    /// Write the orders reached at synchronization objects here
    /// (`coverage.rs`), for hunt.
    pub coverage: Option<PathBuf>,
    /// Stop the run (exit 124) when virtual time passes this many ns.
    pub virtual_timeout_ns: Option<u64>,
    /// Print a backtrace of the thread given turn N (1-based) at its first
    /// syscall of that turn (used by `analyze`).
    pub backtrace_turn: Option<u64>,
    /// Follow these turns first (`--schedule`).
    pub script: Option<Vec<detrun_scheduler::Segment>>,
    /// Write the turns taken here (`--record-schedule`), with this policy name.
    pub record_schedule: Option<(PathBuf, String)>,
    pub hostname: String,
    pub ncpus: u32,
    /// Pin supervisor and guest to this CPU; `None` picks the current one.
    pub cpu: Option<usize>,
    pub pin: bool,
    pub strict: bool,
    /// Virtualize inode numbers, timestamps and directory order.
    pub fs_virtual: bool,
    /// Use PID/UTS/mount namespaces when permitted.
    pub namespaces: bool,
    /// Wall-clock milliseconds a running thread may go without a stop
    /// before the watchdog looks at it.
    pub watchdog_ms: u64,
    pub verbose: bool,
    /// Directory holding the generated files bind-mounted over /sys and
    /// /proc entries (see `vfiles`).
    pub files_dir: Option<PathBuf>,
    /// Trace every stop to stderr (DETRUN_DEBUG=1).
    pub debug: bool,
    /// `--net=host`: AF_INET sockets reach the host's network.
    pub net_host: bool,
    /// The virtual network's faults and hosts.
    pub net: detrun_scheduler::net::NetConfig,
    /// Answer time calls in the tracee from the shared clock page.
    pub fast_time: bool,
    /// Answer stat calls inside the tracee (patched call sites).
    pub fast_stat: bool,
    /// Python sources that predate the run keep their real times (false:
    /// virtual like every other file).
    pub py_real_times: bool,
    /// Alternate histories: where to branch, with which seeds, and how.
    pub branch: Option<BranchPlan>,
    /// Branch outputs go to their own files (detrun's stdout and stderr
    /// are then the base run's files).
    pub capture_branches: bool,
}

/// Where and how a run branches (see `checkpoint`).
#[derive(Clone, Debug, Default)]
pub struct BranchPlan {
    /// Branch points, ascending; with `every`, points are every multiple.
    pub at: Vec<crate::checkpoint::BranchAt>,
    /// A checkpoint every this many virtual ns (explore).
    pub every: Option<u64>,
    /// Seeds of the branches run at each point; `None` continues the run
    /// unchanged (a checkpoint and a resume).
    pub seeds: Vec<Option<u64>>,
    /// Fork-based checkpoints (false: branch in place, from scratch).
    pub checkpoint: bool,
    /// After the branches of a checkpoint, the base run goes on.
    pub continue_base: bool,
    /// Per-branch outputs and `results.json` here.
    pub out_dir: Option<PathBuf>,
    /// Checkpoints kept waiting for their branches while the run goes on.
    pub max_alive: usize,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            program: PathBuf::new(),
            argv: Vec::new(),
            seed: 0,
            epoch_secs: 1_704_067_200,
            event_cost_ns: 1_000,
            quantum: 10_000,
            chaos: false,
            pct: None,
            chaos_insns: 0,
            breakpoints: false,
            sync_points: false,
            spin_points: true,
            data_points: false,
            pct_data: false,
            trace: None,
            coverage: None,
            script: None,
            backtrace_turn: None,
            virtual_timeout_ns: None,
            record_schedule: None,
            hostname: "detrun".into(),
            ncpus: 4,
            cpu: None,
            pin: true,
            strict: false,
            fs_virtual: true,
            namespaces: true,
            watchdog_ms: 250,
            verbose: false,
            debug: false,
            files_dir: None,
            net_host: false,
            net: Default::default(),
            fast_time: true,
            fast_stat: true,
            py_real_times: true,
            branch: None,
            capture_branches: false,
        }
    }
}
