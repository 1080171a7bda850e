//! Spin waits as scheduling points that are the same in every run.
//!
//! A thread that runs for a few milliseconds without a stop while another
//! could run is probed (`watchdog.rs` sends the interrupt): its next
//! instructions are single-stepped, each decoded first. If it comes back
//! to where it was within `MAX_STEPS`, with every register (general,
//! flags, FPU/SSE/AVX) as before and no memory changed by the instructions
//! that write, it is in a loop that changes nothing: it will run that
//! same iteration for ever, until another thread changes memory. Where
//! in the loop the probe caught it is up to wall time, so it is stepped on
//! to the loop's lowest address, which is the same in every run, and it
//! yields there: an event of the world like any other, with no hazard.
//! Anything else (it computes, it writes, it reaches a syscall or a sync
//! entry) ends the probe and the thread goes on untouched; a stop that the
//! stepping met is handled as if the thread had run to it freely.

use crate::ctx::Ctx;
use crate::insn::{decode, reg};
use crate::sys::{self, Regs};
use crate::task::Resume;
use crate::watchdog::Mark;
use iced_x86::{Code, FlowControl, InstructionInfoFactory, OpAccess};
use libc::pid_t;

/// Instructions a loop iteration may have.
const MAX_STEPS: u32 = 64;

/// How a probe step ended.
enum Step {
    /// Stepped; the new instruction pointer.
    At(u64),
    /// The probe is over; the thread is stopped where it was, untouched.
    Not,
    /// Another stop came (a syscall, a signal, a death): the caller's.
    Other(i32),
}

/// How a probe ended.
pub(super) enum Verdict {
    /// A spin: the thread stands at its loop's lowest address.
    Spin,
    /// Not a spin; the thread is stopped, to be resumed as it was.
    Not,
    /// Another stop came first (for the caller to handle).
    Other(i32),
}

/// The registers a loop iteration must leave as they were (flags without
/// the trap and resume bits the stepping sets).
fn same(a: &Regs, b: &Regs) -> bool {
    let f = |r: &Regs| r.eflags & !0x10100;
    (
        a.rax, a.rbx, a.rcx, a.rdx, a.rsi, a.rdi, a.rbp, a.rsp, a.r8, a.r9,
    ) == (
        b.rax, b.rbx, b.rcx, b.rdx, b.rsi, b.rdi, b.rbp, b.rsp, b.r8, b.r9,
    ) && (
        a.r10, a.r11, a.r12, a.r13, a.r14, a.r15, a.rip, a.fs_base, a.gs_base,
    ) == (
        b.r10, b.r11, b.r12, b.r13, b.r14, b.r15, b.rip, b.fs_base, b.gs_base,
    ) && f(a) == f(b)
}

impl Ctx {
    /// The probe's interrupt stopped `tid` (running, in user space): spin
    /// or not. `mark` is its stretch's start, kept while it computes.
    pub(super) fn spin_probe(&mut self, tid: pid_t, mark: Mark) {
        match self.pure_loop(tid) {
            Verdict::Spin => {
                let Some(vt) = self.threads.get(&tid).map(|t| t.vt) else {
                    return;
                };
                self.stats.spin_points += 1;
                let rip = sys::get_regs(tid).map_or(0, |r| r.rip);
                self.world.tick(vt);
                let t = self.world.clock.elapsed();
                if let Some(tr) = self.trace.as_mut() {
                    tr.spin_point(t, vt, rip);
                }
                self.world.yielded(vt);
                self.yield_running(tid, Resume::Cont(0));
                self.spun(tid);
            }
            Verdict::Not => {
                self.watch.resumed_at = mark;
                // Not `cont`: publishing the clock would move the time
                // stubs' limit, which must depend on events only.
                let _ = sys::cont(tid, 0);
            }
            // As if the thread had run to it freely.
            Verdict::Other(st) => self.on_stop(tid, st),
        }
    }

