//! Signals: sending (kill and friends run for real, then parked receivers
//! are woken), waiting (pause, sigsuspend, sigtimedwait park until a signal
//! is deliverable, then run for real so the kernel does the delivery), and
//! the signal-delivery stops, where the faults of `rdtsc` and `cpuid` are
//! emulated.

use super::{Out, EAGAIN, EFAULT};
use crate::ctx::Ctx;
use crate::sys::{self, Args, Regs};
use crate::task::{Park, Post};
use detrun_scheduler::Wait;
use libc::pid_t;

pub fn handle(s: &mut Ctx, tid: pid_t, a: &Args, regs: Regs) -> Out {
    use crate::handlers::nr::*;
    let x = a.a;
    match a.nr {
        SYS_kill | SYS_tkill | SYS_rt_sigqueueinfo | SYS_pidfd_send_signal => {
            let sig = x[1] as i32;
            Out::Exit(
                regs,
                Post::Kill {
                    sig,
                    target: x[0] as i32 as i64,
                },
            )
        }
        SYS_tgkill | SYS_rt_tgsigqueueinfo => {
            let sig = x[2] as i32;
            Out::Exit(
                regs,
                Post::Kill {
                    sig,
                    target: x[0] as i32 as i64,
                },
            )
        }
        SYS_pause => wait_signal(s, tid, None, None),
        SYS_rt_sigsuspend => {
            let Ok(mask) = sys::read_u64(tid, x[0]) else {
                return Out::Ret(EFAULT);
            };
            wait_signal(s, tid, Some(mask), None)
        }
        SYS_rt_sigtimedwait => {
            let Ok(set) = sys::read_u64(tid, x[0]) else {
                return Out::Ret(EFAULT);
            };
            let Some(st) = sys::sig_state(tid) else {
                return Out::Pass;
            };
            if (st.pending | st.shared) & (set | !st.blocked) != 0 {
                return Out::Pass; // a signal is there: the real call returns at once
            }
            let deadline = if x[2] != 0 {
                match super::time::read_ts(tid, x[2]) {
                    Ok(0) => return Out::Ret(EAGAIN),
                    Ok(d) => Some(s.world.clock.monotonic().saturating_add(d)),
                    Err(e) => return Out::Ret(e),
                }
            } else {
                None
            };
            // Interrupted by a signal in `set` (blocked, so use a mask that
            // lets those through) or by any unblocked one.
            wait_signal(s, tid, Some(st.blocked & !set), deadline)
        }
        _ => Out::Pass,
    }
}

fn wait_signal(s: &mut Ctx, tid: pid_t, mask: Option<u64>, deadline: Option<u64>) -> Out {
    let Some(st) = sys::sig_state(tid) else {
        return Out::Pass;
    };
    let m = mask.unwrap_or(st.blocked);
    if st.deliverable(m) != 0 {
        return Out::Pass;
    }
    if let Some(t) = s.threads.get_mut(&tid) {
        t.wait_mask = mask;
    }
    Out::Park(Park::Signal, Wait::Signal, deadline)
}

/// After a signal was sent by a guest: wake the waiters it interrupts; a
/// SIGKILL'd process is reaped before anyone else runs.
pub fn kill_exit(s: &mut Ctx, tid: pid_t, sig: i32, target: i64) {
    if sig == libc::SIGKILL && target > 0 {
        s.settle_killed(target as pid_t, tid);
    }
    s.check_signals(None);
    s.continue_running(tid);
}

impl Ctx {
    /// Wait for the death of every thread of the process with guest pid
    /// `ns_pid` (other than the killer), so the kill takes effect at once.
    fn settle_killed(&mut self, ns_pid: pid_t, killer: pid_t) {
        let victims: Vec<pid_t> = self
            .procs
            .iter()
            .filter(|p| {
                p.alive
                    && (if self.host.namespaces {
                        p.tgid_ns()
                    } else {
                        p.tgid
                    }) == ns_pid
            })
            .flat_map(|p| {
                let proc = self
                    .procs
                    .iter()
                    .position(|q| q.tgid == p.tgid)
                    .unwrap_or(0) as u32;
                self.world
                    .threads_of(proc)
                    .iter()
                    .filter(|&&v| self.world.is_alive(v))
                    .map(|&v| self.vt_tid[v as usize])
                    .collect::<Vec<_>>()
            })
            .filter(|&t| t != killer)
            .collect();
        for v in victims {
            while self.threads.contains_key(&v) {
                match sys::wait_pid(v, 0) {
                    Ok((_, st)) if libc::WIFEXITED(st) || libc::WIFSIGNALED(st) => {
                        self.death(v, st)
                    }
                    Ok(_) => {
                        let _ = self.cont(v, 0);
                    }
                    Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                    Err(_) => break,
                }
            }
        }
    }
}

/// A signal-delivery stop of `tid`.
pub fn on_signal(s: &mut Ctx, tid: pid_t, sig: i32) {
    if sig == libc::SIGSEGV && super::misc::emulate_fault(s, tid) {
        s.continue_running(tid);
        return;
    }
    let sig = match sig {
        // Job control inside the sandbox is not virtualized: ignoring a
        // stop keeps the turn well-defined.
        libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU => {
            s.stats
                .hazard("job-control", "stop signals inside the sandbox are ignored");
            0
        }
        x => x,
    };
    if sig != 0 {
        s.stats.signals += 1;
    }
    if s.cfg.debug && sig == libc::SIGSEGV {
        let r = sys::get_regs(tid).map(|r| (r.rip, r.rsp)).unwrap_or((0, 0));
        let a = sys::get_siginfo(tid)
            // SAFETY: si_addr reads the union of a SIGSEGV siginfo.
            .map(|i| unsafe { i.si_addr() } as u64)
            .unwrap_or(0);
        eprintln!(
            "[detrun] SIGSEGV in {tid}: rip {:#x} rsp {:#x} addr {a:#x}",
            r.0, r.1
        );
    }
    if sig == libc::SIGCHLD && s.copy.on {
        super::vpid::fix_sigchld(s, tid);
    }
    if s.turn.running == Some(tid) {
        if s.world.timers_due() {
            let ds = s.world.fire_due();
            s.deliver_timers(ds);
        }
        let _ = s.cont(tid, sig);
    } else {
        let _ = s.cont(tid, sig);
    }
}
