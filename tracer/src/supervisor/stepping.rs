//! Instruction-level scheduling points: single-stepping and counted
//! breakpoints (see DESIGN-NOTES "Preemption without a PMU").

use crate::ctx::Ctx;
use crate::sys;
use crate::task::Resume;
use libc::pid_t;

/// How an instruction-level point ended early.
enum PointEnd {
    /// The thread is gone (its death was handled).
    Gone,
    /// Preempt here and continue it this way.
    At(Resume),
}

impl Ctx {
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
    pub(super) fn step_preempt(&mut self, tid: pid_t, p: detrun_scheduler::InsnPoint) {
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

    /// Is `tid` executing detrun's code (the shared file's code or a stat
    /// site stub)?
    fn in_shim(&self, tid: pid_t) -> bool {
        let (Ok(r), Some(t)) = (sys::get_regs(tid), self.threads.get(&tid)) else {
            return false;
        };
        self.procs[t.proc as usize].patch.is_ours(r.rip)
    }
}
