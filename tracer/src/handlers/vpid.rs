//! Copy mode (see `checkpoint`): the process identities of the original run.
//!
//! A process copied from a checkpoint has a new kernel PID and is the kernel
//! child of the frozen process it was forked from, not of its guest parent.
//! So identity calls are answered from the virtual table (`ProcInfo::vpid`,
//! `Tracee::vtid`), PIDs in `kill`-like calls are translated to the copies'
//! real ones, and `wait4`/`waitid` are answered entirely from the deaths the
//! supervisor has seen. New processes and threads get the PIDs the kernel
//! would have given them in the original run (the next ones in order).
//!
//! The identity calls are trapped only by copy mode's filter; they are not
//! events of the world (no time passes, no scheduling point), so a branch
//! from a checkpoint decides exactly as the same branch run from scratch.

use super::Out;
use crate::ctx::Ctx;
use crate::sys::{self, Args, Regs};
use crate::task::{Park, Post};
use detrun_scheduler::{ProcId, Wait};
use libc::pid_t;

/// Trapped by the base filter and passed to the kernel there, answered
/// from the virtual table in copy mode.
pub const EMULATED: &[i64] = &[
    libc::SYS_wait4,
    libc::SYS_waitid,
    libc::SYS_kill,
    libc::SYS_tkill,
    libc::SYS_tgkill,
    libc::SYS_rt_sigqueueinfo,
    libc::SYS_rt_tgsigqueueinfo,
    libc::SYS_pidfd_open,
];

const ESRCH: i64 = -(libc::ESRCH as i64);
const ECHILD: i64 = -(libc::ECHILD as i64);
const EINVAL: i64 = -(libc::EINVAL as i64);
const EPERM: i64 = -(libc::EPERM as i64);

impl Ctx {
    /// The process with guest PID `vpid` that is not yet reaped.
    pub fn proc_by_vpid(&self, vpid: pid_t) -> Option<ProcId> {
        self.procs
            .iter()
            .position(|p| p.vpid == vpid && !p.reaped && (p.alive || p.status.is_some()))
            .map(|i| i as ProcId)
    }

    /// The live thread with guest TID `vtid`: (host tid, namespace tid).
    fn thread_by_vtid(&self, vtid: pid_t) -> Option<(pid_t, pid_t)> {
        self.threads
            .values()
            .find(|t| t.vtid == vtid)
            .map(|t| (t.tid, t.nstid))
    }

    fn vparent(&self, p: ProcId) -> pid_t {
        match self.procs[p as usize].parent {
            Some(pp) if self.procs[pp as usize].alive => self.procs[pp as usize].vpid,
            _ => 1,
        }
    }
}

/// An identity call in copy mode: answer it and continue, without an event.
/// Returns false when `regs` is not one.
pub fn invisible(s: &mut Ctx, tid: pid_t, regs: &Regs) -> bool {
    let nr = regs.orig_rax as i64;
    if nr == libc::SYS_fcntl && matches!(regs.rsi as i32, libc::F_GETLK | libc::F_OFD_GETLK) {
        // Run it; the holder's kernel PID is translated at its exit.
        if let Some(t) = s.threads.get_mut(&tid) {
            t.post = Post::LockPid { flock: regs.rdx };
        }
        let _ = s.resume_syscall(tid, 0);
        return true;
    }
    if !answer(s, tid, regs) {
        return false;
    }
    let _ = s.cont(tid, 0);
    true
}