    pub(super) fn pure_loop(&mut self, tid: pid_t) -> Verdict {
        // Caught inside a syscall (to be restarted): not a spin, and a step
        // would run the call (which may block).
        if crate::handlers::process::was_in_syscall(tid) {
            return Verdict::Not;
        }
        let (Ok(r0), Ok(x0)) = (sys::get_regs(tid), sys::get_xstate(tid)) else {
            return Verdict::Not;
        };
        if self
            .threads
            .get(&tid)
            .is_some_and(|t| self.procs[t.proc as usize].patch.is_ours(r0.rip))
        {
            return Verdict::Not;
        }
        let mut low = r0.rip;
        let mut n = 0;
        loop {
            match self.probe_step(tid) {
                Step::At(rip) => {
                    n += 1;
                    low = low.min(rip);
                    if rip == r0.rip {
                        break;
                    }
                    if n >= MAX_STEPS {
                        return Verdict::Not;
                    }
                }
                Step::Not => return Verdict::Not,
                Step::Other(st) => return Verdict::Other(st),
            }
        }
        let (Ok(r1), Ok(x1)) = (sys::get_regs(tid), sys::get_xstate(tid)) else {
            return Verdict::Not;
        };
        if !same(&r0, &r1) || x0 != x1 {
            return Verdict::Not;
        }
        // On to the loop's lowest address: the same point in every run.
        let mut rip = r1.rip;
        for _ in 0..n {
            if rip == low {
                return Verdict::Spin;
            }
            match self.probe_step(tid) {
                Step::At(r) => rip = r,
                Step::Not => return Verdict::Not,
                Step::Other(st) => return Verdict::Other(st),
            }
        }
        if rip == low {
            Verdict::Spin
        } else {
            Verdict::Not
        }
    }

    /// Step one instruction that neither leaves user space nor changes
    /// memory.
    fn probe_step(&mut self, tid: pid_t) -> Step {
        let Ok(r) = sys::get_regs(tid) else {
            return Step::Not;
        };
        if crate::syncpoints::is_site(self, tid, r.rip) {
            return Step::Not;
        }
        let Some(insn) = decode(tid, r.rip) else {
            return Step::Not;
        };
        let leaves = matches!(insn.code(), Code::Syscall | Code::Sysenter)
            || matches!(
                insn.flow_control(),
                FlowControl::Interrupt | FlowControl::Exception
            )
            || insn.has_rep_prefix()
            || insn.has_repne_prefix()
            || insn.is_string_instruction();
        if leaves {
            return Step::Not;
        }
        let mut writes: Vec<(u64, Vec<u8>)> = Vec::new();
        let mut info = InstructionInfoFactory::new();
        for m in info.info(&insn).used_memory() {
            let w = matches!(
                m.access(),
                OpAccess::Write
                    | OpAccess::CondWrite
                    | OpAccess::ReadWrite
                    | OpAccess::ReadCondWrite
            );
            if !w {
                continue;
            }
            let size = m.memory_size().size();
            let Some(addr) = m.virtual_address(0, |x, _, _| reg(&r, x)) else {
                return Step::Not;
            };
            let mut before = vec![0u8; size];
            if size == 0 || size > 64 || sys::read_mem(tid, addr, &mut before).is_err() {
                return Step::Not;
            }
            writes.push((addr, before));
        }
        crate::datapoints::before_step(self, tid);
        // Not `step`: as in `spin_probe`, the clock page stays as it is.
        if sys::singlestep(tid).is_err() {
            return Step::Not;
        }
        let Some(st) = self.wait_stop(tid) else {
            return Step::Not;
        };
        let stepped =
            libc::WIFSTOPPED(st) && libc::WSTOPSIG(st) == libc::SIGTRAP && (st >> 16) == 0;
        if !stepped || crate::datapoints::fired(self, tid) {
            return Step::Other(st);
        }
        for (addr, before) in &writes {
            let mut after = vec![0u8; before.len()];
            if sys::read_mem(tid, *addr, &mut after).is_err() || after != *before {
                return Step::Not;
            }
        }
        match sys::get_regs(tid) {
            Ok(r) => Step::At(r.rip),
            Err(_) => Step::Not,
        }
    }
}
