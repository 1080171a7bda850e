//! The ptrace event loop and the turn.
//!
//! Exactly one tracee thread holds the turn and runs; every other thread is
//! in a ptrace-stop. The holder runs until its next stop (a trapped syscall,
//! a signal, a clone/exec/exit event); the stop is handled, and the world
//! decides whether it keeps the turn. Events from other threads (a new
//! thread's first stop, the deaths of a group exit) are taken as they come
//! but never let a second thread run.
//!
//! A thread that must wait (futex, sleep, a pipe with no data, wait4) is
//! parked in the world and left stopped; it never blocks in the kernel while
//! holding the turn. See `handlers/` for what each syscall does.

use crate::config::RunConfig;
use crate::summary::{Stats, Summary};
use crate::sys::{self, Regs};
use detrun_scheduler::cpuid::CpuidTable;
use detrun_scheduler::{Config, Next, Policy, ProcId, Tid, Wait, WakeReason, World};
use libc::pid_t;
use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};
use std::time::Instant;

/// Exit status when every thread is blocked and nothing can wake them.
pub const EXIT_DEADLOCK: i32 = 123;
/// Exit status when `--strict` found a hazard in a run that otherwise passed.
pub const EXIT_HAZARD: i32 = 122;
/// Exit status when the run exceeded `--virtual-timeout`.
pub const EXIT_TIMEOUT: i32 = 124;
/// Exit status for a failure of detrun itself.
pub const EXIT_INTERNAL: i32 = 125;

const OPTIONS: i32 = libc::PTRACE_O_EXITKILL
    | libc::PTRACE_O_TRACESYSGOOD
    | libc::PTRACE_O_TRACESECCOMP
    | libc::PTRACE_O_TRACECLONE
    | libc::PTRACE_O_TRACEFORK
    | libc::PTRACE_O_TRACEVFORK
    | libc::PTRACE_O_TRACEEXEC
    | libc::PTRACE_O_TRACEEXIT
    | libc::PTRACE_O_TRACEVFORKDONE;

/// How to continue a stopped thread when it gets the turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resume {
    /// Its first stop: continue, suppressing the SIGSTOP.
    Initial,
    /// PTRACE_CONT with this signal (registers already set).
    Cont(i32),
    /// Handle the pending syscall (at a seccomp stop) again.
    Redo,
    /// At a syscall-exit stop: execute the syscall again from its start.
    Reissue,
    /// Make the pending syscall return this value.
    Return(i64),
    /// At a syscall-exit stop: return -ERESTARTSYS-like code so the kernel
    /// delivers the pending signal and restarts or fails the call.
    Interrupt(i64),
    /// At a seccomp stop with a deliverable signal pending: let the real
    /// (blocking) call run; the kernel returns at once.
    PassReal,
    /// Resume to the syscall's exit stop (its `Post` is set).
    Syscall,
}

/// Why a parked thread is parked, and how each kind of wake completes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Park {
    /// futex wait at a seccomp stop.
    Futex,
    /// A sleep: `rem` is where to write the remaining time on EINTR.
    Sleep { rem: u64, deadline: u64 },
    /// fd readiness at a seccomp stop: re-handle when woken.
    Io,
    /// poll/select/epoll_wait: re-handle; on timeout pass with a zero timeout.
    Poll,
    /// pause, sigsuspend, sigtimedwait: only a signal (or its timeout).
    Signal,
    /// At a syscall-exit stop with the registers to reissue the call.
    Exit,
    /// A vfork parent, resumed into the kernel until its child execs or exits.
    Vfork,
    /// Interrupted out of a syscall the filter let through but that blocked;
    /// retried whenever another thread has run.
    Kernel,
    /// A lock that was taken: re-handle whenever another thread has run.
    Retry,
}

/// Post-processing at a syscall-exit stop.
#[derive(Debug)]
pub enum Post {
    None,
    /// wait4/waitid made non-blocking: `opts_arg` is the argument index of
    /// the options, `orig` their original value.
    Wait {
        opts_arg: usize,
        orig: u64,
        infop: u64,
    },
    /// A signal was sent: look for waiters it interrupts.
    Kill {
        sig: i32,
        target: i64,
    },
    /// A file opened for writing in the start's tick: note it as the run's.
    Touch,
    /// A stat call: rewrite the answer at `buf`.
    Stat {
        buf: u64,
        statx: bool,
        /// The path argument (0: fstat or none).
        path: u64,
    },
    /// Put the guest's original argument back (syscalls preserve registers).
    RestoreArg {
        index: usize,
        value: u64,
    },
    /// Two arguments to put back.
    RestoreArgs([(usize, u64); 2]),
    /// recvmsg on a TCP socket: put msg_name back, msg_namelen 0.
    MsgName {
        hdr: u64,
        name: u64,
    },
    /// socket(AF_INET*) ran as AF_UNIX: register it, restore rdi/rdx.
    Socket {
        proto: detrun_scheduler::net::Proto,
        family: detrun_scheduler::net::Family,
        rdi: u64,
        rdx: u64,
    },
    /// Copy mode: a wait that found nothing, skipped; park at its exit.
    VWait {
        nr: i64,
    },
    /// Copy mode: F_GETLK's `struct flock`, whose l_pid is translated.
    LockPid {
        flock: u64,
    },
    /// Copy mode: the call returns this (a child's guest PID) if it succeeded.
    SetRet {
        value: i32,
    },
    /// accept on a virtual listener: name the new socket's peer.
    Accept {
        listener: detrun_scheduler::net::SockId,
        addr: u64,
        lenp: u64,
        rsi: u64,
        rdx: u64,
    },
}

/// A write being continued across partial non-blocking steps.
#[derive(Clone, Copy, Debug)]
pub struct WriteCont {
    pub done: u64,
}

pub struct Tracee {
    pub tid: pid_t,
    pub vt: Tid,
    pub proc: ProcId,
    pub resume: Resume,
    pub park: Option<Park>,
    /// Registers of the original syscall while parked at an exit stop.
    pub saved: Option<Regs>,
    /// At a syscall-exit stop (rather than a seccomp stop).
    pub at_exit: bool,
    pub post: Post,
    pub pending_clone: Option<(u64, u64)>,
    /// clone's parent_tid and child_tid addresses (CLONE_*_SETTID).
    pub settid: (u64, u64),
    pub clear_tid: u64,
    pub wcont: Option<WriteCont>,
    /// Stolen descriptors (and poll events) whose readiness wakes this thread.
    pub io: Vec<(OwnedFd, i16)>,
    /// Signal mask to use for interruption while parked (sigsuspend & co).
    pub wait_mask: Option<u64>,
    /// The syscall it is parked in, for deadlock reports.
    pub parked_nr: i64,
    /// Descriptors to steal again into `io` (an instance of a checkpoint).
    pub io_restore: Vec<(i32, i16)>,
    /// Guest-visible TID (as the original run had it) and the kernel's
    /// namespace TID (they differ in copy mode).
    pub vtid: pid_t,
    pub nstid: pid_t,
    /// Its next seccomp stop repeats a call that was an event already.
    pub again: bool,
}

#[derive(Clone)]
pub struct ProcInfo {
    pub tgid: pid_t,
    pub pidfd: i32,
    pub space: u64,
    pub group_exit: bool,
    pub parent: Option<ProcId>,
    pub vfork_parent: Option<pid_t>,
    pub alive: bool,
    /// Guest-visible PID, process group and session; the kernel's
    /// namespace PID (see `handlers::vpid`; tracked only for checkpoints).
    pub vpid: pid_t,
    pub vpgid: pid_t,
    pub vsid: pid_t,
    pub nspid: pid_t,
    /// Wait status once dead, and whether the guest parent reaped it.
    pub status: Option<i32>,
    pub reaped: bool,
    /// Signal for the parent at death (SIGCHLD for fork).
    pub exit_signal: i32,
    /// The kernel parent is the guest parent (false for copies, whose
    /// kernel parent is a frozen process: detrun sends the signal).
    pub notify_kernel: bool,
    /// Copy mode's filter is installed.
    pub copy_filter: bool,
    /// Address of a `syscall` instruction in the process's vDSO (0: none
    /// known), for injected calls.
    pub syscall_insn: u64,
    /// The shared file is mapped in this image, and its stat sites patched
    /// so far.
    pub shim_mapped: bool,
    pub patch: crate::patch::Patches,
    /// Copy mode: (PID, code, status) of the child whose SIGCHLD detrun
    /// sent, for the siginfo the guest sees.
    pub chld_info: Option<(pid_t, i32, i32)>,
}

/// How an instruction-level point ended early.
enum PointEnd {
    /// The thread is gone (its death was handled).
    Gone,
    /// Preempt here and continue it this way.
    At(Resume),
}

/// Who is holding the turn while it dies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hold {
    Normal,
    UntilThreadDeath(pid_t),
    UntilProcDeath(ProcId),
}

static FORWARD_SIG: AtomicI32 = AtomicI32::new(0);
static FORWARD_CODE: AtomicI32 = AtomicI32::new(0);
static ALARMS: AtomicU32 = AtomicU32::new(0);