/// Answer an identity call that the base filter allows and copy mode
/// traps (the thread stays at its seccomp stop, the call skipped). False
/// when `regs` is not one.
pub fn answer(s: &mut Ctx, tid: pid_t, regs: &Regs) -> bool {
    let nr = regs.orig_rax as i64;
    if !crate::table::copy_only(nr) {
        return false;
    }
    let Some(t) = s.threads.get(&tid) else {
        return false;
    };
    let (p, vtid) = (t.proc, t.vtid);
    let me = &s.procs[p as usize];
    let arg = regs.rdi as i32;
    let target = |s: &Ctx, pid: i32| -> Option<ProcId> {
        if pid == 0 {
            Some(p)
        } else {
            s.proc_by_vpid(pid)
        }
    };
    let r: i64 = match nr {
        libc::SYS_getpid => me.vpid as i64,
        libc::SYS_gettid => vtid as i64,
        libc::SYS_getppid => s.vparent(p) as i64,
        libc::SYS_getpgrp => me.vpgid as i64,
        libc::SYS_getpgid => target(s, arg).map_or(ESRCH, |q| s.procs[q as usize].vpgid as i64),
        libc::SYS_getsid => target(s, arg).map_or(ESRCH, |q| s.procs[q as usize].vsid as i64),
        libc::SYS_setpgid => match target(s, arg) {
            Some(q) => {
                let pg = regs.rsi as i32;
                let pg = if pg == 0 {
                    s.procs[q as usize].vpid
                } else {
                    pg
                };
                s.procs[q as usize].vpgid = pg;
                0
            }
            None => ESRCH,
        },
        libc::SYS_setsid => {
            if me.vpgid == me.vpid {
                EPERM
            } else {
                let v = me.vpid;
                let m = &mut s.procs[p as usize];
                m.vpgid = v;
                m.vsid = v;
                v as i64
            }
        }
        _ => return false,
    };
    let mut r2 = *regs;
    r2.orig_rax = u64::MAX;
    r2.rax = r as u64;
    sys::set_regs(tid, &r2).is_ok()
}

/// Copy mode's translation of PID-taking calls the base filter traps.
pub fn route(s: &mut Ctx, tid: pid_t, a: &Args, regs: Regs) -> Option<Out> {
    let x = a.a;
    let me = s.threads.get(&tid)?.proc;
    let proc_arg = |s: &Ctx, v: u64| -> Result<pid_t, i64> {
        let pid = v as i32;
        match s.proc_by_vpid(pid) {
            Some(q) if s.procs[q as usize].alive => Ok(s.procs[q as usize].nspid),
            Some(_) => Err(0), // a zombie: signals are accepted and lost
            None => Err(ESRCH),
        }
    };
    match a.nr {
        libc::SYS_kill | libc::SYS_rt_sigqueueinfo => {
            let pid = x[0] as i32;
            if pid <= 0 {
                return Some(group_kill(s, me, pid, x[1] as i32));
            }
            match proc_arg(s, x[0]) {
                Ok(n) => Some(translated(s, tid, a, regs, &[(0, n)])),
                Err(e) => Some(Out::Ret(e)),
            }
        }
        libc::SYS_tkill => match s.thread_by_vtid(x[0] as i32) {
            Some((_, ns)) => Some(translated(s, tid, a, regs, &[(0, ns)])),
            None => Some(Out::Ret(ESRCH)),
        },
        libc::SYS_tgkill | libc::SYS_rt_tgsigqueueinfo => {
            let tg = match proc_arg(s, x[0]) {
                Ok(n) => n,
                Err(e) => return Some(Out::Ret(e)),
            };
            match s.thread_by_vtid(x[1] as i32) {
                Some((_, ns)) => Some(translated(s, tid, a, regs, &[(0, tg), (1, ns)])),
                None => Some(Out::Ret(ESRCH)),
            }
        }
        libc::SYS_pidfd_open => match proc_arg(s, x[0]) {
            Ok(n) => {
                let mut r = regs;
                r.rdi = n as u64;
                Some(Out::Exit(
                    r,
                    Post::RestoreArg {
                        index: 0,
                        value: x[0],
                    },
                ))
            }
            Err(e) => Some(Out::Ret(if e == 0 { ESRCH } else { e })),
        },
        libc::SYS_wait4 | libc::SYS_waitid => Some(wait(s, tid, me, a, regs)),
        _ => None,
    }
}

/// Run the signal handler's logic on the call with PIDs translated.
fn translated(s: &mut Ctx, tid: pid_t, a: &Args, regs: Regs, subst: &[(usize, pid_t)]) -> Out {
    let mut r = regs;
    let mut b = *a;
    for &(i, v) in subst {
        sys::set_arg(&mut r, i, v as u64);
        b.a[i] = v as u64;
    }
    let _ = sys::set_regs(tid, &r);
    super::signal::handle(s, tid, &b, r)
}

