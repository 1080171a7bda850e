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
//! holding the turn. See `handlers/` for what each syscall does, `ctx` for
//! the state they share and `docs/ARCHITECTURE.md` for the whole.
//!
//! The stop handlers of this module are private: the handlers reach the
//! loop only through the hooks it puts in `Ctx` (a stop taken while a
//! handler waits, an instruction-level point to step).

mod spin;
mod stepping;

use crate::checkpoint::branch::Branches;
use crate::config::RunConfig;
use crate::ctx::{Ctx, Hold, Hooks};
use crate::summary::Summary;
use crate::sys;
use crate::task::{Park, Post, Resume};
use crate::watchdog::{forward_pending, install_handlers, stop_alarm};
use detrun_scheduler::{Next, Wait, WakeReason};
use libc::pid_t;

pub use crate::ctx::{EXIT_DEADLOCK, EXIT_HAZARD, EXIT_INTERNAL, EXIT_TIMEOUT};
pub use crate::host::note_start;

const OPTIONS: i32 = libc::PTRACE_O_EXITKILL
    | libc::PTRACE_O_TRACESYSGOOD
    | libc::PTRACE_O_TRACESECCOMP
    | libc::PTRACE_O_TRACECLONE
    | libc::PTRACE_O_TRACEFORK
    | libc::PTRACE_O_TRACEVFORK
    | libc::PTRACE_O_TRACEEXEC
    | libc::PTRACE_O_TRACEEXIT
    | libc::PTRACE_O_TRACEVFORKDONE;

/// A run: the shared state and the branch driver.
pub struct Supervisor {
    cx: Ctx,
    branches: Branches,
}

impl Supervisor {
    pub fn new(cfg: RunConfig) -> Supervisor {
        let hooks = Hooks {
            on_stop: |cx, tid, st| cx.on_stop(tid, st),
            step: |cx, tid, p| cx.step_preempt(tid, p),
        };
        Supervisor {
            cx: Ctx::new(cfg, hooks),
            branches: Branches::default(),
        }
    }