extern "C" fn on_forward(sig: i32, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    FORWARD_SIG.store(sig, Ordering::SeqCst);
    // SAFETY: the kernel passes a valid siginfo to SA_SIGINFO handlers.
    let code = unsafe { info.as_ref().map_or(0, |i| i.si_code) };
    FORWARD_CODE.store(code, Ordering::SeqCst);
}

extern "C" fn on_alarm(_: i32) {
    ALARMS.fetch_add(1, Ordering::Relaxed);
}

/// Period of the watchdog's alarm.
const ALARM_MS: u64 = 100;

/// A resume of the running thread: its sequence number and the alarm tick.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Mark {
    seq: u64,
    tick: u64,
}

fn install_handlers() {
    // SAFETY: installing async-signal-safe handlers (atomic stores only),
    // without SA_RESTART so that waitpid returns EINTR.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_forward as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO;
        for s in [
            libc::SIGINT,
            libc::SIGTERM,
            libc::SIGHUP,
            libc::SIGQUIT,
            libc::SIGUSR1,
            libc::SIGUSR2,
        ] {
            libc::sigaction(s, &sa, std::ptr::null_mut());
        }
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_alarm as *const () as usize;
        libc::sigaction(libc::SIGALRM, &sa, std::ptr::null_mut());
        // Writes done for the guest report EPIPE; the guest gets its SIGPIPE.
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        let tv = libc::timeval {
            tv_sec: 0,
            tv_usec: (ALARM_MS * 1000) as i64,
        };
        let it = libc::itimerval {
            it_interval: tv,
            it_value: tv,
        };
        libc::setitimer(libc::ITIMER_REAL, &it, std::ptr::null_mut());
    }
}

fn stop_alarm() {
    // SAFETY: disarming our own timer.
    unsafe {
        let it: libc::itimerval = std::mem::zeroed();
        libc::setitimer(libc::ITIMER_REAL, &it, std::ptr::null_mut());
    }
}

pub struct Supervisor {
    pub cfg: RunConfig,
    pub world: World,
    pub cpuid: CpuidTable,
    pub threads: BTreeMap<pid_t, Tracee>,
    pub vt_tid: Vec<pid_t>,
    pub procs: Vec<ProcInfo>,
    early: BTreeMap<pid_t, i32>,
    pub running: Option<pid_t>,
    hold: Hold,
    pub main_proc: ProcId,
    main_status: Option<i32>,
    pub stats: Stats,
    /// Offset of a `syscall` instruction in the vDSO (the same image in
    /// every process; its address is per process: `ProcInfo::syscall_insn`).
    pub vdso_syscall: Option<u64>,
    next_space: u64,
    /// When the running thread last stopped or was resumed (no clock read:
    /// the supervisor runs with TSC reads faulting, see `selftime`).
    resumed_at: Mark,
    /// The watchdog's first look at a long-running thread: (tid, its
    /// `resumed_at`, CPU ns used then).
    watch_sample: Option<(pid_t, Mark, u64)>,
    start: Instant,
    deadlock: Option<Vec<String>>,
    shutting_down: bool,
    pub namespaces: bool,
    /// True once another thread ran since the Kernel-parked threads were
    /// last retried.
    kernel_retry: bool,
    /// False once arming CPUID faulting failed (the CPU lacks it).
    pub cpuid_faulting: bool,
    /// Threads left blocking in the kernel (value unused).
    in_kernel: BTreeMap<pid_t, bool>,
    /// The schedule trace, when asked for.
    pub trace: Option<crate::trace::Trace>,
    /// The backtrace asked for with `backtrace_turn` was printed.
    pub backtrace_done: bool,
    /// Generated /proc files so far (for unique names).
    pub proc_files: u64,
    /// The run passed `virtual_timeout_ns` and was stopped.
    timed_out: bool,
    /// Virtual inode numbers and timestamps.
    pub fsv: detrun_scheduler::fsview::FsView,
    /// The start's tick is over (see `world_start_open`).
    start_closed: std::cell::Cell<bool>,
    /// Sorted listings of directories being read, by (dev, ino).
    pub dirs: BTreeMap<(u64, u64), Vec<crate::handlers::fs::Dirent>>,
    /// The kernel side of the virtual network.
    pub net: crate::net::NetKernel,
    /// The run's network namespace, made when first needed.
    pub late_net: Option<crate::netns::LateNet>,
    /// The buffer through which the supervisor completes large writes.
    pub io_buf: Vec<u8>,
    /// The segments of the write being completed (reused).
    pub io_segs: Vec<(u64, u64)>,
    /// Reused by `check_io` at every stop.
    scratch_tids: Vec<Tid>,
    scratch_pollfds: Vec<libc::pollfd>,
    /// The page the time fast path answers from (None: time calls trap).
    pub clock_page: Option<crate::vdso::ClockPage>,
    /// The running set is a copy from a checkpoint (see `handlers::vpid`).
    pub copy_mode: bool,
    /// Guest PID the next new thread or process gets in copy mode.
    pub next_vpid: pid_t,
    /// Guest PIDs are recorded (a run that may checkpoint).
    pub track_ids: bool,
    /// Next branch point of `cfg.branch`, and checkpoints taken so far.
    branch_next: usize,
    checkpoints: usize,
    /// Private dirty memory of the branch's processes at their exits (KB).
    pub branch_private_kb: u64,
    /// Failed tries at the pending checkpoint.
    ck_attempts: u32,
    /// Checkpoints whose branches have not run yet (explore), with the
    /// branch point each was asked for.
    pending: std::collections::VecDeque<(crate::checkpoint::Checkpoint, u64)>,
    in_branch: bool,
    /// Branches run so far (for `results.json`).
    pub branch_results: Vec<crate::summary::BranchResult>,
    /// The run is over (all its branches ran).
    ended: bool,
}