/// kill(0 | -1 | -PGID): sent by the supervisor to each copy it concerns.
fn group_kill(s: &mut Ctx, me: ProcId, pid: i32, sig: i32) -> Out {
    let pg = match pid {
        0 => Some(s.procs[me as usize].vpgid),
        -1 => None,
        p => Some(-p),
    };
    let targets: Vec<pid_t> = s
        .procs
        .iter()
        .enumerate()
        .filter(|(i, p)| {
            p.alive
                && match pg {
                    Some(g) => p.vpgid == g,
                    None => *i != me as usize,
                }
        })
        .map(|(_, p)| p.tgid)
        .collect();
    if targets.is_empty() {
        return Out::Ret(ESRCH);
    }
    if sig != 0 {
        for t in targets {
            // SAFETY: signalling our own tracees.
            unsafe { libc::kill(t, sig) };
        }
        s.check_signals(None);
    }
    Out::Ret(0)
}

/// wait4(pid, status, options, rusage) and waitid(idtype, id, infop,
/// options, rusage), from the virtual process table.
fn wait(s: &mut Ctx, tid: pid_t, me: ProcId, a: &Args, regs: Regs) -> Out {
    let x = a.a;
    let is_waitid = a.nr == libc::SYS_waitid;
    let opts = if is_waitid { x[3] } else { x[2] } as i32;
    // Which children the call is about: by PID, by group, or any.
    let (want_pid, want_pg): (Option<pid_t>, Option<pid_t>) = if is_waitid {
        match x[0] as u32 {
            libc::P_ALL => (None, None),
            libc::P_PID => (Some(x[1] as i32), None),
            libc::P_PGID => (
                None,
                Some(if x[1] == 0 {
                    s.procs[me as usize].vpgid
                } else {
                    x[1] as i32
                }),
            ),
            _ => return Out::Ret(EINVAL),
        }
    } else {
        match x[0] as i32 {
            -1 => (None, None),
            0 => (None, Some(s.procs[me as usize].vpgid)),
            p if p > 0 => (Some(p), None),
            p => (None, Some(-p)),
        }
    };
    if is_waitid && opts & libc::WEXITED == 0 {
        // Stops and continues are not virtualized: nothing to report.
        return Out::Ret(EINVAL);
    }
    let kids: Vec<usize> = s
        .procs
        .iter()
        .enumerate()
        .filter(|(_, p)| {
            p.parent == Some(me)
                && !p.reaped
                && want_pid.is_none_or(|w| p.vpid == w)
                && want_pg.is_none_or(|g| p.vpgid == g)
        })
        .map(|(i, _)| i)
        .collect();
    if kids.is_empty() {
        return Out::Ret(ECHILD);
    }
    let dead = kids.iter().copied().find(|&i| s.procs[i].status.is_some());
    let Some(k) = dead else {
        if opts & libc::WNOHANG != 0 {
            if is_waitid && x[2] != 0 && sys::write_mem(tid, x[2], &[0u8; 128]).is_err() {
                return Out::Ret(super::EFAULT);
            }
            return Out::Ret(0);
        }
        // Skip the call, stop at its exit, and park there: woken, it is
        // issued again; interrupted, the kernel restarts or fails it.
        let mut r = regs;
        r.orig_rax = u64::MAX;
        return Out::Exit(r, Post::VWait { nr: a.nr });
    };
    let st = s.procs[k].status.unwrap_or(0);
    let vpid = s.procs[k].vpid;
    if is_waitid {
        if x[2] != 0 {
            let mut si = [0u8; 128];
            let (code, status) = if libc::WIFEXITED(st) {
                (libc::CLD_EXITED, libc::WEXITSTATUS(st))
            } else if libc::WCOREDUMP(st) {
                (libc::CLD_DUMPED, libc::WTERMSIG(st))
            } else {
                (libc::CLD_KILLED, libc::WTERMSIG(st))
            };
            si[0..4].copy_from_slice(&libc::SIGCHLD.to_ne_bytes());
            si[8..12].copy_from_slice(&code.to_ne_bytes());
            si[16..20].copy_from_slice(&vpid.to_ne_bytes());
            // SAFETY: getuid cannot fail.
            let uid = unsafe { libc::getuid() };
            si[20..24].copy_from_slice(&uid.to_ne_bytes());
            si[24..28].copy_from_slice(&status.to_ne_bytes());
            if sys::write_mem(tid, x[2], &si).is_err() {
                return Out::Ret(super::EFAULT);
            }
        }
    } else if x[1] != 0 && sys::write_u32(tid, x[1], st as u32).is_err() {
        // The kernel has reaped the child when it finds the pointer bad.
        s.procs[k].reaped = true;
        return Out::Ret(super::EFAULT);
    }
    let ru = if is_waitid { x[4] } else { x[3] };
    if ru != 0 {
        // Resource use is not virtualized per child: report none.
        let _ = sys::write_mem(tid, ru, &[0u8; std::mem::size_of::<libc::rusage>()]);
    }
    if !(is_waitid && opts & libc::WNOWAIT != 0) {
        s.procs[k].reaped = true;
    }
    Out::Ret(if is_waitid { 0 } else { vpid as i64 })
}

