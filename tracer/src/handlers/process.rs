//! Processes and threads: clone/fork/vfork (auto-attached children join the
//! world in creation order), wait4/waitid (made non-blocking and retried
//! when a child changes state), thread exit, and ptrace (refused: a tracee
//! cannot trace).

use super::{Out, EFAULT, EPERM};
use crate::ctx::Ctx;
use crate::sys::{self, Args, Regs};
use crate::task::{Park, Post, Resume};
use detrun_scheduler::Wait;
use libc::pid_t;

pub use crate::sys::{ns_id, ns_ids, ns_tid};

const CLONE_UNTRACED: u64 = 0x0080_0000;

/// At an interrupt stop: was the thread inside a syscall (which the kernel
/// will restart when it resumes)?
pub fn was_in_syscall(tid: pid_t) -> bool {
    sys::get_regs(tid).is_ok_and(|r| {
        let rax = r.rax as i64;
        (r.orig_rax as i64) >= 0 && (-516..=-512).contains(&rax)
    })
}

pub fn handle(s: &mut Ctx, tid: pid_t, a: &Args, mut regs: Regs) -> Out {
    use crate::handlers::nr::*;
    let x = a.a;
    match a.nr {
        SYS_clone => {
            let flags = x[0];
            let ctid = if flags & CLONE_CHILD_CLEARTID as u64 != 0 {
                x[3]
            } else {
                0
            };
            if let Some(t) = s.threads.get_mut(&tid) {
                t.pending_clone = Some((flags, ctid));
                // Where the kernel writes the new TID (copy mode rewrites it).
                t.settid = (x[2], x[3]);
            }
            if flags & CLONE_UNTRACED != 0 {
                regs.rdi &= !CLONE_UNTRACED;
                return Out::PassWith(regs);
            }
            Out::Pass
        }
        SYS_clone3 => {
            let mut b = [0u8; 40];
            if sys::read_mem(tid, x[0], &mut b).is_err() {
                return Out::Ret(EFAULT);
            }
            let word = |i: usize| u64::from_ne_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
            let flags = word(0);
            let child_tid = word(16);
            let exit_signal = word(32) & 0xff;
            let ctid = if flags & CLONE_CHILD_CLEARTID as u64 != 0 {
                child_tid
            } else {
                0
            };
            if let Some(t) = s.threads.get_mut(&tid) {
                // The exit signal travels in the flags' low byte, as for clone.
                t.pending_clone = Some((flags | exit_signal, ctid));
                t.settid = (word(24), child_tid);
            }
            if flags & CLONE_UNTRACED != 0
                && sys::write_u64(tid, x[0], flags & !CLONE_UNTRACED).is_err()
            {
                return Out::Ret(EFAULT);
            }
            Out::Pass
        }
        SYS_fork | SYS_vfork => {
            let flags = if a.nr == SYS_vfork {
                (CLONE_VFORK | CLONE_VM) as u64
            } else {
                0
            } | SIGCHLD as u64;
            if let Some(t) = s.threads.get_mut(&tid) {
                t.pending_clone = Some((flags, 0));
                t.settid = (0, 0);
            }
            Out::Pass
        }
        SYS_set_tid_address => {
            if let Some(t) = s.threads.get_mut(&tid) {
                t.clear_tid = x[0];
            }
            Out::Pass
        }
        SYS_exit => Out::Pass,
        SYS_exit_group => {
            if let Some(p) = s.threads.get(&tid).map(|t| t.proc) {
                s.procs[p as usize].group_exit = true;
            }
            Out::Pass
        }
        SYS_wait4 | SYS_waitid => {
            let opts_arg = if a.nr == SYS_wait4 { 2 } else { 3 };
            let orig = x[opts_arg];
            if orig & WNOHANG as u64 != 0 && !s.copy.track_ids {
                return Out::Pass;
            }
            sys::set_arg(&mut regs, opts_arg, orig | WNOHANG as u64);
            let infop = if a.nr == SYS_waitid { x[2] } else { 0 };
            Out::Exit(
                regs,
                Post::Wait {
                    opts_arg,
                    orig,
                    infop,
                },
            )
        }
        SYS_ptrace => {
            s.stats
                .hazard("refused", "ptrace by a guest refused with EPERM");
            Out::Ret(EPERM)
        }
        _ => Out::Pass,
    }
}

/// Exit stop of a wait made non-blocking: park if nothing was ready.
pub fn wait_exit(s: &mut Ctx, tid: pid_t, regs: Regs, opts_arg: usize, orig: u64, infop: u64) {
    let r = regs.rax as i64;
    let nothing = if regs.orig_rax as i64 == libc::SYS_waitid {
        r == 0 && infop != 0 && sys::read_u32(tid, infop + 16).is_ok_and(|pid| pid == 0)
    } else {
        r == 0
    };
    let mut orig_regs = regs;
    sys::set_arg(&mut orig_regs, opts_arg, orig);
    if !nothing && r >= 0 && s.copy.track_ids {
        // Reaped (unless WNOWAIT): a checkpoint must not offer it again.
        let pid = if regs.orig_rax as i64 == libc::SYS_waitid {
            sys::read_u32(tid, infop + 16).map_or(0, |p| p as pid_t)
        } else {
            r as pid_t
        };
        let nowait = regs.orig_rax as i64 == libc::SYS_waitid && orig & 0x0100_0000 != 0;
        if let Some(p) = s.proc_by_vpid(pid).filter(|_| !nowait) {
            s.procs[p as usize].reaped = true;
        }
    }
    // A WNOHANG call (followed to its exit only to see what it reaped)
    // returns as it is.
    if nothing && orig & libc::WNOHANG as u64 == 0 {
        if let Some(t) = s.threads.get_mut(&tid) {
            t.saved = Some(orig_regs);
        }
        s.park(tid, Park::Exit, Wait::Child, None, regs.orig_rax as i64);
        return;
    }
    // Restore the caller's options register (syscalls preserve it).
    let _ = sys::set_regs(tid, &orig_regs);
    s.continue_running(tid);
}

