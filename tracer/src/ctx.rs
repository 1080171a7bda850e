//! The state of a run that the handlers share, grouped by concern, and
//! the operations on the turn they need (continue, resume, new threads and
//! processes; parking is in `parking.rs`).
//!
//! The handlers take a `&mut Ctx`; they never reach the event loop
//! (`supervisor`) except through `Hooks`, which the loop fills in: a stop
//! taken while a handler waits for a thread goes back to the loop, and an
//! instruction-level point is stepped by it.

use crate::config::RunConfig;
use crate::files::FileView;
use crate::host::{cpuid_faulting_supported, start_clocks};
use crate::parking::IoBufs;
use crate::summary::Stats;
use crate::sys;
use crate::task::{Post, ProcInfo, Resume, Tracee};
use crate::watchdog::Watch;
use detrun_scheduler::cpuid::CpuidTable;
use detrun_scheduler::fsview::{FsView, TimePolicy};
use detrun_scheduler::{Config, InsnPoint, Policy, ProcId, Tid, World};
use libc::pid_t;
use std::collections::BTreeMap;
use std::time::Instant;

/// Who is holding the turn while it dies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hold {
    Normal,
    UntilThreadDeath(pid_t),
    UntilProcDeath(ProcId),
}

/// Exit status when every thread is blocked and nothing can wake them.
pub const EXIT_DEADLOCK: i32 = 123;

/// Exit status when `--strict` found a hazard in a run that otherwise passed.
pub const EXIT_HAZARD: i32 = 122;

/// Exit status when the run exceeded `--virtual-timeout`.
pub const EXIT_TIMEOUT: i32 = 124;

/// Exit status for a failure of detrun itself.
pub const EXIT_INTERNAL: i32 = 125;

/// Where the handlers hand control back to the event loop.
#[derive(Clone, Copy)]
pub struct Hooks {
    /// Handle a stop of `tid` that arrived while a handler waited for it.
    pub on_stop: fn(&mut Ctx, pid_t, i32),
    /// Step the running thread to an instruction-level point.
    pub step: fn(&mut Ctx, pid_t, InsnPoint),
}

/// Who holds the turn, and how the run is ending.
pub struct Turn {
    pub running: Option<pid_t>,
    pub hold: Hold,
    pub main_proc: ProcId,
    pub main_status: Option<i32>,
    /// Stops that arrived before their thread was known.
    pub early: BTreeMap<pid_t, i32>,
    /// Threads left blocking in the kernel (value unused).
    pub in_kernel: BTreeMap<pid_t, bool>,
    /// True once another thread ran since the Kernel-parked threads were
    /// last retried.
    pub kernel_retry: bool,
    pub shutting_down: bool,
    /// The run passed `virtual_timeout_ns` and was stopped.
    pub timed_out: bool,
    pub deadlock: Option<Vec<String>>,
}

impl Turn {
    /// No one holds the turn; `main_proc` is the guest's first process.
    pub fn new(main_proc: ProcId) -> Turn {
        Turn {
            running: None,
            hold: Hold::Normal,
            main_proc,
            main_status: None,
            early: BTreeMap::new(),
            in_kernel: BTreeMap::new(),
            kernel_retry: false,
            shutting_down: false,
            timed_out: false,
            deadlock: None,
        }
    }
}

/// Copy mode: the running set is a copy from a checkpoint (`handlers::vpid`).
#[derive(Default)]
pub struct CopyMode {
    pub on: bool,
    /// Guest PID the next new thread or process gets in copy mode.
    pub next_vpid: pid_t,
    /// Guest PIDs are recorded (a run that may checkpoint).
    pub track_ids: bool,
    /// Private dirty memory of the branch's processes at their exits (KB).
    pub private_kb: u64,
}

/// What this host and this run's set-up give.
pub struct Host {
    /// Offset of a `syscall` instruction in the vDSO (the same image in
    /// every process; its address is per process: `ProcInfo::syscall_insn`).
    pub vdso_syscall: Option<u64>,
    /// False once arming CPUID faulting failed (the CPU lacks it).
    pub cpuid_faulting: bool,
    /// The guest has its own PID namespace.
    pub namespaces: bool,
    pub next_space: u64,
    /// The last generation of watches given out (`datapoints`).
    pub watch_gen: u64,
    pub start: Instant,
}