impl Supervisor {
    pub fn new(cfg: RunConfig) -> Supervisor {
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
                },
                (None, true) => Policy::Chaos,
                (None, false) => Policy::RoundRobin,
            },
            chaos_insns: cfg.chaos_insns,
            breakpoints: cfg.breakpoints,
            net: cfg.net.clone(),
        };
        let cfg_fs_virtual = cfg.fs_virtual;
        let epoch_ns = cfg.epoch_secs.saturating_mul(1_000_000_000);
        let script = cfg.script.clone();
        let mut cpuid = CpuidTable::fixed(cfg.ncpus);
        // Asking the host costs a VM exit per leaf: only when the table
        // will be used.
        let faulting = cpuid_faulting_supported();
        if faulting {
            cpuid.restrict_to(crate::handlers::misc::host_cpuid);
        }
        let mut world = World::new(wcfg);
        if let Some(sc) = script {
            world.set_script(sc);
        }
        Supervisor {
            cfg,
            world,
            cpuid,
            threads: BTreeMap::new(),
            vt_tid: Vec::new(),
            procs: Vec::new(),
            early: BTreeMap::new(),
            running: None,
            hold: Hold::Normal,
            main_proc: 0,
            main_status: None,
            stats: Stats::default(),
            vdso_syscall: None,
            next_space: 1,
            resumed_at: Mark::default(),
            watch_sample: None,
            start: Instant::now(),
            deadlock: None,
            shutting_down: false,
            namespaces: false,
            late_net: None,
            io_buf: Vec::new(),
            io_segs: Vec::new(),
            scratch_tids: Vec::new(),
            scratch_pollfds: Vec::new(),
            kernel_retry: false,
            cpuid_faulting: faulting,
            in_kernel: BTreeMap::new(),
            trace: None,
            start_closed: std::cell::Cell::new(false),
            fsv: detrun_scheduler::fsview::FsView::new(
                if cfg_fs_virtual {
                    detrun_scheduler::fsview::TimePolicy::Virtual
                } else {
                    detrun_scheduler::fsview::TimePolicy::Real
                },
                start_clocks().1.saturating_add(1),
                start_clocks().0,
                epoch_ns,
            ),
            dirs: BTreeMap::new(),
            backtrace_done: false,
            proc_files: 0,
            timed_out: false,
            net: crate::net::NetKernel::new(None),
            clock_page: None,
            copy_mode: false,
            next_vpid: 2,
            track_ids: false,
            branch_next: 0,
            checkpoints: 0,
            ck_attempts: 0,
            branch_private_kb: 0,
            pending: std::collections::VecDeque::new(),
            in_branch: false,
            branch_results: Vec::new(),
            ended: false,
        }
    }

    pub fn new_space(&mut self) -> u64 {
        self.next_space += 1;
        self.next_space
    }

    /// Start the guest and run it to the end. Returns (exit code, summary).
    pub fn run(mut self) -> std::io::Result<(i32, Summary)> {
        let fast_stat = self.cfg.fast_stat && self.cfg.fast_time && self.cfg.fs_virtual;
        let bpf = crate::filter::build(
            self.cfg.fs_virtual,
            !self.cfg.net_host,
            !self.cfg.net_host && self.cfg.namespaces,
            fast_stat.then_some(detrun_shim::RAW_SYSCALL_END),
        )
        .map_err(std::io::Error::other)?;
        if let Some(path) = &self.cfg.trace {
            self.trace = Some(crate::trace::Trace::create(path)?);
        }
        if self.cfg.pin {
            pin_cpu(self.cfg.cpu);
        }
        let files = crate::vfiles::FilesDir::create(&self.cfg)?;
        self.cfg.files_dir = Some(files.path().to_path_buf());
        if self.cfg.fast_time {
            self.clock_page = crate::vdso::ClockPage::create(files.path(), &self.world.clock);
            if let (Some(p), true) = (&self.clock_page, fast_stat) {
                p.enable_stat(&self.fsv, self.cfg.py_real_times);
            }
        }
        let mut sp = crate::spawn::spawn(&self.cfg, &bpf)?;
        self.namespaces = sp.namespaces;
        if !sp.namespaces {
            self.stats
                .hazard("pids", "PID namespace not permitted: pids are real");
        }
        if self.cfg.net_host {
            self.stats.note(
                "network",
                "--net=host: AF_INET sockets use the host's network (each use is a hazard)",
            );
        }
        if !self.cpuid_faulting {
            self.stats.note("cpuid", crate::exec::NO_CPUID_FAULTING);
        }
        match sp.take_net_request() {
            // Made at the first need (netns.rs).
            Some(req) => self.late_net = Some(crate::netns::LateNet::new(req)),
            // No network namespace of its own: names unique to this run.
            None if !self.cfg.net_host => self.net = crate::net::NetKernel::new(Some(run_nonce())),
            None => {}
        }
        sys::seize(sp.guest, OPTIONS)?;
        self.track_ids = self.cfg.branch.as_ref().is_some_and(|b| b.checkpoint);
        let p = self.add_proc(sp.guest, None);
        self.main_proc = p;
        let vt = self.add_thread(sp.guest, p, 0);
        self.threads.get_mut(&sp.guest).expect("just added").resume = Resume::Cont(0);
        install_handlers();
        // After the fork: the reaper and the guest keep TSC reads as they are.
        let tsc_off = crate::selftime::enter();
        sp.release()?;
        // The guest runs its setup and execs: it holds the turn from the start.
        match self.world.next_turn() {
            Next::Run(t) if t == vt => {
                if let Some(tr) = self.trace.as_mut() {
                    tr.decision(self.world.decisions, 0, vt);
                }
            }
            other => {
                return Err(std::io::Error::other(format!(
                    "unexpected start: {other:?}"
                )))
            }
        }
        self.running = Some(sp.guest);
        self.mark_resume();
        let r = self.event_loop();
        self.drain_checkpoints();
        if tsc_off {
            crate::selftime::leave();
        }
        stop_alarm();
        if let Some(t) = self.trace.as_mut() {
            t.flush()?;
        }
        if let Some((path, policy)) = &self.cfg.record_schedule {
            let sc = crate::schedule::Schedule {
                seed: self.cfg.seed,
                policy: policy.clone(),
                turns: self.world.recorded.clone(),
            };
            std::fs::write(path, sc.render())?;
        }
        if let Some(at) = self.world.diverged {
            self.stats.hazard(
                "schedule-diverged",
                format!("the given schedule could not be followed from turn {at} on"),
            );
        }
        self.kill_all();
        self.net.leave();
        if let Some(rp) = sp.reaper {
            let mut st = 0;
            // SAFETY: reaping our own child.
            unsafe { libc::kill(rp, libc::SIGKILL) };
            unsafe { libc::waitpid(rp, &mut st, 0) };
        }
        r?;
        let mut code = self.exit_code();
        if let Some(plan) = &self.cfg.branch {
            if plan.checkpoint && self.checkpoints == 0 {
                eprintln!("detrun: no checkpoint was taken (the run ended first, or it could not be checkpointed: see the summary)");
            }
            if let Some(d) = &plan.out_dir {
                let j = serde_json::to_string_pretty(&self.branch_results)
                    .map_err(std::io::Error::other)?;
                std::fs::write(d.join("results.json"), j)?;
            }
        }
        let mut sum = self.stats.summary();
        sum.seed = self.cfg.seed;
        sum.virtual_ns = self.world.clock.elapsed();
        sum.wall_ms = self.start.elapsed().as_millis() as u64;
        sum.scheduling_decisions = self.world.decisions;
        sum.context_switches = self.world.switches;
        sum.namespaces = self.namespaces;
        if let Some(l) = &self.late_net {
            sum.net_namespace = l.made == Some(true);
            sum.net_joins = l.joins;
        }
        sum.deadlock = self.deadlock.clone();
        // SAFETY: getrusage into a local struct.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } == 0 {
            sum.supervisor_max_rss_kb = ru.ru_maxrss as u64;
        }
        sum.supervisor_allocs = crate::alloc::count();
        if self.world.net.active() {
            let n = &self.world.net.stats;
            sum.network = Some(crate::summary::NetSummary {
                connections: n.connections,
                refused: n.refused,
                datagrams: n.datagrams,
                dropped_loss: n.dropped_loss,
                dropped_partition: n.dropped_partition,
                undeliverable: n.dropped_no_receiver,
                retransmits: n.retransmits,
                held_by_partition: n.held_by_partition,
                resets: n.resets,
                external: n.external.iter().map(|a| a.to_string()).collect(),
            });
        }
        if self.cfg.strict && code == 0 && !sum.hazards.is_empty() {
            code = EXIT_HAZARD;
        }
        sum.exit_code = code;
        Ok((code, sum))
    }

    pub fn add_proc(&mut self, tgid: pid_t, parent: Option<ProcId>) -> ProcId {
        let id = self.world.add_process();
        let space = self.new_space();
        let pidfd = sys::pidfd_open(tgid).unwrap_or(-1);
        let (vpid, vpgid, vsid) = if self.track_ids && !self.copy_mode {
            crate::handlers::process::ns_ids(tgid).unwrap_or((tgid, tgid, tgid))
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
        let vtid = if self.track_ids && !self.copy_mode {
            // A new process's first thread: add_proc just read its id.
            let pi = &self.procs[proc as usize];
            let v = if pi.tgid == tid && pi.vpid != 0 {
                pi.vpid
            } else {
                crate::handlers::process::ns_id(tid)
            };
            self.next_vpid = self.next_vpid.max(v + 1);
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
                io_restore: Vec::new(),
                again: false,
                vtid,
                nstid: vtid,
            },
        );
        self.stats.threads += 1;
        vt
    }

    fn event_loop(&mut self) -> std::io::Result<()> {
        loop {
            if self.shutting_down && self.threads.is_empty() {
                return Ok(());
            }
            if self.running.is_none() && !self.shutting_down {
                if !self.schedule() {
                    return Ok(());
                }
                continue;
            }
            match sys::wait_any(0) {
                Ok((tid, st)) => self.on_stop(tid, st),
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => self.on_interrupt(),
                Err(e) if e.raw_os_error() == Some(libc::ECHILD) => return Ok(()),
                Err(e) => return Err(e),
            }
        }
    }

    /// Hand the turn on. Returns false when the run is over.
    fn schedule(&mut self) -> bool {
        if self.ended {
            return false;
        }
        if self.branch_due() && !self.at_branch_point() {
            return false;
        }
        self.pump_net();
        self.check_io();
        match self.world.next_turn() {
            Next::Run(vt) => {
                let tid = self.vt_tid[vt as usize];
                if let Some(t) = self.trace.as_mut() {
                    t.decision(self.world.decisions, self.world.clock.elapsed(), vt);
                }
                self.give_turn(tid);
                true
            }
            Next::Deliver(ds) => {
                self.deliver_timers(ds);
                true
            }
            Next::Net => true,
            Next::Idle => self.idle(),
            Next::Done => false,
        }
    }

    /// Move the virtual network's data (deterministic: only at stops).
    pub fn pump_net(&mut self) {
        let now = self.world.clock.monotonic();
        self.net.pump(&mut self.world.net, now);
    }

    /// Nothing runnable and no timer: wait for the outside world, or report
    /// a deadlock.
    fn idle(&mut self) -> bool {
        let parked = self.world.parked(|w| w == Wait::Io);
        let mut fds: Vec<libc::pollfd> = Vec::new();
        let mut kernel = false;
        for &vt in &parked {
            let tid = self.vt_tid[vt as usize];
            if let Some(t) = self.threads.get(&tid) {
                if t.park == Some(Park::Kernel) {
                    kernel = true;
                }
                for (f, ev) in &t.io {
                    use std::os::fd::AsRawFd;
                    fds.push(libc::pollfd {
                        fd: f.as_raw_fd(),
                        events: *ev,
                        revents: 0,
                    });
                }
            }
        }
        if kernel || !self.in_kernel.is_empty() {
            // A thread blocked in the kernel will report when its call ends.
            match sys::wait_any(0) {
                Ok((tid, st)) => self.on_stop(tid, st),
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {
                    if FORWARD_SIG.load(Ordering::SeqCst) != 0 {
                        self.forward_signal();
                    }
                }
                Err(_) => return false,
            }
            return true;
        }
        // Virtual sockets are fed only from inside: no one else can wake them.
        let internal = parked.iter().all(|&vt| {
            let tid = self.vt_tid[vt as usize];
            self.threads
                .get(&tid)
                .is_none_or(|t| t.io.iter().all(|(f, _)| self.net.internal(f)))
        });
        if fds.is_empty() || internal {
            self.report_deadlock();
            return false;
        }
        self.stats.hazard(
            "external-wait",
            "all threads waited on descriptors fed from outside the sandbox",
        );
        // SAFETY: polling our own descriptors; EINTR (the watchdog tick)
        // brings us back to handle forwarded signals.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
        if FORWARD_SIG.load(Ordering::SeqCst) != 0 {
            self.forward_signal();
        }
        true
    }

    fn report_deadlock(&mut self) {
        let mut lines = Vec::new();
        for t in self.threads.values() {
            if let Some(w) = self.world.waiting_on(t.vt) {
                let name = crate::sysnames::name(t.parked_nr).unwrap_or("?");
                let ns = crate::handlers::process::ns_id(t.tid);
                lines.push(format!(
                    "thread {} (pid {}): blocked in {} ({})",
                    ns,
                    self.procs[t.proc as usize].tgid_ns(),
                    name,
                    w.name()
                ));
            }
        }
        eprintln!("detrun: deadlock: every thread is blocked and nothing can wake them");
        for l in &lines {
            eprintln!("detrun:   {l}");
        }
        self.deadlock = Some(lines);
        self.kill_all();
    }

    /// Give the turn to `tid` and resume it as its state requires.
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

    fn give_turn(&mut self, tid: pid_t) {
        if self.cfg.backtrace_turn == Some(self.world.decisions) {
            // Where the thread stands as it gets the turn.
            let at = sys::get_regs(tid)
                .ok()
                .and_then(|r| crate::sysnames::name(r.orig_rax as i64))
                .unwrap_or("?");
            self.print_backtrace(tid, &format!("resumes in {at}"));
        }
        self.running = Some(tid);
        self.hold = Hold::Normal;
        self.mark_resume();
        self.kernel_retry = true;
        let Some(t) = self.threads.get_mut(&tid) else {
            self.running = None;
            return;
        };
        let vt = t.vt;
        let wake = self.world.take_wake(vt);
        let resume = match t.park.take() {
            Some(park) => {
                let r = self.complete_park(tid, park, wake.unwrap_or(WakeReason::Woken));
                match r {
                    Some(r) => r,
                    None => return, // parked again
                }
            }
            None => t.resume,
        };
        self.apply_resume(tid, resume);
    }

    /// Decide how a parked thread continues after `reason`. `None` means it
    /// parked again (and gave the turn back).
    fn complete_park(&mut self, tid: pid_t, park: Park, reason: WakeReason) -> Option<Resume> {
        let now = self.world.clock.monotonic();
        let t = self.threads.get_mut(&tid)?;
        t.io.clear();
        let mask = t.wait_mask.take();
        let r = match (park, reason) {
            (Park::Futex, WakeReason::Woken) => Resume::Return(0),
            (Park::Futex, WakeReason::Timeout) => Resume::Return(-(libc::ETIMEDOUT as i64)),
            (Park::Futex, WakeReason::Interrupted) => Resume::Return(-(libc::EINTR as i64)),
            (Park::Sleep { .. }, WakeReason::Timeout | WakeReason::Woken) => Resume::Return(0),
            (Park::Sleep { rem, deadline }, WakeReason::Interrupted) => {
                if rem != 0 {
                    let left = deadline.saturating_sub(now);
                    let _ = sys::write_pair(
                        tid,
                        rem,
                        (left / 1_000_000_000) as i64,
                        (left % 1_000_000_000) as i64,
                    );
                }
                Resume::Return(-(libc::EINTR as i64))
            }
            (Park::Exit, WakeReason::Interrupted) => Resume::Interrupt(512), // ERESTARTSYS
            (Park::Io, WakeReason::Interrupted) if t.wcont.is_some_and(|w| w.done > 0) => {
                // A blocking write interrupted after progress returns the count.
                let done = t.wcont.take().map_or(0, |w| w.done);
                Resume::Return(done as i64)
            }
            (Park::Exit, _) => Resume::Reissue,
            (Park::Io | Park::Poll | Park::Signal | Park::Retry, WakeReason::Interrupted) => {
                // Let the real call see the pending signal, if it still is.
                let st = sys::sig_state(tid);
                let m = mask.unwrap_or_else(|| st.map_or(0, |s| s.blocked));
                if st.is_some_and(|s| s.deliverable(m) != 0) {
                    Resume::PassReal
                } else {
                    Resume::Redo
                }
            }
            (Park::Poll, WakeReason::Timeout) => {
                crate::handlers::io::expire_poll(self, tid);
                Resume::PassReal
            }
            (Park::Signal, WakeReason::Timeout) => Resume::Return(-(libc::EAGAIN as i64)),
            (Park::Io | Park::Poll | Park::Signal | Park::Retry, _) => Resume::Redo,
            (Park::Vfork | Park::Kernel, _) => Resume::Cont(0),
        };
        Some(r)
    }

    pub fn apply_resume(&mut self, tid: pid_t, resume: Resume) {
        let at_exit = self.threads.get(&tid).is_some_and(|t| t.at_exit);
        let r = match resume {
            Resume::Initial => {
                // Thread start is a scheduling point (an event of its own),
                // where an instruction-level preemption may begin.
                if let Some(vt) = self.threads.get(&tid).map(|t| t.vt) {
                    self.world.tick(vt);
                }
                if let Some(t) = self.threads.get_mut(&tid) {
                    t.resume = Resume::Cont(0);
                }
                self.continue_running(tid);
                return;
            }
            Resume::Cont(sig) => self.cont(tid, sig),
            Resume::PassReal => self.cont(tid, 0),
            Resume::Syscall => self.resume_syscall(tid, 0),
            Resume::Redo => {
                self.on_syscall(tid, true);
                return;
            }
            Resume::Reissue => {
                let saved = self.threads.get_mut(&tid).and_then(|t| t.saved.take());
                match saved {
                    Some(mut r) => {
                        r.rip -= 2;
                        r.rax = r.orig_rax;
                        sys::set_regs(tid, &r).and_then(|_| self.cont(tid, 0))
                    }
                    None => self.cont(tid, 0),
                }
            }
            Resume::Return(v) => match sys::get_regs(tid) {
                Ok(mut r) => {
                    if !at_exit {
                        r.orig_rax = u64::MAX;
                    }
                    r.rax = v as u64;
                    sys::set_regs(tid, &r).and_then(|_| self.cont(tid, 0))
                }
                Err(e) => Err(e),
            },
            Resume::Interrupt(code) => {
                let saved = self.threads.get_mut(&tid).and_then(|t| t.saved.take());
                match saved {
                    Some(mut r) => {
                        r.rax = (-code) as u64;
                        sys::set_regs(tid, &r).and_then(|_| self.cont(tid, 0))
                    }
                    None => self.cont(tid, 0),
                }
            }
        };
        if let Some(t) = self.threads.get_mut(&tid) {
            t.at_exit = false;
            t.resume = Resume::Cont(0);
        }
        if r.is_err() {
            // The thread is gone (killed); its death event will follow.
        }
    }

    /// The running thread gives up the turn, staying runnable; it will
    /// continue with `resume`.
    pub fn yield_running(&mut self, tid: pid_t, resume: Resume) {
        if let Some(t) = self.threads.get_mut(&tid) {
            t.resume = resume;
            self.world.yield_turn(t.vt);
        }
        if self.running == Some(tid) {
            self.running = None;
        }
    }

    /// Park the running thread. It is stopped at a seccomp stop (or at an
    /// exit stop when `park == Park::Exit`).
    pub fn park(&mut self, tid: pid_t, park: Park, wait: Wait, deadline: Option<u64>, nr: i64) {
        // A wait with its own signal mask may unblock a signal that is
        // already pending: then the real call returns at once.
        if let Some(mask) = self.threads.get(&tid).and_then(|t| t.wait_mask) {
            if sys::sig_state(tid).is_some_and(|s| s.deliverable(mask) != 0) {
                if let Some(t) = self.threads.get_mut(&tid) {
                    t.wait_mask = None;
                    t.io.clear();
                }
                self.continue_running(tid);
                return;
            }
        }
        if let Some(t) = self.threads.get_mut(&tid) {
            t.park = Some(park);
            t.parked_nr = nr;
            self.world.block(t.vt, wait, deadline);
        }
        if self.running == Some(tid) {
            self.running = None;
        }
    }

    /// Continue the running thread, or hand the turn on if it used its quantum.
    pub fn continue_running(&mut self, tid: pid_t) {
        if self.world.timers_due() {
            let ds = self.world.fire_due();
            self.deliver_timers(ds);
        }
        if self.running != Some(tid) {
            return;
        }
        if let Some(p) = self.world.take_insn_preemption() {
            self.step_preempt(tid, p);
            return;
        }
        if let Err(_e) = self.cont(tid, 0) {
            // Died under us; the death event follows.
        }
    }

    /// Wait for the next stop of `tid` (retrying EINTR).
    fn mark_resume(&mut self) {
        self.resumed_at = Mark {
            seq: self.resumed_at.seq + 1,
            tick: ALARMS.load(Ordering::Relaxed) as u64,
        };
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
    fn wait_stop(&mut self, tid: pid_t) -> Option<i32> {
        let st = Self::wait_tid(tid);
        self.absorb_clock();
        st
    }

    pub(crate) fn wait_tid(tid: pid_t) -> Option<i32> {
        loop {
            match sys::wait_pid(tid, 0) {
                Ok((_, st)) => return Some(st),
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(_) => return None,
            }
        }
    }

    /// One stop during an instruction-level point: what to do with it.
    /// Returns None to keep going, or how the point ends.
    fn point_stop(&mut self, tid: pid_t, st: i32, trap_ok: bool) -> Option<PointEnd> {
        if !libc::WIFSTOPPED(st) {
            self.on_stop(tid, st); // it died
            return Some(PointEnd::Gone);
        }
        let sig = libc::WSTOPSIG(st);
        let event = (st >> 16) & 0xffff;
        if sig == libc::SIGTRAP && event == libc::PTRACE_EVENT_SECCOMP {
            // Reached a syscall first: preempt at its entry.
            if let Ok(r) = sys::get_regs(tid) {
                self.stats.count(r.orig_rax as i64);
            }
            return Some(PointEnd::At(Resume::Redo));
        }
        if sig == libc::SIGTRAP && event == 0 && trap_ok {
            return None;
        }
        if sig == libc::SIGSEGV && crate::handlers::misc::emulate_fault(self, tid) {
            return None;
        }
        if event == 0 {
            // A real signal: deliver it when the thread runs again.
            return Some(PointEnd::At(Resume::Cont(sig)));
        }
        self.on_stop(tid, st);
        Some(PointEnd::Gone)
    }

    /// An instruction-level preemption point: single-step the running
    /// thread `p.steps` instructions, then (breakpoint variant) wait for
    /// `p.hits` executions of the instruction reached, by an int3 there;
    /// stop early at a syscall or a signal; give up the turn there. A pure
    /// function of the thread's own execution, so replays land on the same
    /// instruction.
    fn step_preempt(&mut self, tid: pid_t, p: detrun_scheduler::InsnPoint) {
        let Some(vt) = self.threads.get(&tid).map(|t| t.vt) else {
            return;
        };
        let mut done = 0u32;
        let mut hits = 0u32;
        let mut resume = Resume::Cont(0);
        let mut ended = false;
        // Never stop inside detrun's code in the tracee (it updates the
        // shared clock and tables, and an int3 there would reach every
        // process mapping it): step on until out, the same steps every run.
        while done < p.steps || (done < p.steps.saturating_add(100_000) && self.in_shim(tid)) {
            if self.step(tid).is_err() {
                return;
            }
            let Some(st) = self.wait_stop(tid) else {
                return;
            };
            match self.point_stop(tid, st, true) {
                None => {
                    // An emulated rdtsc/cpuid also counts as one instruction.
                    done += 1;
                    self.stats.single_steps += 1;
                    if done == p.steps + 1 {
                        self.stats.insn_points_moved += 1;
                    }
                }
                Some(PointEnd::Gone) => return,
                Some(PointEnd::At(r)) => {
                    resume = r;
                    ended = true;
                    break;
                }
            }
        }
        if !ended && p.hits > 0 {
            match self.breakpoint_hits(tid, p.hits) {
                Ok((n, r)) => {
                    hits = n;
                    resume = r;
                }
                Err(()) => return,
            }
        }
        self.stats.insn_preemptions += 1;
        self.world.insn_preempted(vt, done, hits);
        let t = self.world.clock.elapsed();
        if let Some(tr) = self.trace.as_mut() {
            tr.insn_preemption(t, vt, done, hits);
        }
        self.yield_running(tid, resume);
    }

    /// Is the coarse clock still at or before the start's fine reading?
    /// Once past, it stays past (checked until then only).
    pub fn world_start_open(&self) -> bool {
        if self.start_closed.get() {
            return false;
        }
        let open = now_ns(libc::CLOCK_REALTIME_COARSE) < self.fsv.real_start;
        if !open {
            self.start_closed.set(true);
        }
        open
    }

    /// Is `tid` executing detrun's code (the shared file's code or a stat
    /// site stub)?
    fn in_shim(&self, tid: pid_t) -> bool {
        let (Ok(r), Some(t)) = (sys::get_regs(tid), self.threads.get(&tid)) else {
            return false;
        };
        self.procs[t.proc as usize].patch.is_ours(r.rip)
    }

    /// Let `tid` run until the instruction at its current address has
    /// executed `want` times (counting this one), with an int3 there.
    /// Returns (executions seen, how to resume); the thread is left at the
    /// instruction, unexecuted, with the original byte back.
    fn breakpoint_hits(&mut self, tid: pid_t, want: u32) -> Result<(u32, Resume), ()> {
        let Ok(r) = sys::get_regs(tid) else {
            return Err(());
        };
        let addr = r.rip;
        let mut orig = [0u8; 1];
        if sys::read_mem(tid, addr, &mut orig).is_err() {
            return Ok((0, Resume::Cont(0)));
        }
        let arm = |on: bool| sys::write_mem(tid, addr, if on { &[0xCC] } else { &orig }).is_ok();
        let mut seen = 0u32;
        loop {
            if !arm(true) || self.cont(tid, 0).is_err() {
                arm(false);
                return Err(());
            }
            let Some(st) = self.wait_stop(tid) else {
                return Err(());
            };
            arm(false);
            let at_bp = libc::WIFSTOPPED(st)
                && libc::WSTOPSIG(st) == libc::SIGTRAP
                && (st >> 16) == 0
                && sys::get_regs(tid).is_ok_and(|r| r.rip == addr + 1);
            if !at_bp {
                return match self.point_stop(tid, st, false) {
                    None => {
                        // An emulated fault: keep counting from where it is.
                        continue;
                    }
                    Some(PointEnd::Gone) => Err(()),
                    Some(PointEnd::At(r)) => Ok((seen, r)),
                };
            }
            seen += 1;
            self.stats.breakpoint_hits += 1;
            // Back to the instruction, which has not run yet.
            if let Ok(mut r) = sys::get_regs(tid) {
                r.rip = addr;
                let _ = sys::set_regs(tid, &r);
            }
            if seen >= want {
                return Ok((seen, Resume::Cont(0)));
            }
            // Execute it once without the breakpoint, then re-arm.
            if self.step(tid).is_err() {
                return Err(());
            }
            let Some(st) = self.wait_stop(tid) else {
                return Err(());
            };
            if let Some(end) = self.point_stop(tid, st, true) {
                return match end {
                    PointEnd::Gone => Err(()),
                    PointEnd::At(r) => Ok((seen, r)),
                };
            }
        }
    }

    /// Wake parked threads whose descriptors became ready.
    fn check_io(&mut self) {
        // Reused vectors: this runs at every stop while a thread waits.
        let mut parked = std::mem::take(&mut self.scratch_tids);
        let mut fds = std::mem::take(&mut self.scratch_pollfds);
        self.world.parked_into(|w| w == Wait::Io, &mut parked);
        for &vt in &parked {
            let tid = self.vt_tid[vt as usize];
            let Some(t) = self.threads.get(&tid) else {
                continue;
            };
            if t.park == Some(Park::Kernel) {
                continue;
            }
            if t.park == Some(Park::Retry) || (t.io.is_empty() && t.park == Some(Park::Exit)) {
                if self.kernel_retry {
                    self.world.wake(vt, WakeReason::Woken);
                }
                continue;
            }
            if t.io.is_empty() {
                continue;
            }
            use std::os::fd::AsRawFd;
            fds.clear();
            fds.extend(t.io.iter().map(|(f, ev)| libc::pollfd {
                fd: f.as_raw_fd(),
                events: *ev,
                revents: 0,
            }));
            // SAFETY: polling our own stolen descriptors without blocking.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 0) };
            if n > 0 {
                self.world.wake(vt, WakeReason::Woken);
            }
        }
        self.scratch_tids = parked;
        self.scratch_pollfds = fds;
        self.kernel_retry = false;
    }

    /// Send the signals of expired timers and wake the waiters they interrupt.
    pub fn deliver_timers(&mut self, ds: Vec<detrun_scheduler::Delivery>) {
        for d in ds {
            let p = d.proc as usize;
            if !self.procs.get(p).is_some_and(|x| x.alive) {
                continue;
            }
            let tgid = self.procs[p].tgid;
            let code = if d.timer >= 0 { -2 } else { -6 }; // SI_TIMER, SI_TKILL
            let target = match d.spec.target {
                detrun_scheduler::SigTarget::Thread(vt) if self.world.is_alive(vt) => {
                    self.vt_tid[vt as usize]
                }
                _ => {
                    // Process-directed: the main thread if alive, else the first.
                    let ths = self.world.threads_of(d.proc);
                    match ths.iter().find(|&&v| self.world.is_alive(v)) {
                        Some(&v) => self.vt_tid[v as usize],
                        None => continue,
                    }
                }
            };
            let r = if d.timer >= 0 {
                sys::tgsigqueue(tgid, target, d.spec.signal, code, d.spec.value)
            } else {
                sys::tgkill(tgid, target, d.spec.signal)
            };
            if r.is_ok() {
                self.stats.signals += 1;
            }
            self.check_signals(Some(d.proc));
        }
    }

    /// Wake parked threads (of `proc`, or of every process) that have a
    /// deliverable signal pending.
    pub fn check_signals(&mut self, proc: Option<ProcId>) {
        let parked = self.world.parked(|w| w != Wait::Vfork);
        for vt in parked {
            let tid = self.vt_tid[vt as usize];
            let Some(t) = self.threads.get(&tid) else {
                continue;
            };
            if proc.is_some_and(|p| p != t.proc) {
                continue;
            }
            let Some(st) = sys::sig_state(tid) else {
                continue;
            };
            let mask = t.wait_mask.unwrap_or(st.blocked);
            if st.deliverable(mask) != 0 {
                self.world.wake(vt, WakeReason::Interrupted);
            }
        }
    }

    fn on_interrupt(&mut self) {
        if FORWARD_SIG.load(Ordering::SeqCst) != 0 {
            self.forward_signal();
        }
        self.watchdog();
    }

    fn forward_signal(&mut self) {
        let sig = FORWARD_SIG.swap(0, Ordering::SeqCst);
        let code = FORWARD_CODE.load(Ordering::SeqCst);
        if sig == 0 {
            return;
        }
        self.stats.hazard(
            "external-signal",
            format!("signal {sig} from outside the sandbox"),
        );
        let main = &self.procs[self.main_proc as usize];
        // From a terminal (SI_KERNEL) the guest's process group got it too.
        if main.alive && code != 0x80 {
            // SAFETY: signalling our own tracee.
            unsafe { libc::kill(main.tgid, sig) };
        }
        self.check_signals(None);
    }

    /// A running thread that makes no stop for a while is either spinning in
    /// user space (preempt it if someone else could run) or blocked in the
    /// kernel in a call the filter let through (interrupt and park it).
    fn watchdog(&mut self) {
        let Some(tid) = self.running else { return };
        if self.hold != Hold::Normal || self.shutting_down {
            return;
        }
        let ticks = (ALARMS.load(Ordering::Relaxed) as u64).wrapping_sub(self.resumed_at.tick);
        if ticks < self.cfg.watchdog_ms.div_ceil(ALARM_MS).max(1) {
            return;
        }
        let state = proc_state(tid);
        let others = self
            .threads
            .values()
            .any(|t| t.tid != tid && self.world.is_runnable(t.vt));
        // Wall time alone misfires on a loaded machine (the thread may just
        // not be on a CPU): it must also have used the threshold in CPU time
        // since the first look.
        let spinning = state == Some('R') && {
            let cpu = thread_cpu_ns(tid);
            match self.watch_sample {
                Some((t, at, c0)) if t == tid && at == self.resumed_at => {
                    cpu.saturating_sub(c0) >= self.cfg.watchdog_ms * 1_000_000
                }
                _ => {
                    self.watch_sample = Some((tid, self.resumed_at, cpu));
                    false
                }
            }
        };
        match state {
            Some('R')
                if spinning
                    && (others || self.world.next_deadline().is_some())
                    && sys::interrupt(tid).is_ok() =>
            {
                self.mark_resume();
                self.stats.hazard(
                    "watchdog-preemption",
                    "a thread ran without syscalls and was preempted on CPU time (timing-dependent)",
                );
            }
            // Blocked in a call the filter let through: see on_event_stop.
            Some('S') | Some('D') if sys::interrupt(tid).is_ok() => {
                self.mark_resume();
            }
            _ => {}
        }
    }

    fn on_stop(&mut self, tid: pid_t, st: i32) {
        self.absorb_clock();
        if self.cfg.debug {
            eprintln!(
                "[detrun] stop tid={tid} status={st:#x} running={:?}",
                self.running
            );
        }
        if self.running == Some(tid) {
            // The watchdog measures time since the running thread's last stop.
            self.mark_resume();
        }
        if libc::WIFEXITED(st) || libc::WIFSIGNALED(st) {
            self.on_death(tid, st);
            return;
        }
        if !libc::WIFSTOPPED(st) {
            return;
        }
        if !self.threads.contains_key(&tid) {
            self.early.insert(tid, st);
            return;
        }
        let sig = libc::WSTOPSIG(st);
        let event = (st >> 16) & 0xffff;
        match (sig, event) {
            (libc::SIGTRAP, libc::PTRACE_EVENT_SECCOMP) if self.in_kernel.contains_key(&tid) => {
                // The restart of a call already handled, left to block in
                // the kernel: let it run to its exit stop.
                let _ = self.resume_syscall(tid, 0);
            }
            (libc::SIGTRAP, libc::PTRACE_EVENT_SECCOMP) => {
                if let Some(t) = self.threads.get_mut(&tid) {
                    t.at_exit = false;
                }
                self.on_syscall(tid, false)
            }
            (s, 0) if s == libc::SIGTRAP | 0x80 && self.in_kernel.contains_key(&tid) => {
                self.kernel_syscall_stop(tid)
            }
            (s, 0) if s == libc::SIGTRAP | 0x80 => {
                if let Some(t) = self.threads.get_mut(&tid) {
                    t.at_exit = true;
                }
                crate::handlers::on_syscall_exit(self, tid)
            }
            (
                libc::SIGTRAP,
                libc::PTRACE_EVENT_CLONE | libc::PTRACE_EVENT_FORK | libc::PTRACE_EVENT_VFORK,
            ) => crate::handlers::process::on_clone_event(self, tid, event),
            (libc::SIGTRAP, libc::PTRACE_EVENT_EXEC) => crate::exec::on_exec(self, tid),
            (libc::SIGTRAP, libc::PTRACE_EVENT_EXIT) => self.on_exit_event(tid),
            (libc::SIGTRAP, libc::PTRACE_EVENT_VFORK_DONE) => self.on_vfork_done(tid),
            (_, sys::PTRACE_EVENT_STOP) => self.on_event_stop(tid, sig),
            (sig, _) => crate::handlers::signal::on_signal(self, tid, sig),
        }
    }

    /// A syscall stop of a thread left blocking in the kernel: the entry of
    /// the restarted call (let it block again) or its exit (it may run).
    fn kernel_syscall_stop(&mut self, tid: pid_t) {
        let entry = sys::syscall_op(tid) == Some(1);
        if entry {
            let _ = self.resume_syscall(tid, 0);
            return;
        }
        self.in_kernel.remove(&tid);
        if let Some(t) = self.threads.get_mut(&tid) {
            t.park = None;
            t.resume = Resume::Cont(0);
            let vt = t.vt;
            self.world.wake(vt, WakeReason::Woken);
        }
    }

    /// PTRACE_EVENT_STOP: a group-stop (ignored: job control is not
    /// virtualized) or our own PTRACE_INTERRUPT.
    fn on_event_stop(&mut self, tid: pid_t, sig: i32) {
        if matches!(
            sig,
            libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU
        ) && self.running != Some(tid)
        {
            let _ = self.cont(tid, 0);
            return;
        }
        if self.running != Some(tid) {
            let _ = self.cont(tid, 0);
            return;
        }
        // The watchdog interrupted the running thread.
        let state_kernel = crate::handlers::process::was_in_syscall(tid);
        if state_kernel {
            // Let it wait in the kernel without the turn; it stops again at
            // the exit of the restarted call.
            let nr = sys::get_regs(tid).map(|r| r.orig_rax as i64).unwrap_or(-1);
            let name = crate::sysnames::name(nr).unwrap_or("?");
            self.stats.hazard(
                "blocked-in-kernel",
                format!("{name} blocked in the kernel; other threads ran meanwhile"),
            );
            self.park(tid, Park::Kernel, Wait::Io, None, nr);
            self.in_kernel.insert(tid, false);
            let _ = self.resume_syscall(tid, 0);
        } else {
            self.yield_running(tid, Resume::Cont(0));
            // Nobody else could run: the spinner used up the time until the
            // next timer (that is what it was waiting for, most likely).
            let others = self
                .threads
                .values()
                .any(|t| self.world.is_runnable(t.vt) && t.tid != tid);
            if !others {
                if let Some(d) = self.world.next_deadline() {
                    self.world.clock.advance_to(d);
                    let ds = self.world.fire_due();
                    self.deliver_timers(ds);
                }
            }
        }
    }

    fn on_syscall(&mut self, tid: pid_t, redo: bool) {
        let Ok(regs) = sys::get_regs(tid) else { return };
        if self.copy_mode && crate::handlers::vpid::invisible(self, tid, &regs) {
            return;
        }
        if regs.rip == detrun_shim::QUIET_SYSCALL_END
            && crate::handlers::fs::quiet(self, tid, &regs)
        {
            return;
        }
        if crate::netns::before_call(self, tid, &regs) {
            return;
        }
        let Some(t) = self.threads.get_mut(&tid) else {
            return;
        };
        let redo = redo || std::mem::take(&mut t.again);
        let vt = t.vt;
        let expired = self.world.tick(vt);
        if let Some(limit) = self.cfg.virtual_timeout_ns {
            if self.world.clock.elapsed() > limit && !self.timed_out {
                self.timed_out = true;
                eprintln!(
                    "detrun: virtual timeout: the run passed {} s of virtual time",
                    limit / 1_000_000_000
                );
                self.kill_all();
                return;
            }
        }
        if !redo && expired {
            self.yield_running(tid, Resume::Redo);
            return;
        }
        if !redo {
            self.stats.count(regs.orig_rax as i64);
            if let Some(t) = self.threads.get_mut(&tid) {
                t.wcont = None;
            }
        }
        if self.cfg.debug {
            let n = crate::sysnames::name(regs.orig_rax as i64).unwrap_or("?");
            eprintln!(
                "[detrun]   {tid} {n}({:#x}, {:#x}, {:#x}) redo={redo}",
                regs.rdi, regs.rsi, regs.rdx
            );
        }
        crate::handlers::dispatch(self, tid, regs);
    }

    fn on_exit_event(&mut self, tid: pid_t) {
        let Some(t) = self.threads.get(&tid) else {
            let _ = self.cont(tid, 0);
            return;
        };
        let p = t.proc;
        if self.running == Some(tid) {
            let status = sys::event_msg(tid).unwrap_or(0) as i32;
            let pi = &self.procs[p as usize];
            let live = self
                .world
                .threads_of(p)
                .iter()
                .filter(|&&v| self.world.is_alive(v))
                .count();
            let group = pi.group_exit || libc::WIFSIGNALED(status) || live <= 1;
            if group && self.copy_mode {
                // What this copy cost: the pages it no longer shares with
                // the checkpoint (and new ones), read before they go.
                self.branch_private_kb += private_dirty_kb(pi.tgid);
            }
            if group {
                self.procs[p as usize].group_exit = true;
                self.hold = Hold::UntilProcDeath(p);
            } else if tid != pi.tgid {
                self.hold = Hold::UntilThreadDeath(tid);
            } else {
                // The leader left with pthread_exit; its siblings go on.
                let vt = t.vt;
                self.world.exit_thread(vt);
                self.running = None;
            }
        }
        let _ = self.cont(tid, 0);
    }

    fn on_vfork_done(&mut self, tid: pid_t) {
        if let Some(t) = self.threads.get_mut(&tid) {
            t.park = None;
            // Copy mode rewrites vfork's return value at its exit stop.
            t.resume = if matches!(t.post, Post::SetRet { .. }) {
                Resume::Syscall
            } else {
                Resume::Cont(0)
            };
            let vt = t.vt;
            self.world.wake(vt, WakeReason::Woken);
            let _ = self.world.take_wake(vt);
        }
    }

    /// Wait until the vfork parent of `child_proc` reports its release.
    pub fn release_vfork_parent(&mut self, child_proc: ProcId) {
        let Some(ptid) = self.procs[child_proc as usize].vfork_parent.take() else {
            return;
        };
        if self.threads.get(&ptid).and_then(|t| t.park) != Some(Park::Vfork) {
            return; // its VFORK_DONE stop was already taken
        }
        loop {
            match sys::wait_pid(ptid, 0) {
                Ok((_, st)) => {
                    let ev = (st >> 16) & 0xffff;
                    if libc::WIFSTOPPED(st) && ev == libc::PTRACE_EVENT_VFORK_DONE {
                        self.on_vfork_done(ptid);
                        return;
                    }
                    self.on_stop(ptid, st);
                    if !self.threads.contains_key(&ptid) {
                        return;
                    }
                }
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(_) => return,
            }
        }
    }

    /// Take a stop that arrived before its thread was known.
    pub fn early_take(&mut self, tid: pid_t) -> Option<i32> {
        self.early.remove(&tid)
    }

    pub fn death(&mut self, tid: pid_t, st: i32) {
        self.on_death(tid, st);
    }

    fn on_death(&mut self, tid: pid_t, st: i32) {
        self.early.remove(&tid);
        self.in_kernel.remove(&tid);
        let Some(t) = self.threads.remove(&tid) else {
            return;
        };
        let p = t.proc;
        self.world.exit_thread(t.vt);
        if t.clear_tid != 0 {
            let live = self
                .world
                .threads_of(p)
                .iter()
                .any(|&v| self.world.is_alive(v));
            if live {
                let key = detrun_scheduler::FutexKey {
                    space: self.procs[p as usize].space,
                    addr: t.clear_tid,
                };
                self.world.futex_wake(key, 1, u32::MAX);
            }
        }
        let leader = tid == self.procs[p as usize].tgid;
        if leader {
            self.process_dead(p, st);
        }
        let release = match self.hold {
            Hold::UntilThreadDeath(x) => x == tid,
            Hold::UntilProcDeath(x) => x == p && leader,
            Hold::Normal => self.running == Some(tid),
        };
        if release && self.running.is_some() {
            self.running = None;
            self.hold = Hold::Normal;
        }
    }

    fn process_dead(&mut self, p: ProcId, st: i32) {
        let pi = &mut self.procs[p as usize];
        pi.alive = false;
        pi.status = Some(st);
        if self.copy_mode {
            self.virtual_death(p);
        }
        let pi = &mut self.procs[p as usize];
        if pi.pidfd >= 0 {
            // SAFETY: closing our own pidfd.
            unsafe { libc::close(pi.pidfd) };
            pi.pidfd = -1;
        }
        // Threads of the process that never reported are gone too.
        for &vt in self.world.threads_of(p).to_vec().iter() {
            if self.world.is_alive(vt) {
                self.world.exit_thread(vt);
            }
        }
        self.release_vfork_parent(p);
        if p == self.main_proc {
            self.main_status = Some(st);
            if !self.threads.is_empty() {
                self.shutting_down = true;
                self.kill_all();
            }
        }
        self.wake_child_waiters();
        let parent = self.procs[p as usize].parent;
        if let Some(pp) = parent {
            self.check_signals(Some(pp));
        }
    }

    /// Copy mode: what the kernel would have done for the guest parent.
    fn virtual_death(&mut self, p: ProcId) {
        // Orphans go to init, which reaps them.
        for c in self.procs.iter_mut() {
            if c.parent == Some(p) {
                c.parent = None;
                if c.status.is_some() {
                    c.reaped = true;
                }
            }
        }
        let pi = &self.procs[p as usize];
        match pi.parent {
            Some(pp) if self.procs[pp as usize].alive => {
                // A parent that ignores SIGCHLD has its children reaped at once.
                let ignores = sys::sig_state(self.procs[pp as usize].tgid)
                    .is_some_and(|s| s.ignored & (1 << (libc::SIGCHLD - 1)) != 0);
                if ignores && pi.exit_signal == libc::SIGCHLD {
                    self.procs[p as usize].reaped = true;
                    return;
                }
                if !pi.notify_kernel && pi.exit_signal > 0 {
                    let st = pi.status.unwrap_or(0);
                    let info = crate::handlers::vpid::chld_fields(pi.vpid, st);
                    let (tg, sig) = (self.procs[pp as usize].tgid, pi.exit_signal);
                    // A pending SIGCHLD keeps the first one's siginfo.
                    let parent = &mut self.procs[pp as usize];
                    parent.chld_info = parent.chld_info.or(Some(info));
                    // SAFETY: signalling our own tracee.
                    unsafe { libc::kill(tg, sig) };
                }
            }
            _ => self.procs[p as usize].reaped = true,
        }
    }

    /// Is a branch point (or checkpoint) reached?
    fn branch_due(&self) -> bool {
        let Some(plan) = self.cfg.branch.as_ref() else {
            return false;
        };
        if self.in_branch || self.threads.is_empty() {
            return false;
        }
        let at = match plan.every {
            Some(e) => {
                crate::checkpoint::BranchAt::Time(e.saturating_mul(self.branch_next as u64 + 1))
            }
            None => match plan.at.get(self.branch_next) {
                Some(&a) => a,
                None => return false,
            },
        };
        at.reached(self.world.clock.elapsed(), self.world.decisions)
    }

    /// At a branch point: branch in place, or checkpoint and run the
    /// branches from it. False: the run is over.
    fn at_branch_point(&mut self) -> bool {
        let Some(plan) = self.cfg.branch.clone() else {
            return true;
        };
        if !plan.checkpoint {
            self.branch_next += 1;
            if let Some(Some(seed)) = plan.seeds.first() {
                self.world.branch(*seed);
            }
            return true;
        }
        let index = self.checkpoints;
        let ck = match self.take_checkpoint(index) {
            Ok(ck) => ck,
            Err(why) => {
                // Try again at the next scheduling points, for a while. A
                // later point than asked is not the point a branch from
                // scratch takes: say so.
                if self.ck_attempts == 0 {
                    self.stats.hazard(
                        "checkpoint-deferred",
                        format!("a checkpoint was taken later than asked: {why}"),
                    );
                }
                self.ck_attempts += 1;
                if self.ck_attempts == 1 || self.cfg.verbose {
                    eprintln!("detrun: checkpoint deferred: {why}");
                }
                if self.ck_attempts >= 1000 {
                    self.ck_attempts = 0;
                    self.branch_next += 1;
                    eprintln!("detrun: checkpoint skipped: {why}");
                }
                return true;
            }
        };
        self.ck_attempts = 0;
        // The point asked for: with `every`, the last multiple passed (a
        // sleep may jump over several; this is the first point after each).
        let requested = match plan.every {
            Some(e) => {
                let n = (ck.at_ns / e).max(1);
                self.branch_next = n as usize;
                e * n
            }
            None => {
                self.branch_next += 1;
                match plan.at.get(index) {
                    Some(crate::checkpoint::BranchAt::Time(t)) => *t,
                    _ => ck.at_ns,
                }
            }
        };
        self.checkpoints += 1;
        if plan.continue_base {
            // Up to `max_alive` checkpoints wait for their branches while
            // the run goes on; the oldest runs its branches first.
            while self.pending.len() >= plan.max_alive.max(1) {
                if let Some((old, req)) = self.pending.pop_front() {
                    self.branches_of(old, req, &plan);
                }
            }
            self.in_branch = false;
            let r = self.instantiate(&ck, None, None);
            self.pending.push_back((ck, requested));
            if let Err(e) = r {
                eprintln!("detrun: cannot resume the run after checkpoint {index}: {e}");
                self.ended = true;
                return false;
            }
            self.publish_clock();
            true
        } else {
            self.branches_of(ck, requested, &plan);
            self.ended = true;
            false
        }
    }

    /// Run every branch of `ck`, then let the checkpoint go.
    fn branches_of(
        &mut self,
        ck: crate::checkpoint::Checkpoint,
        requested: u64,
        plan: &crate::config::BranchPlan,
    ) {
        for seed in &plan.seeds {
            self.run_branch(&ck, *seed, plan, requested);
        }
        self.release_checkpoint(ck);
    }

    /// At the end of the run: the branches of checkpoints still waiting,
    /// with the run's own outcome kept.
    fn drain_checkpoints(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let Some(plan) = self.cfg.branch.clone() else {
            return;
        };
        let world = self.world.clone();
        let stats = self.stats.clone();
        let (main_status, deadlock, timed_out) =
            (self.main_status, self.deadlock.take(), self.timed_out);
        let trace = self.trace.take();
        while let Some((ck, req)) = self.pending.pop_front() {
            self.branches_of(ck, req, &plan);
        }
        self.world = world;
        self.stats = stats;
        self.main_status = main_status;
        self.deadlock = deadlock;
        self.timed_out = timed_out;
        self.trace = trace;
    }

    /// Run one branch from `ck` to its end; its result goes to
    /// `branch_results` (and its outputs to the plan's directory).
    fn run_branch(
        &mut self,
        ck: &crate::checkpoint::Checkpoint,
        seed: Option<u64>,
        plan: &crate::config::BranchPlan,
        requested_ns: u64,
    ) {
        let started = Instant::now();
        let name = format!(
            "c{}-b{}",
            ck.index,
            seed.map_or("base".into(), |s| s.to_string())
        );
        let files = plan
            .out_dir
            .as_ref()
            .map(|d| [d.join(format!("{name}.out")), d.join(format!("{name}.err"))]);
        let trace = match (&plan.out_dir, &self.cfg.trace) {
            (Some(d), Some(_)) => Some(d.join(format!("{name}.trace"))),
            _ => None,
        };
        let capture = if self.cfg.capture_branches {
            files.clone()
        } else {
            None
        };
        let base_trace = self.trace.take();
        self.in_branch = true;
        let r = self.instantiate(ck, capture, trace.as_deref());
        let (code, error) = match r {
            Ok(()) => {
                if let Some(s) = seed {
                    self.world.branch(s);
                }
                self.publish_clock();
                let r = self.event_loop();
                self.kill_all();
                if let Some(t) = self.trace.as_mut() {
                    let _ = t.flush();
                }
                let code = self.exit_code();
                (code, r.err().map(|e| e.to_string()))
            }
            Err(e) => {
                self.kill_all();
                eprintln!("detrun: branch {name} could not start: {e}");
                (EXIT_INTERNAL, Some(e))
            }
        };
        self.trace = base_trace;
        if let Some(d) = &plan.out_dir {
            // One line per finished branch, for a watcher's progress.
            use std::io::Write;
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(d.join("progress"))
            {
                let _ = writeln!(f, "{} {} {}", ck.index, requested_ns, code);
            }
        }
        self.branch_results.push(crate::summary::BranchResult {
            checkpoint: ck.index,
            at_ns: ck.at_ns,
            requested_ns,
            decisions: ck.decisions,
            seed,
            exit_code: code,
            virtual_ns: self.world.clock.elapsed(),
            wall_ms: started.elapsed().as_millis() as u64,
            error,
            private_dirty_kb: self.branch_private_kb,
            stdout: files.as_ref().map(|f| f[0].display().to_string()),
            stderr: files.as_ref().map(|f| f[1].display().to_string()),
        });
        self.ended = false;
    }

    /// Reset the per-run state to the checkpoint's (before an instance).
    pub fn reset_set(&mut self, ck_world: World, main_proc: ProcId, stats: Stats) {
        self.world = ck_world;
        self.early.clear();
        self.running = None;
        self.hold = Hold::Normal;
        self.main_proc = main_proc;
        self.main_status = None;
        self.stats = stats;
        self.watch_sample = None;
        self.deadlock = None;
        self.shutting_down = false;
        self.kernel_retry = false;
        self.in_kernel.clear();
        self.timed_out = false;
        self.copy_mode = true;
        self.branch_private_kb = 0;
        self.mark_resume();
    }

    pub fn held_normally(&self) -> bool {
        self.hold == Hold::Normal
    }

    pub fn kernel_waiters(&self) -> bool {
        !self.in_kernel.is_empty()
    }

    /// The exit code of the run as it stands (at its end).
    fn exit_code(&self) -> i32 {
        let mut code = match self.main_status {
            Some(s) if libc::WIFEXITED(s) => libc::WEXITSTATUS(s),
            Some(s) if libc::WIFSIGNALED(s) => 128 + libc::WTERMSIG(s),
            _ => EXIT_INTERNAL,
        };
        if self.deadlock.is_some() {
            code = EXIT_DEADLOCK;
        }
        if self.timed_out {
            code = EXIT_TIMEOUT;
        }
        code
    }

    /// SIGKILL every remaining tracee and wait for them.
    fn kill_all(&mut self) {
        let tgids: Vec<pid_t> = self
            .procs
            .iter()
            .filter(|p| p.alive)
            .map(|p| p.tgid)
            .collect();
        for tg in tgids {
            // SAFETY: signalling our own tracees.
            unsafe { libc::kill(tg, libc::SIGKILL) };
        }
        self.shutting_down = true;
        // Drain: continue exit stops until every tracee is gone.
        while !self.threads.is_empty() {
            match sys::wait_any(0) {
                Ok((tid, st)) => {
                    if libc::WIFEXITED(st) || libc::WIFSIGNALED(st) {
                        self.on_death(tid, st);
                    } else {
                        let _ = self.cont(tid, 0);
                    }
                }
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(_) => {
                    self.threads.clear();
                    break;
                }
            }
        }
        self.running = None;
    }
}

