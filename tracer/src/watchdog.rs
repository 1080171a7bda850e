//! The watchdog and detrun's own signals.
//!
//! A periodic alarm (`ALARM_MS`) interrupts the supervisor's wait. A running
//! thread that made no stop for a few milliseconds while another could run
//! is probed for a spin (`supervisor/spin.rs`: a loop that changes
//! nothing, preempted at a point that is the same in every run); the
//! probes back off while it computes. One that made no stop for
//! `--watchdog-ms` and used that much CPU is preempted as a last resort (a
//! hazard); one asleep in the kernel in a call the filter let through is
//! interrupted and left to block without the turn.
//! SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGUSR1/2 to detrun are forwarded
//! to the guest.

use crate::ctx::{Ctx, Hold};
use crate::host::{proc_state, thread_cpu_ns};
use crate::sys;
use libc::pid_t;
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};

static FORWARD_SIG: AtomicI32 = AtomicI32::new(0);

static FORWARD_CODE: AtomicI32 = AtomicI32::new(0);

pub(crate) static ALARMS: AtomicU32 = AtomicU32::new(0);

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
const ALARM_MS: u64 = 2;

/// Alarm ticks after a resume before the first spin probe, and the most
/// between two probes of one stretch (they back off, doubling).
pub(crate) const PROBE_FIRST: u64 = 2;
pub(crate) const PROBE_MAX_GAP: u64 = 16;

/// A resume of the running thread: its sequence number and the alarm tick.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mark {
    seq: u64,
    tick: u64,
}

pub fn install_handlers() {
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

pub fn stop_alarm() {
    // SAFETY: disarming our own timer.
    unsafe {
        let it: libc::itimerval = std::mem::zeroed();
        libc::setitimer(libc::ITIMER_REAL, &it, std::ptr::null_mut());
    }
}

/// Is a signal to detrun waiting to be forwarded?
pub fn forward_pending() -> bool {
    FORWARD_SIG.load(Ordering::SeqCst) != 0
}

/// The watchdog's view of the running thread.
#[derive(Default)]
pub struct Watch {
    /// When the running thread last stopped or was resumed (no clock read:
    /// the supervisor runs with TSC reads faulting, see `selftime`).
    pub resumed_at: Mark,
    /// The first look at a long-running thread: (tid, its `resumed_at`,
    /// CPU ns used then).
    pub sample: Option<(pid_t, Mark, u64)>,
    /// The spin probe of the running thread's current stretch.
    pub probe: Option<Probe>,
}

/// A spin probe: of which thread and stretch (the mark of its last real
/// stop, which a probe's own stop does not replace) and the tick of the
/// next. Whether one is in flight, `sys::probe_in_flight` says.
#[derive(Clone, Copy, Debug)]
pub struct Probe {
    pub tid: pid_t,
    pub mark: Mark,
    pub next: u64,
}

impl Ctx {
    /// The running thread stopped or was resumed: the watchdog measures
    /// from here.
    pub(crate) fn mark_resume(&mut self) {
        self.watch.resumed_at = Mark {
            seq: self.watch.resumed_at.seq + 1,
            tick: ALARMS.load(Ordering::Relaxed) as u64,
        };
    }

    /// A running thread that makes no stop for a while is either spinning in
    /// user space (preempt it if someone else could run) or blocked in the
    /// kernel in a call the filter let through (interrupt and park it).
    fn watchdog(&mut self) {
        let Some(tid) = self.turn.running else { return };
        if self.turn.hold != Hold::Normal || self.turn.shutting_down {
            return;
        }
        let ticks =
            (ALARMS.load(Ordering::Relaxed) as u64).wrapping_sub(self.watch.resumed_at.tick);
        if self.cfg.spin_points && self.probe_due(tid, ticks) {
            return;
        }
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
            match self.watch.sample {
                Some((t, at, c0)) if t == tid && at == self.watch.resumed_at => {
                    cpu.saturating_sub(c0) >= self.cfg.watchdog_ms * 1_000_000
                }
                _ => {
                    self.watch.sample = Some((tid, self.watch.resumed_at, cpu));
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

    /// Interrupt `tid` for a spin probe if one is due (true: sent).
    fn probe_due(&mut self, tid: pid_t, ticks: u64) -> bool {
        let mark = self.watch.resumed_at;
        let next = match self.watch.probe {
            Some(p) if p.tid == tid && p.mark == mark => {
                if sys::probe_in_flight(tid) {
                    return false;
                }
                p.next
            }
            _ => PROBE_FIRST,
        };
        if ticks < next {
            return false;
        }
        let others = self
            .threads
            .values()
            .any(|t| t.tid != tid && self.world.is_runnable(t.vt));
        if !others && self.world.next_deadline().is_none() {
            return false;
        }
        if proc_state(tid) != Some('R') || sys::probe(tid).is_err() {
            return false;
        }
        self.watch.probe = Some(Probe {
            tid,
            mark,
            next: ticks + ticks.clamp(1, PROBE_MAX_GAP),
        });
        true
    }

    pub(crate) fn on_interrupt(&mut self) {
        if FORWARD_SIG.load(Ordering::SeqCst) != 0 {
            self.forward_signal();
        }
        self.watchdog();
    }

    pub(crate) fn forward_signal(&mut self) {
        let sig = FORWARD_SIG.swap(0, Ordering::SeqCst);
        let code = FORWARD_CODE.load(Ordering::SeqCst);
        if sig == 0 {
            return;
        }
        self.stats.hazard(
            "external-signal",
            format!("signal {sig} from outside the sandbox"),
        );
        let main = &self.procs[self.turn.main_proc as usize];
        // From a terminal (SI_KERNEL) the guest's process group got it too.
        if main.alive && code != 0x80 {
            // SAFETY: signalling our own tracee.
            unsafe { libc::kill(main.tgid, sig) };
        }
        self.check_signals(None);
    }
}