    /// Start the guest and run it to the end. Returns (exit code, summary).
    pub fn run(mut self) -> std::io::Result<(i32, Summary)> {
        let fast_stat = self.cx.cfg.fast_stat && self.cx.cfg.fast_time && self.cx.cfg.fs_virtual;
        let bpf = crate::filter::build(
            self.cx.cfg.fs_virtual,
            !self.cx.cfg.net_host,
            !self.cx.cfg.net_host && self.cx.cfg.namespaces,
            fast_stat.then_some(detrun_shim::RAW_SYSCALL_END),
        )
        .map_err(std::io::Error::other)?;
        if let Some(path) = &self.cx.cfg.trace {
            self.cx.trace = Some(crate::trace::Trace::create(path)?);
        }
        if self.cx.cfg.pin {
            crate::host::pin_cpu(self.cx.cfg.cpu);
        }
        let files = crate::vfiles::FilesDir::create(&self.cx.cfg)?;
        self.cx.cfg.files_dir = Some(files.path().to_path_buf());
        if self.cx.cfg.fast_time {
            self.cx.clock_page = crate::vdso::ClockPage::create(files.path(), &self.cx.world.clock);
            if let (Some(p), true) = (&self.cx.clock_page, fast_stat) {
                p.enable_stat(&self.cx.files.fsv, self.cx.cfg.py_real_times);
            }
        }
        let mut sp = crate::spawn::spawn(&self.cx.cfg, &bpf)?;
        self.cx.host.namespaces = sp.namespaces;
        if !sp.namespaces {
            self.cx
                .stats
                .hazard("pids", "PID namespace not permitted: pids are real");
        }
        if self.cx.cfg.net_host {
            self.cx.stats.note(
                "network",
                "--net=host: AF_INET sockets use the host's network (each use is a hazard)",
            );
        }
        if !self.cx.host.cpuid_faulting {
            self.cx
                .stats
                .note("cpuid", crate::handlers::exec::NO_CPUID_FAULTING);
        }
        match sp.take_net_request() {
            // Made at the first need (netns.rs).
            Some(req) => self.cx.late_net = Some(crate::netns::LateNet::new(req)),
            // No network namespace of its own: names unique to this run.
            None if !self.cx.cfg.net_host => {
                self.cx.net = crate::net::NetKernel::new(Some(crate::host::run_nonce()))
            }
            None => {}
        }
        sys::seize(sp.guest, OPTIONS)?;
        self.cx.copy.track_ids = self.cx.cfg.branch.as_ref().is_some_and(|b| b.checkpoint);
        let p = self.cx.add_proc(sp.guest, None);
        self.cx.turn.main_proc = p;
        let vt = self.cx.add_thread(sp.guest, p, 0);
        self.cx
            .threads
            .get_mut(&sp.guest)
            .expect("just added")
            .resume = Resume::Cont(0);
        install_handlers();
        // After the fork: the reaper and the guest keep TSC reads as they are.
        let tsc_off = crate::selftime::enter();
        sp.release()?;
        // The guest runs its setup and execs: it holds the turn from the start.
        match self.cx.world.next_turn() {
            Next::Run(t) if t == vt => {
                if let Some(tr) = self.cx.trace.as_mut() {
                    tr.decision(self.cx.world.decisions, 0, vt);
                }
            }
            other => {
                return Err(std::io::Error::other(format!(
                    "unexpected start: {other:?}"
                )))
            }
        }
        self.cx.turn.running = Some(sp.guest);
        self.cx.mark_resume();
        let r = event_loop(&mut self.cx, Some(&mut self.branches));
        self.branches.drain(&mut self.cx, branch_loop);
        if tsc_off {
            crate::selftime::leave();
        }
        stop_alarm();
        if let Some(t) = self.cx.trace.as_mut() {
            t.flush()?;
        }
        if let (Some(path), Some(c)) = (&self.cx.cfg.coverage, &self.cx.coverage) {
            std::fs::write(path, c.to_json(self.cx.world.decisions))?;
        }
        if let Some((path, policy)) = &self.cx.cfg.record_schedule {
            let sc = crate::schedule::Schedule {
                seed: self.cx.cfg.seed,
                policy: policy.clone(),
                sync: self.cx.cfg.sync_points,
                turns: self.cx.world.recorded.clone(),
            };
            std::fs::write(path, sc.render())?;
        }
        if let Some(at) = self.cx.world.diverged {
            self.cx.stats.hazard(
                "schedule-diverged",
                format!("the given schedule could not be followed from turn {at} on"),
            );
        }
        self.cx.kill_all();
        self.cx.net.leave();
        if let Some(rp) = sp.reaper {
            let mut st = 0;
            // SAFETY: reaping our own child.
            unsafe { libc::kill(rp, libc::SIGKILL) };
            unsafe { libc::waitpid(rp, &mut st, 0) };
        }
        r?;
        let mut code = self.cx.exit_code();
        if let Some(plan) = &self.cx.cfg.branch {
            if plan.checkpoint && self.branches.taken == 0 {
                eprintln!("detrun: no checkpoint was taken (the run ended first, or it could not be checkpointed: see the summary)");
            }
            if let Some(d) = &plan.out_dir {
                let j = serde_json::to_string_pretty(&self.branches.results)
                    .map_err(std::io::Error::other)?;
                std::fs::write(d.join("results.json"), j)?;
            }
        }
        let mut sum = self.cx.stats.summary();
        sum.seed = self.cx.cfg.seed;
        sum.virtual_ns = self.cx.world.clock.elapsed();
        sum.wall_ms = self.cx.host.start.elapsed().as_millis() as u64;
        sum.scheduling_decisions = self.cx.world.decisions;
        sum.context_switches = self.cx.world.switches;
        sum.namespaces = self.cx.host.namespaces;
        if let Some(l) = &self.cx.late_net {
            sum.net_namespace = l.made == Some(true);
            sum.net_joins = l.joins;
        }
        sum.deadlock = self.cx.turn.deadlock.clone();
        // SAFETY: getrusage into a local struct.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } == 0 {
            sum.supervisor_max_rss_kb = ru.ru_maxrss as u64;
        }
        sum.supervisor_allocs = crate::alloc::count();
        if self.cx.world.net.active() {
            let n = &self.cx.world.net.stats;
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
        if self.cx.cfg.strict && code == 0 && !sum.hazards.is_empty() {
            code = EXIT_HAZARD;
        }
        sum.exit_code = code;
        Ok((code, sum))
    }
}