impl ProcInfo {
    pub fn tgid_ns(&self) -> pid_t {
        crate::handlers::process::ns_id(self.tgid)
    }
}

/// Private_Dirty of a process, from /proc/PID/smaps_rollup (KB).
fn private_dirty_kb(pid: pid_t) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .ok()
        .and_then(|s| {
            let l = s.lines().find(|l| l.starts_with("Private_Dirty:"))?;
            l.split_whitespace().nth(1)?.parse().ok()
        })
        .unwrap_or(0)
}

/// The host's realtime clock, read once at start (for telling files that
/// predate the run from files written during it).
static START: std::sync::OnceLock<(u64, u64)> = std::sync::OnceLock::new();

/// Note the host's time at process start (call first thing in `main`):
/// files stamped up to then predate the run.
pub fn note_start() {
    let _ = START.set(start_now());
}

fn start_now() -> (u64, u64) {
    (
        now_ns(libc::CLOCK_REALTIME_COARSE),
        now_ns(libc::CLOCK_REALTIME),
    )
}

/// (coarse, fine) realtime at the start. File systems stamp with the
/// coarse clock (up to a tick or more behind), or finer when a stamp was
/// just looked at (multigrain timestamps), never past the fine clock: a
/// stamp after the fine reading is the run's; one between the two readings
/// may be the run's first moments (see `FsView::touch`).
pub fn start_clocks() -> (u64, u64) {
    *START.get_or_init(start_now)
}