/// PTRACE_EVENT_CLONE/FORK/VFORK of the running thread `tid`.
pub fn on_clone_event(s: &mut Ctx, tid: pid_t, event: i32) {
    let Ok(child) = sys::event_msg(tid).map(|m| m as pid_t) else {
        let _ = s.cont(tid, 0);
        return;
    };
    let Some(parent) = s.threads.get_mut(&tid) else {
        return;
    };
    let (flags, ctid) = parent.pending_clone.take().unwrap_or((0, 0));
    let (ptid_addr, ctid_addr) = std::mem::take(&mut parent.settid);
    let pproc = parent.proc;
    let is_thread = flags & libc::CLONE_THREAD as u64 != 0;
    let proc = if is_thread {
        pproc
    } else {
        let p = s.add_proc(child, Some(pproc));
        if flags & libc::CLONE_VM as u64 != 0 {
            s.procs[p as usize].space = s.procs[pproc as usize].space;
        }
        s.procs[p as usize].exit_signal = (flags & 0xff) as i32;
        p
    };
    s.add_thread(child, proc, ctid);
    let vchild = if s.copy.on {
        Some(copy_mode_ids(
            s, tid, child, proc, pproc, is_thread, flags, ptid_addr, ctid_addr,
        ))
    } else {
        None
    };
    // Collect the child's first stop now so that it can be resumed whenever
    // the world picks it.
    if s.early_take(child).is_none() {
        loop {
            match sys::wait_pid(child, 0) {
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Ok((_, st)) if libc::WIFEXITED(st) || libc::WIFSIGNALED(st) => {
                    s.death(child, st);
                    break;
                }
                _ => break,
            }
        }
    }
    if let Some(v) = vchild {
        if let Some(t) = s.threads.get_mut(&tid) {
            t.post = Post::SetRet {
                value: v,
                thread: is_thread,
                start: event != libc::PTRACE_EVENT_VFORK,
            };
        }
    }
    if event == libc::PTRACE_EVENT_VFORK {
        s.procs[proc as usize].vfork_parent = Some(tid);
        // The parent waits in the kernel until the child execs or exits;
        // it does not hold the turn meanwhile.
        s.park(tid, Park::Vfork, Wait::Vfork, None, libc::SYS_vfork);
        let _ = s.cont(tid, 0);
        return;
    }
    if vchild.is_some() {
        // On to the exit stop, where the return value becomes the guest PID.
        let _ = s.resume_syscall(tid, 0);
        return;
    }
    if s.cfg.sync_points {
        // Thread start's point is taken at the exit stop, as in copy mode
        // (a point's first step from inside clone would only finish the
        // call), and arming injects calls, which it cannot do inside clone.
        if let Some(t) = s.threads.get_mut(&tid) {
            t.post = Post::Started;
        }
        let _ = s.resume_syscall(tid, 0);
        return;
    }
    start_point(s, tid);
}

/// `tid` just created a thread or process: the world decides whether the
/// new one runs before its creator's next instruction.
pub fn start_point(s: &mut Ctx, tid: pid_t) {
    let Some(vt) = s.threads.get(&tid).map(|t| t.vt) else {
        return;
    };
    if s.world.thread_started(vt) {
        s.yield_running(tid, Resume::Cont(0));
    } else {
        s.continue_running(tid);
    }
}

/// Copy mode: the new thread or process gets the next guest PID, written
/// where the kernel wrote the real one.
#[allow(clippy::too_many_arguments)]
fn copy_mode_ids(
    s: &mut Ctx,
    parent: pid_t,
    child: pid_t,
    proc: detrun_scheduler::ProcId,
    pproc: detrun_scheduler::ProcId,
    is_thread: bool,
    flags: u64,
    ptid_addr: u64,
    ctid_addr: u64,
) -> pid_t {
    let v = s.copy.next_vpid;
    s.copy.next_vpid += 1;
    let ns = ns_id(child);
    if let Some(t) = s.threads.get_mut(&child) {
        t.vtid = v;
        t.nstid = ns;
    }
    if !is_thread {
        let (pg, sid) = (s.procs[pproc as usize].vpgid, s.procs[pproc as usize].vsid);
        let pi = &mut s.procs[proc as usize];
        pi.vpid = v;
        pi.nspid = ns;
        pi.vpgid = pg;
        pi.vsid = sid;
        pi.copy_filter = true;
        pi.notify_kernel = flags & libc::CLONE_PARENT as u64 == 0;
    }
    if flags & libc::CLONE_PARENT_SETTID as u64 != 0 && ptid_addr != 0 {
        let _ = sys::write_u32(parent, ptid_addr, v as u32);
    }
    if flags & libc::CLONE_CHILD_SETTID as u64 != 0 && ctid_addr != 0 {
        let _ = sys::write_u32(child, ctid_addr, v as u32);
    }
    v
}