/// Run stops until the run (or the branch) is over. `branches`: the base
/// run's branch points, None inside a branch.
fn event_loop(cx: &mut Ctx, mut branches: Option<&mut Branches>) -> std::io::Result<()> {
    loop {
        if cx.turn.shutting_down && cx.threads.is_empty() {
            return Ok(());
        }
        if cx.turn.running.is_none() && !cx.turn.shutting_down {
            if !schedule(cx, branches.as_deref_mut()) {
                return Ok(());
            }
            continue;
        }
        match sys::wait_any(0) {
            Ok((tid, st)) => cx.on_stop(tid, st),
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => cx.on_interrupt(),
            Err(e) if e.raw_os_error() == Some(libc::ECHILD) => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}

/// The loop of a branch (no branch points of its own).
fn branch_loop(cx: &mut Ctx) -> std::io::Result<()> {
    event_loop(cx, None)
}

/// Hand the turn on. Returns false when the run is over.
fn schedule(cx: &mut Ctx, branches: Option<&mut Branches>) -> bool {
    if let Some(b) = branches {
        if b.ended {
            return false;
        }
        if b.due(cx) && !b.at_point(cx, branch_loop) {
            return false;
        }
    }
    cx.pump_net();
    cx.check_io();
    match cx.world.next_turn() {
        Next::Run(vt) => {
            let tid = cx.vt_tid[vt as usize];
            if let Some(t) = cx.trace.as_mut() {
                t.decision(cx.world.decisions, cx.world.clock.elapsed(), vt);
            }
            cx.give_turn(tid);
            true
        }
        Next::Deliver(ds) => {
            cx.deliver_timers(ds);
            true
        }
        Next::Net => true,
        Next::Idle => cx.idle(),
        Next::Done => false,
    }
}

impl Ctx {
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
        if kernel || !self.turn.in_kernel.is_empty() {
            // A thread blocked in the kernel will report when its call ends.
            match sys::wait_any(0) {
                Ok((tid, st)) => self.on_stop(tid, st),
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {
                    if forward_pending() {
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
        if forward_pending() {
            self.forward_signal();
        }
        true
    }

    fn report_deadlock(&mut self) {
        let mut lines = Vec::new();
        for t in self.threads.values() {
            if let Some(w) = self.world.waiting_on(t.vt) {
                let name = crate::sysnames::name(t.parked_nr).unwrap_or("?");
                let ns = crate::sys::ns_id(t.tid);
                let last = match t.last_sync {
                    Some((f, obj)) => format!(", last sync op {f}({obj:#x})"),
                    None => String::new(),
                };
                lines.push(format!(
                    "thread {} (pid {}): blocked in {} ({}){last}",
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
        self.turn.deadlock = Some(lines);
        self.kill_all();
    }

    /// Give the turn to `tid` and resume it as its state requires.
    fn give_turn(&mut self, tid: pid_t) {
        if self.cfg.backtrace_turn == Some(self.world.decisions) {
            // Where the thread stands as it gets the turn.
            let at = sys::get_regs(tid)
                .ok()
                .and_then(|r| crate::sysnames::name(r.orig_rax as i64))
                .unwrap_or("?");
            self.print_backtrace(tid, &format!("resumes in {at}"));
        }
        self.turn.running = Some(tid);
        self.turn.hold = Hold::Normal;
        crate::datapoints::sync_thread(self, tid);
        self.mark_resume();
        self.turn.kernel_retry = true;
        let Some(t) = self.threads.get_mut(&tid) else {
            self.turn.running = None;
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

    fn on_stop(&mut self, tid: pid_t, st: i32) {
        self.absorb_clock();
        if self.cfg.debug {
            eprintln!(
                "[detrun] stop tid={tid} status={st:#x} running={:?}",
                self.turn.running
            );
        }
        if self.turn.running == Some(tid) {
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
            self.turn.early.insert(tid, st);
            return;
        }
        let sig = libc::WSTOPSIG(st);
        let event = (st >> 16) & 0xffff;
        if event != libc::PTRACE_EVENT_SECCOMP {
            // A probed call's restart comes as the thread's next stop.
            if let Some(t) = self.threads.get_mut(&tid) {
                t.restart = None;
            }
        }
        match (sig, event) {
            (libc::SIGTRAP, libc::PTRACE_EVENT_SECCOMP)
                if self.turn.in_kernel.contains_key(&tid) =>
            {
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
            (s, 0) if s == libc::SIGTRAP | 0x80 && self.turn.in_kernel.contains_key(&tid) => {
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
            (libc::SIGTRAP, libc::PTRACE_EVENT_EXEC) => crate::handlers::exec::on_exec(self, tid),
            (libc::SIGTRAP, libc::PTRACE_EVENT_EXIT) => self.on_exit_event(tid),
            (libc::SIGTRAP, libc::PTRACE_EVENT_VFORK_DONE) => self.on_vfork_done(tid),
            (_, sys::PTRACE_EVENT_STOP) => self.on_event_stop(tid, sig, st),
            (libc::SIGTRAP, 0) if self.sync_trap(tid) => {}
            (sig, _) => crate::handlers::signal::on_signal(self, tid, sig),
        }
    }

    /// A SIGTRAP from an armed sync-op entry: a scheduling point.
    fn sync_trap(&mut self, tid: pid_t) -> bool {
        let Ok(regs) = sys::get_regs(tid) else {
            return false;
        };
        let Ok(si) = sys::get_siginfo(tid) else {
            return false;
        };
        if let Some(slot) = crate::datapoints::hit(self, tid, si.si_code) {
            crate::datapoints::on_hit(self, tid, &regs, slot);
            return true;
        }
        // An int3's SIGTRAP comes from the kernel (SI_KERNEL), not kill().
        match crate::syncpoints::hit(self, tid, &regs) {
            Some((site, x)) if si.si_code == 0x80 => {
                crate::syncpoints::on_hit(self, tid, regs, site, x);
                true
            }
            _ => false,
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
        self.turn.in_kernel.remove(&tid);
        if let Some(t) = self.threads.get_mut(&tid) {
            t.park = None;
            t.resume = Resume::Cont(0);
            let vt = t.vt;
            self.world.wake(vt, WakeReason::Woken);
        }
    }

    /// PTRACE_EVENT_STOP: a group-stop (ignored: job control is not
    /// virtualized) or our own PTRACE_INTERRUPT.
    fn on_event_stop(&mut self, tid: pid_t, sig: i32, st: i32) {
        if matches!(
            sig,
            libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU
        ) && self.turn.running != Some(tid)
        {
            let _ = self.cont(tid, 0);
            return;
        }
        if self.turn.running != Some(tid) {
            let _ = self.cont(tid, 0);
            return;
        }
        // The watchdog interrupted the running thread.
        let state_kernel = crate::handlers::process::was_in_syscall(tid);
        let probe = self.watch.probe.filter(|p| p.tid == tid);
        if let (Some(p), true) = (probe, sys::take_probe(tid, st)) {
            if state_kernel {
                // Caught inside a call the filter let through: not a spin,
                // and no reason to park it (that is the watchdog's, for a
                // call that blocks). The kernel restarts it: that seccomp
                // stop is this call's, not an event of its own.
                self.watch.resumed_at = p.mark;
                let at = sys::get_regs(tid).map_or((-1, 0), |r| (r.orig_rax as i64, r.rip));
                if let Some(t) = self.threads.get_mut(&tid) {
                    t.restart = Some(at);
                }
                let _ = sys::cont(tid, 0);
                return;
            }
            self.spin_probe(tid, p.mark);
            return;
        }
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
            self.turn.in_kernel.insert(tid, false);
            let _ = self.resume_syscall(tid, 0);
        } else {
            self.yield_running(tid, Resume::Cont(0));
            self.spun(tid);
        }
    }

    /// `tid` was preempted spinning: if nobody else could run, it used up
    /// the time until the next timer (what it waited for, most likely).
    fn spun(&mut self, tid: pid_t) {
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

    fn on_syscall(&mut self, tid: pid_t, redo: bool) {
        let Ok(regs) = sys::get_regs(tid) else { return };
        if self.copy.on && crate::handlers::vpid::invisible(self, tid, &regs) {
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
        if let Some((nr, rip)) = t.restart.take() {
            let n = regs.orig_rax as i64;
            // The kernel backs the restarted call's rip up to its `syscall`.
            let same = regs.rip == rip.wrapping_sub(2) || regs.rip == rip;
            if same && (n == nr || n == libc::SYS_restart_syscall) {
                // Resumed as the first entry was (to its exit stop if that
                // one had work there).
                let _ = if matches!(t.post, Post::None) {
                    sys::cont(tid, 0)
                } else {
                    sys::syscall(tid, 0)
                };
                return;
            }
        }
        let redo = redo || std::mem::take(&mut t.again);
        let vt = t.vt;
        let expired = self.world.tick(vt);
        if let Some(limit) = self.cfg.virtual_timeout_ns {
            if self.world.clock.elapsed() > limit && !self.turn.timed_out {
                self.turn.timed_out = true;
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
        if self.turn.running == Some(tid) {
            let status = sys::event_msg(tid).unwrap_or(0) as i32;
            let pi = &self.procs[p as usize];
            let live = self
                .world
                .threads_of(p)
                .iter()
                .filter(|&&v| self.world.is_alive(v))
                .count();
            let group = pi.group_exit || libc::WIFSIGNALED(status) || live <= 1;
            if group && self.copy.on {
                // What this copy cost: the pages it no longer shares with
                // the checkpoint (and new ones), read before they go.
                self.copy.private_kb += crate::host::private_dirty_kb(pi.tgid);
            }
            if group {
                self.procs[p as usize].group_exit = true;
                self.turn.hold = Hold::UntilProcDeath(p);
            } else if tid != pi.tgid {
                self.turn.hold = Hold::UntilThreadDeath(tid);
            } else {
                // The leader left with pthread_exit; its siblings go on.
                let vt = t.vt;
                self.world.exit_thread(vt);
                self.turn.running = None;
            }
        }
        let _ = self.cont(tid, 0);
    }
}
