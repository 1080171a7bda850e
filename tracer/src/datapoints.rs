//! Shared globals as scheduling points: a check-then-act on a plain global
//! (`k = n; ... n = k + 1`) has no syscall, no sync op and no loop in its
//! window, so no other point lands there.
//!
//! The scan of the program's code (`syncpoints::scan_of`) lists the globals
//! some instruction writes through a RIP-relative operand. When a process
//! gets its second thread, up to four of them, drawn from the seed
//! (`World::pick_watches`), are watched for reads and writes with the CPU's debug
//! registers (they need no PMU, and work in these VMs). An access traps
//! after the instruction: a point right after the read of a check-then-act
//! is a point inside its window. A global gives `WATCH_HITS` points per
//! process, then its watch is dropped (a hot one would cost a stop each
//! time). Debug registers are per thread and not inherited: a thread gets
//! its process's watches when it next gets the turn (`sync_thread`).

use crate::ctx::Ctx;
use crate::sys::{self, Regs};
use libc::pid_t;

/// Debug registers that watch (DR0-DR3).
pub const SLOTS: usize = 4;

/// Points one watched global gives per process before it is dropped.
const WATCH_HITS: u32 = 128;

/// si_code of a SIGTRAP from a hardware breakpoint, and from a single
/// step (which wins when a stepped instruction also fired a watch).
const TRAP_HWBKPT: i32 = 4;
const TRAP_TRACE: i32 = 2;

/// One watched global.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Watch {
    /// Aligned to `len`.
    pub addr: u64,
    pub len: u8,
    pub hits: u32,
}

/// Watch up to `SLOTS` of the process's written globals, drawn from the
/// seed; `tid` (stopped) gets them at once.
pub fn choose(s: &mut Ctx, tid: pid_t, p: usize, globals: &[(u64, u8)]) {
    if !s.cfg.data_points || globals.is_empty() {
        return;
    }
    let picked = s
        .world
        .pick_watches(p as detrun_scheduler::ProcId, globals.len(), SLOTS);
    let w: Vec<Watch> = picked
        .into_iter()
        .map(|i| {
            let (addr, len) = globals[i];
            Watch {
                addr: addr & !(u64::from(len) - 1),
                len,
                hits: 0,
            }
        })
        .collect();
    s.stats.data_watches += w.len() as u64;
    set(s, p, w);
    sync_thread(s, tid);
}

/// Make `w` the process's watches (a new generation).
fn set(s: &mut Ctx, p: usize, w: Vec<Watch>) {
    s.host.watch_gen += 1;
    let sites = &mut s.procs[p].patch.sync;
    sites.watch = w;
    sites.watch_gen = s.host.watch_gen;
}

/// Give the stopped `tid` its process's watches, if it lacks them.
pub fn sync_thread(s: &mut Ctx, tid: pid_t) {
    let Some(t) = s.threads.get(&tid) else {
        return;
    };
    let sites = &s.procs[t.proc as usize].patch.sync;
    if t.watch_gen == sites.watch_gen {
        return;
    }
    let gen = sites.watch_gen;
    let w: Vec<(u64, u8)> = sites.watch.iter().map(|w| (w.addr, w.len)).collect();
    match sys::set_watches(tid, &w) {
        Ok(()) => {
            if let Some(t) = s.threads.get_mut(&tid) {
                t.watch_gen = gen;
            }
        }
        Err(e) if s.cfg.debug => eprintln!("detrun-debug: watches of {tid}: {e}"),
        Err(_) => {}
    }
}

/// Is this SIGTRAP stop (siginfo code `si_code`) a watch's? Its slot.
pub fn hit(s: &Ctx, tid: pid_t, si_code: i32) -> Option<usize> {
    if si_code != TRAP_HWBKPT && si_code != TRAP_TRACE {
        return None;
    }
    let slot = fired_slot(s, tid);
    if slot.is_some() {
        sys::clear_dr6(tid);
    }
    slot
}

/// The watch slot DR6 says fired, if any (of the process's watches).
fn fired_slot(s: &Ctx, tid: pid_t) -> Option<usize> {
    let t = s.threads.get(&tid)?;
    let n = s.procs[t.proc as usize].patch.sync.watch.len();
    if n == 0 {
        return None;
    }
    let dr6 = sys::debugreg(tid, 6).ok()?;
    (0..n).find(|&i| dr6 & (1 << i) != 0)
}

/// Before a probe's step: forget what fired before (an instruction-level
/// point's steps leave DR6 as they found it), so that `fired` sees only
/// this step.
pub fn before_step(s: &Ctx, tid: pid_t) {
    let watched = s
        .threads
        .get(&tid)
        .is_some_and(|t| !s.procs[t.proc as usize].patch.sync.watch.is_empty());
    if watched {
        sys::clear_dr6(tid);
    }
}

/// Did the instruction `tid` was just stepped over fire a watch? A probe
/// (wall time chooses when) must then end at the stop a free run would
/// have made there, or the point would be lost in some runs only.
pub fn fired(s: &Ctx, tid: pid_t) -> bool {
    fired_slot(s, tid).is_some()
}

/// Is this SIGTRAP stop of `tid` a watch's (for a point being stepped)?
pub fn is_hit(s: &Ctx, tid: pid_t) -> bool {
    sys::get_siginfo(tid).is_ok_and(|si| hit(s, tid, si.si_code).is_some())
}

/// `tid` accessed the global of `slot`: a scheduling point.
pub fn on_hit(s: &mut Ctx, tid: pid_t, regs: &Regs, slot: usize) {
    let Some(p) = s.threads.get(&tid).map(|t| t.proc as usize) else {
        return;
    };
    let Some(w) = s.procs[p].patch.sync.watch.get_mut(slot) else {
        return;
    };
    w.hits += 1;
    let addr = w.addr;
    if w.hits >= WATCH_HITS {
        let mut rest = s.procs[p].patch.sync.watch.clone();
        rest.remove(slot);
        set(s, p, rest);
        sync_thread(s, tid);
    }
    s.stats.data_points += 1;
    if s.coverage.is_some() {
        let vt = s.threads.get(&tid).map_or(0, |t| t.vt);
        let space = s.procs[p].space;
        if let Some(c) = s.coverage.as_mut() {
            c.event(space, addr, vt, u64::MAX, regs.rip);
        }
    }
    crate::syncpoints::point(s, tid, "data", addr, true);
}