pub struct Ctx {
    pub cfg: RunConfig,
    pub world: World,
    pub cpuid: CpuidTable,
    pub threads: BTreeMap<pid_t, Tracee>,
    pub vt_tid: Vec<pid_t>,
    pub procs: Vec<ProcInfo>,
    pub turn: Turn,
    pub watch: Watch,
    pub stats: Stats,
    /// The schedule trace, when asked for.
    pub trace: Option<crate::trace::Trace>,
    pub files: FileView,
    /// The kernel side of the virtual network.
    pub net: crate::net::NetKernel,
    /// The run's network namespace, made when first needed.
    pub late_net: Option<crate::netns::LateNet>,
    pub io: IoBufs,
    /// The page the time fast path answers from (None: time calls trap).
    pub clock_page: Option<crate::vdso::ClockPage>,
    pub copy: CopyMode,
    pub host: Host,
    /// The backtrace asked for with `backtrace_turn` was printed.
    pub backtrace_done: bool,
    pub hooks: Hooks,
    /// Sync-op entries found per file (`syncpoints`).
    pub sync_syms: crate::syncpoints::SymCache,
    /// The orders reached at synchronization objects, with `--coverage`.
    pub coverage: Option<crate::coverage::Coverage>,
}

impl Ctx {
    pub fn new(cfg: RunConfig, hooks: Hooks) -> Ctx {
        let wcfg = Config {
            seed: cfg.seed,
            epoch_secs: cfg.epoch_secs,
            event_cost_ns: cfg.event_cost_ns,
            quantum: cfg.quantum.max(1),
            policy: match (cfg.pct, cfg.chaos) {
                (Some((depth, steps, insns)), _) => Policy::Pct {
                    depth,
                    steps,
                    insns,
                    data: cfg.pct_data,
                },
                (None, true) => Policy::Chaos,
                (None, false) => Policy::RoundRobin,
            },
            chaos_insns: cfg.chaos_insns,
            breakpoints: cfg.breakpoints,
            start_points: cfg.sync_points,
            net: cfg.net.clone(),
        };
        let epoch_ns = cfg.epoch_secs.saturating_mul(1_000_000_000);
        let cfg_coverage = cfg.coverage.is_some();
        let mut cpuid = CpuidTable::fixed(cfg.ncpus);
        // Asking the host costs a VM exit per leaf: only when the table
        // will be used.
        let faulting = cpuid_faulting_supported();
        if faulting {
            cpuid.restrict_to(crate::host::host_cpuid);
        }
        let mut world = World::new(wcfg);
        if let Some(sc) = cfg.script.clone() {
            world.set_script(sc);
        }
        let policy = if cfg.fs_virtual {
            TimePolicy::Virtual
        } else {
            TimePolicy::Real
        };
        let fsv = FsView::new(
            policy,
            start_clocks().1.saturating_add(1),
            start_clocks().0,
            epoch_ns,
        );
        Ctx {
            cfg,
            world,
            cpuid,
            threads: BTreeMap::new(),
            vt_tid: Vec::new(),
            procs: Vec::new(),
            turn: Turn::new(0),
            watch: Watch::default(),
            stats: Stats::default(),
            trace: None,
            files: FileView {
                fsv,
                dirs: BTreeMap::new(),
                proc_files: 0,
                start_closed: std::cell::Cell::new(false),
            },
            net: crate::net::NetKernel::new(None),
            late_net: None,
            io: IoBufs::default(),
            clock_page: None,
            copy: CopyMode {
                next_vpid: 2,
                ..CopyMode::default()
            },
            host: Host {
                vdso_syscall: None,
                cpuid_faulting: faulting,
                namespaces: false,
                next_space: 1,
                watch_gen: 0,
                start: Instant::now(),
            },
            backtrace_done: false,
            hooks,
            sync_syms: Default::default(),
            coverage: cfg_coverage.then(Default::default),
        }
    }

    pub fn new_space(&mut self) -> u64 {
        self.host.next_space += 1;
        self.host.next_space
    }

    pub fn add_proc(&mut self, tgid: pid_t, parent: Option<ProcId>) -> ProcId {
        let id = self.world.add_process();
        let space = self.new_space();
        let pidfd = sys::pidfd_open(tgid).unwrap_or(-1);
        let (vpid, vpgid, vsid) = if self.copy.track_ids && !self.copy.on {
            crate::sys::ns_ids(tgid).unwrap_or((tgid, tgid, tgid))
        } else {
            (0, 0, 0)
        };
        self.procs.push(ProcInfo {
            tgid,
            pidfd,
            space,
            group_exit: false,
            parent,
            vfork_parent: None,
            alive: true,
            vpid,
            vpgid,
            vsid,
            nspid: vpid,
            status: None,
            reaped: false,
            exit_signal: libc::SIGCHLD,
            notify_kernel: true,
            copy_filter: false,
            chld_info: None,
            // A fork runs the parent's image until it execs.
            syscall_insn: parent.map_or(0, |pp| self.procs[pp as usize].syscall_insn),
            shim_mapped: parent.is_some_and(|pp| self.procs[pp as usize].shim_mapped),
            patch: parent.map_or_else(Default::default, |pp| self.procs[pp as usize].patch.clone()),
        });
        self.stats.processes += 1;
        debug_assert_eq!(id as usize + 1, self.procs.len());
        id
    }