/// At the exit stop of a skipped wait: park until a child changes state.
pub fn vwait_exit(s: &mut Ctx, tid: pid_t, regs: Regs, nr: i64) {
    let mut saved = regs;
    saved.orig_rax = nr as u64;
    if let Some(t) = s.threads.get_mut(&tid) {
        t.saved = Some(saved);
    }
    s.park(tid, Park::Exit, Wait::Child, None, nr);
}

/// At a SIGCHLD delivery stop in copy mode: make the siginfo the one the
/// original run would have delivered (the child's guest PID, and for a
/// SIGCHLD detrun sent, the child's code and status).
pub fn fix_sigchld(s: &mut Ctx, tid: pid_t) {
    let Some(p) = s.threads.get(&tid).map(|t| t.proc) else {
        return;
    };
    let Ok(si) = sys::get_siginfo(tid) else {
        return;
    };
    // SAFETY: siginfo_t is 128 plain bytes.
    let mut b: [u8; 128] = unsafe { std::mem::transmute(si) };
    let word = |b: &[u8; 128], o: usize| i32::from_ne_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
    let (code, pid) = (word(&b, 8), word(&b, 16));
    let fields = if code == 0 && pid == 0 {
        s.procs[p as usize].chld_info.take()
    } else if (1..=6).contains(&code) {
        // From the kernel: the child's namespace PID becomes its guest PID.
        s.procs
            .iter()
            .find(|q| q.nspid == pid && q.vpid != 0)
            .map(|q| (q.vpid, code, word(&b, 24)))
    } else {
        None
    };
    let Some((vpid, code, status)) = fields else {
        return;
    };
    b[8..12].copy_from_slice(&code.to_ne_bytes());
    b[16..20].copy_from_slice(&vpid.to_ne_bytes());
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    b[20..24].copy_from_slice(&uid.to_ne_bytes());
    b[24..28].copy_from_slice(&status.to_ne_bytes());
    let _ = sys::set_siginfo(tid, &b);
}

/// At the exit of F_GETLK: the holder's namespace PID becomes its guest PID.
pub fn lock_pid_exit(s: &mut Ctx, tid: pid_t, regs: Regs, flock: u64) {
    if regs.rax == 0 {
        if let Ok(pid) = sys::read_u32(tid, flock.wrapping_add(24)) {
            let pid = pid as pid_t;
            if let Some(q) = s
                .procs
                .iter()
                .find(|q| q.alive && q.nspid == pid && pid > 0)
            {
                let _ = sys::write_u32(tid, flock.wrapping_add(24), q.vpid as u32);
            }
        }
    }
    // Invisible: not an event, the thread just goes on.
    let _ = s.cont(tid, 0);
}