fn now_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime into a local timespec.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// CPU time a thread has used, from /proc/TID/schedstat (ns).
fn thread_cpu_ns(tid: pid_t) -> u64 {
    std::fs::read_to_string(format!("/proc/{tid}/schedstat"))
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn proc_state(tid: pid_t) -> Option<char> {
    let s = std::fs::read_to_string(format!("/proc/{tid}/stat")).ok()?;
    let after = s.rsplit_once(')')?.1;
    after.trim_start().chars().next()
}

fn pin_cpu(cpu: Option<usize>) {
    // SAFETY: querying and setting our own affinity with a local cpu_set_t.
    unsafe {
        let c = cpu.unwrap_or_else(|| {
            let c = libc::sched_getcpu();
            if c < 0 {
                0
            } else {
                c as usize
            }
        });
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(c, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Whether this CPU can make `cpuid` fault: try it on ourselves and turn
/// it straight back off (nothing runs cpuid in between).
fn cpuid_faulting_supported() -> bool {
    const ARCH_SET_CPUID: libc::c_ulong = 0x1012;
    // SAFETY: arch_prctl on our own thread with integer arguments.
    unsafe {
        if libc::syscall(libc::SYS_arch_prctl, ARCH_SET_CPUID, 0 as libc::c_ulong) != 0 {
            return false;
        }
        libc::syscall(libc::SYS_arch_prctl, ARCH_SET_CPUID, 1 as libc::c_ulong);
    }
    true
}

/// A value unique to this run among concurrent ones (never seen by the
/// guest: it only keeps abstract socket names apart).
pub(crate) fn run_nonce() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    t ^ ((std::process::id() as u64) << 32)
}