    pub fn add_thread(&mut self, tid: pid_t, proc: ProcId, clear_tid: u64) -> Tid {
        let vt = self.world.add_thread(proc);
        let vtid = if self.copy.track_ids && !self.copy.on {
            // A new process's first thread: add_proc just read its id.
            let pi = &self.procs[proc as usize];
            let v = if pi.tgid == tid && pi.vpid != 0 {
                pi.vpid
            } else {
                crate::sys::ns_id(tid)
            };
            self.copy.next_vpid = self.copy.next_vpid.max(v + 1);
            v
        } else {
            0
        };
        self.vt_tid.push(tid);
        self.threads.insert(
            tid,
            Tracee {
                tid,
                vt,
                proc,
                resume: Resume::Initial,
                park: None,
                saved: None,
                at_exit: false,
                post: Post::None,
                pending_clone: None,
                settid: (0, 0),
                clear_tid,
                wcont: None,
                io: Vec::new(),
                wait_mask: None,
                parked_nr: -1,
                last_sync: None,
                watch_gen: 0,
                restart: None,
                io_restore: Vec::new(),
                again: false,
                vtid,
                nstid: vtid,
            },
        );
        self.stats.threads += 1;
        vt
    }

    /// Move the virtual network's data (deterministic: only at stops).
    pub fn pump_net(&mut self) {
        let now = self.world.clock.monotonic();
        self.net.pump(&mut self.world.net, now);
    }

    /// For `analyze`: a symbolized backtrace of `tid` on stderr.
    pub fn print_backtrace(&self, tid: pid_t, what: &str) {
        let Some(t) = self.threads.get(&tid) else {
            return;
        };
        let tgid = self.procs[t.proc as usize].tgid;
        eprintln!(
            "detrun-bt: turn {} thread {} {what} at {} ns",
            self.world.decisions,
            t.vt,
            self.world.clock.elapsed()
        );
        for (i, f) in crate::backtrace::backtrace(tid, tgid, 12)
            .iter()
            .enumerate()
        {
            eprintln!("detrun-bt:   #{i} {f}");
        }
    }

    /// Continue the running thread, or hand the turn on if it used its quantum.
    pub fn continue_running(&mut self, tid: pid_t) {
        if self.world.timers_due() {
            let ds = self.world.fire_due();
            self.deliver_timers(ds);
        }
        if self.turn.running != Some(tid) {
            return;
        }
        if let Some(p) = self.world.take_insn_preemption() {
            (self.hooks.step)(self, tid, p);
            return;
        }
        if let Err(_e) = self.cont(tid, 0) {
            // Died under us; the death event follows.
        }
    }

    /// Resume a tracee (the clock page first: it may read the time).
    pub fn cont(&self, tid: pid_t, sig: i32) -> std::io::Result<()> {
        self.publish_clock();
        sys::cont(tid, sig)
    }

    pub fn resume_syscall(&self, tid: pid_t, sig: i32) -> std::io::Result<()> {
        self.publish_clock();
        sys::syscall(tid, sig)
    }

    pub fn step(&self, tid: pid_t) -> std::io::Result<()> {
        self.publish_clock();
        sys::singlestep(tid)
    }

    /// Wait for `tid`'s next stop and take in the time it spent.
    pub(crate) fn wait_stop(&mut self, tid: pid_t) -> Option<i32> {
        let st = Self::wait_tid(tid);
        self.absorb_clock();
        st
    }

    /// Wait for the next stop of `tid` (retrying EINTR).
    pub(crate) fn wait_tid(tid: pid_t) -> Option<i32> {
        loop {
            match sys::wait_pid(tid, 0) {
                // A spin probe's stop inside a nested wait: go on as before.
                Ok((_, st)) if sys::take_probe(tid, st) => {
                    if sys::resume_as_before(tid).is_err() {
                        return None;
                    }
                }
                Ok((_, st)) => return Some(st),
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(_) => return None,
            }
        }
    }

    pub fn held_normally(&self) -> bool {
        self.turn.hold == Hold::Normal
    }

    pub fn kernel_waiters(&self) -> bool {
        !self.turn.in_kernel.is_empty()
    }

    /// Reset the per-run state to the checkpoint's (before an instance).
    pub fn reset_set(&mut self, ck_world: World, main_proc: ProcId, stats: Stats) {
        self.world = ck_world;
        self.turn = Turn::new(main_proc);
        self.stats = stats;
        self.watch.sample = None;
        self.copy.on = true;
        self.copy.private_kb = 0;
        self.mark_resume();
    }

    /// The exit code of the run as it stands (at its end).
    pub(crate) fn exit_code(&self) -> i32 {
        let mut code = match self.turn.main_status {
            Some(s) if libc::WIFEXITED(s) => libc::WEXITSTATUS(s),
            Some(s) if libc::WIFSIGNALED(s) => 128 + libc::WTERMSIG(s),
            _ => EXIT_INTERNAL,
        };
        if self.turn.deadlock.is_some() {
            code = EXIT_DEADLOCK;
        }
        if self.turn.timed_out {
            code = EXIT_TIMEOUT;
        }
        code
    }
}
