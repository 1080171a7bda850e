//! Instruction-level scheduling points: single-stepping and counted
//! breakpoints (see DESIGN-NOTES "Preemption without a PMU").

use crate::ctx::Ctx;
use crate::sys;
use crate::task::Resume;
use libc::pid_t;

/// Single-steps an instruction-level point may take looking for a loop.
const LOOP_SEARCH: u32 = 192;

/// How a wait inside a point ended.
enum Waited {
    Stop(i32),
    /// The thread spins (`spin.rs`) and stands at the spin's point.
    Spin,
    Gone,
}

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
            if let Ok(r) = sys::get_regs(tid) {
                if self.copy.on && crate::handlers::vpid::answer(self, tid, &r) {
                    // A call only copy mode traps: a plain run steps over
                    // it, so the point does too (the next step only
                    // finishes the answered call).
                    if self.step(tid).is_err() {
                        return Some(PointEnd::Gone);
                    }
                    let Some(st) = self.wait_stop(tid) else {
                        return Some(PointEnd::Gone);
                    };
                    let plain = libc::WIFSTOPPED(st)
                        && libc::WSTOPSIG(st) == libc::SIGTRAP
                        && (st >> 16) == 0;
                    return if plain {
                        None
                    } else {
                        self.point_stop(tid, st, trap_ok)
                    };
                }
                self.stats.count(r.orig_rax as i64);
            }
            // Reached a syscall first: preempt at its entry.
            return Some(PointEnd::At(Resume::Redo));
        }
        if sig == libc::SIGTRAP && event == 0 && trap_ok {
            return None;
        }
        if sig == libc::SIGTRAP && event == 0 {
            // A watched global's access: preempt after it, where the
            // point stands.
            if crate::datapoints::is_hit(self, tid) {
                return Some(PointEnd::At(Resume::Cont(0)));
            }
            // Ran into a sync-op entry's int3: preempt at the entry, the
            // int3 not yet run (it runs, a point of its own, later).
            if let Ok(mut r) = sys::get_regs(tid) {
                if crate::syncpoints::is_site(self, tid, r.rip.wrapping_sub(1)) {
                    r.rip -= 1;
                    let _ = sys::set_regs(tid, &r);
                    return Some(PointEnd::At(Resume::Cont(0)));
                }
            }
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
    /// thread `p.steps` instructions (unless `p.exact`, on to the next
    /// backward jump: a loop's head), then (breakpoint variant) wait for
    /// `p.hits` executions of the instruction reached, by an int3 there,
    /// then step `p.after` more; stop early at a syscall, a sync-op entry
    /// or a signal; give up the turn there. A pure function of the
    /// thread's own execution, so replays (which step exactly what was
    /// recorded) land on the same instruction.
    pub(super) fn step_preempt(&mut self, tid: pid_t, p: detrun_scheduler::InsnPoint) {
        let Some(vt) = self.threads.get(&tid).map(|t| t.vt) else {
            return;
        };
        // From a seccomp (or entry) stop, the first step only finishes the
        // call: take it uncounted, so that a point counts the same from
        // either kind of stop (copy mode answers some calls at the seccomp
        // stop that a plain run lets the kernel answer).
        if matches!(sys::syscall_op(tid), Some(1 | 3)) {
            if self.step(tid).is_err() {
                return;
            }
            let Some(st) = self.wait_stop(tid) else {
                return;
            };
            match self.point_stop(tid, st, true) {
                None => {}
                Some(PointEnd::Gone) => return,
                Some(PointEnd::At(r)) => return self.point_end(tid, vt, 0, 0, 0, r),
            }
        }
        let search = p.hits > 0 && !p.exact;
        let limit = if search {
            p.steps.max(LOOP_SEARCH)
        } else {
            p.steps
        };
        let mut done = 0u32;
        let mut hits = 0u32;
        let mut after = 0u32;
        let mut resume = Resume::Cont(0);
        let mut found = !search;
        // Searching: the loop's head, where the backward jump went, and
        // the instructions of one iteration (stepped to come back to it).
        let mut head: Option<(u64, u32)> = None;
        let mut body: Option<u32> = None;
        // Never stop inside detrun's code in the tracee (it updates the
        // shared clock and tables, and an int3 there would reach every
        // process mapping it): step on until out, the same steps every run.
        loop {
            let want = done < p.steps || (done < limit && (!found || (search && body.is_none())));
            if !want && (done >= p.steps.saturating_add(100_000) || !self.in_shim(tid)) {
                break;
            }
            let before = sys::get_regs(tid).map_or(0, |r| r.rip);
            match self.point_step(tid, before) {
                Ok(rip) => {
                    done += 1;
                    if done == p.steps + 1 && found {
                        self.stats.insn_points_moved += 1;
                    }
                    match head {
                        Some((h, at)) if rip == h && body.is_none() => body = Some(done - at),
                        None if search
                            && done >= p.steps
                            && rip < before
                            && !self.in_system(tid, rip) =>
                        {
                            found = true;
                            head = Some((rip, done));
                        }
                        _ => {}
                    }
                }
                Err(Some(r)) => {
                    resume = r;
                    return self.point_end(tid, vt, done, 0, 0, resume);
                }
                Err(None) => return,
            }
        }
        if p.hits > 0 {
            match self.breakpoint_hits(tid, p.hits) {
                Ok((n, r)) => {
                    hits = n;
                    resume = r;
                }
                Err(()) => return,
            }
            // A position in the loop's body (a replay steps what was done).
            let want_after = if p.exact {
                p.after
            } else {
                p.after % body.unwrap_or(16).max(1)
            };
            if hits >= p.hits && matches!(resume, Resume::Cont(0)) {
                while after < want_after {
                    let before = sys::get_regs(tid).map_or(0, |r| r.rip);
                    match self.point_step(tid, before) {
                        Ok(_) => after += 1,
                        Err(Some(r)) => {
                            resume = r;
                            break;
                        }
                        Err(None) => return,
                    }
                }
            }
        }
        self.point_end(tid, vt, done, hits, after, resume)
    }

    /// One single-step of an instruction-level point from `at`: the new
    /// instruction pointer, or how the point ends (None: the thread is
    /// gone).
    fn point_step(&mut self, tid: pid_t, at: u64) -> Result<u64, Option<Resume>> {
        if crate::syncpoints::is_site(self, tid, at) {
            // A sync-op entry is a point of its own: end here.
            return Err(Some(Resume::Cont(0)));
        }
        if self.step(tid).is_err() {
            return Err(None);
        }
        let Some(st) = self.wait_stop(tid) else {
            return Err(None);
        };
        match self.point_stop(tid, st, true) {
            // An emulated rdtsc/cpuid also counts as one instruction.
            None => {
                self.stats.single_steps += 1;
                Ok(sys::get_regs(tid).map_or(0, |r| r.rip))
            }
            Some(PointEnd::Gone) => Err(None),
            Some(PointEnd::At(r)) => Err(Some(r)),
        }
    }

    fn point_end(&mut self, tid: pid_t, vt: u32, done: u32, hits: u32, after: u32, resume: Resume) {
        self.stats.insn_preemptions += 1;
        self.world.insn_preempted(vt, done, hits, after);
        let t = self.world.clock.elapsed();
        if let Some(tr) = self.trace.as_mut() {
            let rip = sys::get_regs(tid).map_or(0, |r| r.rip);
            tr.insn_preemption(t, vt, rip, (done, hits, after));
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
        if crate::syncpoints::is_site(self, tid, addr) {
            // A sync-op entry is a point already.
            return Ok((0, Resume::Cont(0)));
        }
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
            let st = match self.wait_or_spin(tid) {
                Waited::Stop(st) => st,
                Waited::Spin => {
                    // It spins where the instruction is never reached: the
                    // point ends at the spin's canonical point. Recorded
                    // as `want` executions, which a replay waits for the
                    // same way.
                    arm(false);
                    return Ok((want, Resume::Cont(0)));
                }
                Waited::Gone => return Err(()),
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

    /// Wait for the next stop of `tid`, which runs towards a breakpoint.
    /// It may never get there (spinning on memory another thread must
    /// change): after a few alarm ticks, and backing off, it is probed
    /// for a spin, as the watchdog probes a running thread.
    fn wait_or_spin(&mut self, tid: pid_t) -> Waited {
        let start = crate::watchdog::ALARMS.load(std::sync::atomic::Ordering::Relaxed);
        let mut next = crate::watchdog::PROBE_FIRST;
        let mut leaving = false;
        loop {
            let st = match sys::wait_pid(tid, 0) {
                Ok((_, st)) => st,
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {
                    let now = crate::watchdog::ALARMS.load(std::sync::atomic::Ordering::Relaxed);
                    let t = now.wrapping_sub(start) as u64;
                    if sys::probe_in_flight(tid) {
                        continue;
                    }
                    if crate::watchdog::forward_pending() && sys::probe(tid).is_ok() {
                        // A signal to detrun: end the point, so that the
                        // loop forwards it (and ends the run) at once.
                        leaving = true;
                    } else if t >= next && sys::probe(tid).is_ok() {
                        next = t + t.clamp(1, crate::watchdog::PROBE_MAX_GAP);
                    }
                    continue;
                }
                Err(_) => return Waited::Gone,
            };
            self.absorb_clock();
            // A probe still in flight when this returns surfaces later: in
            // the loop (a probe there) or in a nested wait (resumed as before).
            if !sys::take_probe(tid, st) {
                return Waited::Stop(st);
            }
            if leaving {
                return Waited::Stop(st);
            }
            match self.pure_loop(tid) {
                super::spin::Verdict::Spin => return Waited::Spin,
                super::spin::Verdict::Not => {
                    if sys::cont(tid, 0).is_err() {
                        return Waited::Gone;
                    }
                }
                super::spin::Verdict::Other(st) => return Waited::Stop(st),
            }
        }
    }

    /// Is `rip` in the system's code (libc, the loader) in `tid`'s image?
    fn in_system(&self, tid: pid_t, rip: u64) -> bool {
        self.threads
            .get(&tid)
            .is_some_and(|t| self.procs[t.proc as usize].patch.sync.in_system(rip))
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
