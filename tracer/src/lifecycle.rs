//! Thread and process ends: deaths, zombies and reaping, vfork release,
//! and killing the whole set at the end of a run.

use crate::ctx::{Ctx, Hold};
use crate::sys;
use crate::task::{Park, Post, Resume};
use detrun_scheduler::{ProcId, WakeReason};
use libc::pid_t;

impl Ctx {
    /// Wake Child waiters (a child changed state).
    pub fn wake_child_waiters(&mut self) {
        for vt in self.world.parked(|w| w == detrun_scheduler::Wait::Child) {
            self.world.wake(vt, WakeReason::Woken);
        }
    }

    pub(crate) fn on_vfork_done(&mut self, tid: pid_t) {
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
                    (self.hooks.on_stop)(self, ptid, st);
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
        self.turn.early.remove(&tid)
    }

    pub fn death(&mut self, tid: pid_t, st: i32) {
        self.on_death(tid, st);
    }

    pub(crate) fn on_death(&mut self, tid: pid_t, st: i32) {
        self.turn.early.remove(&tid);
        self.turn.in_kernel.remove(&tid);
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
        let release = match self.turn.hold {
            Hold::UntilThreadDeath(x) => x == tid,
            Hold::UntilProcDeath(x) => x == p && leader,
            Hold::Normal => self.turn.running == Some(tid),
        };
        if release && self.turn.running.is_some() {
            self.turn.running = None;
            self.turn.hold = Hold::Normal;
        }
    }

    fn process_dead(&mut self, p: ProcId, st: i32) {
        let pi = &mut self.procs[p as usize];
        pi.alive = false;
        pi.status = Some(st);
        if self.copy.on {
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
        if p == self.turn.main_proc {
            self.turn.main_status = Some(st);
            if !self.threads.is_empty() {
                self.turn.shutting_down = true;
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
                    let info = chld_fields(pi.vpid, st);
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

    /// SIGKILL every remaining tracee and wait for them.
    pub(crate) fn kill_all(&mut self) {
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
        self.turn.shutting_down = true;
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
        self.turn.running = None;
    }
}

/// (pid, si_code, si_status) of a SIGCHLD for a child with wait status `st`.
pub fn chld_fields(vpid: pid_t, st: i32) -> (pid_t, i32, i32) {
    if libc::WIFEXITED(st) {
        (vpid, libc::CLD_EXITED, libc::WEXITSTATUS(st))
    } else if libc::WCOREDUMP(st) {
        (vpid, libc::CLD_DUMPED, libc::WTERMSIG(st))
    } else {
        (vpid, libc::CLD_KILLED, libc::WTERMSIG(st))
    }
}
