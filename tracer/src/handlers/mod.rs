#![allow(non_upper_case_globals)]
//! Syscall handlers, one module per family (in the manner of gVisor's
//! `sys_*.go`): a reader asking "what does detrun do with X?" finds one place.
//!
//! [`dispatch`] runs at a seccomp stop of the running thread. Each handler
//! answers with an [`Out`]: emulate a result, let the call run (possibly with
//! changed arguments, possibly with an exit stop to look at the result), or
//! park the thread in the world.

pub mod exec;
pub mod fs;
pub mod futex;
pub mod io;
pub mod misc;
pub mod net;
pub mod process;
pub mod procfs;
pub mod signal;
pub mod time;
pub mod vpid;

/// Syscall numbers used by the handlers (a glob of libc would shadow our names).
pub mod nr {
    pub use libc::{
        SYS_accept, SYS_accept4, SYS_alarm, SYS_arch_prctl, SYS_bind, SYS_bpf, SYS_clock_getres,
        SYS_clock_gettime, SYS_clock_nanosleep, SYS_clone, SYS_clone3, SYS_connect,
        SYS_epoll_pwait, SYS_epoll_pwait2, SYS_epoll_wait, SYS_exit, SYS_exit_group, SYS_fcntl,
        SYS_flock, SYS_fork, SYS_fstat, SYS_futex_waitv, SYS_getcpu, SYS_getdents64, SYS_getitimer,
        SYS_getpeername, SYS_getrandom, SYS_getrusage, SYS_getsockname, SYS_getsockopt,
        SYS_gettimeofday, SYS_io_uring_enter, SYS_io_uring_register, SYS_io_uring_setup, SYS_kill,
        SYS_listen, SYS_lstat, SYS_nanosleep, SYS_newfstatat, SYS_open, SYS_pause,
        SYS_perf_event_open, SYS_personality, SYS_pidfd_send_signal, SYS_poll, SYS_ppoll,
        SYS_prctl, SYS_pselect6, SYS_ptrace, SYS_read, SYS_readv, SYS_recvfrom, SYS_recvmmsg,
        SYS_recvmsg, SYS_rseq, SYS_rt_sigqueueinfo, SYS_rt_sigsuspend, SYS_rt_sigtimedwait,
        SYS_rt_tgsigqueueinfo, SYS_sched_getaffinity, SYS_sched_setaffinity, SYS_sched_yield,
        SYS_select, SYS_sendfile, SYS_sendmmsg, SYS_sendmsg, SYS_sendto, SYS_set_tid_address,
        SYS_setitimer, SYS_setsockopt, SYS_splice, SYS_stat, SYS_statx, SYS_sysinfo, SYS_tee,
        SYS_tgkill, SYS_time, SYS_timer_create, SYS_timer_delete, SYS_timer_getoverrun,
        SYS_timer_gettime, SYS_timer_settime, SYS_times, SYS_tkill, SYS_uname, SYS_userfaultfd,
        SYS_vfork, SYS_vmsplice, SYS_wait4, SYS_waitid, SYS_write, SYS_writev, ADDR_NO_RANDOMIZE,
        CLONE_CHILD_CLEARTID, CLONE_VFORK, CLONE_VM, F_GETLK, F_OFD_SETLK, F_OFD_SETLKW, F_SETLK,
        F_SETLKW, F_UNLCK, GRND_NONBLOCK, GRND_RANDOM, MSG_DONTWAIT, RUSAGE_CHILDREN, RUSAGE_SELF,
        RUSAGE_THREAD, SIGALRM, SIGCHLD, WNOHANG,
    };
}

use crate::ctx::Ctx;
use crate::sys::{self, Args, Regs};
use crate::table::{self, Family};
use crate::task::{Park, Post};
use detrun_scheduler::Wait;
use libc::pid_t;

pub const EFAULT: i64 = -(libc::EFAULT as i64);
pub const EINVAL: i64 = -(libc::EINVAL as i64);
pub const ENOSYS: i64 = -(libc::ENOSYS as i64);
pub const EPERM: i64 = -(libc::EPERM as i64);
pub const EAGAIN: i64 = -(libc::EAGAIN as i64);

/// A handler's answer.
pub enum Out {
    /// Skip the syscall; it returns this value.
    Ret(i64),
    /// Run the syscall as it is.
    Pass,
    /// Run it with these (changed) registers.
    PassWith(Regs),
    /// Run it (with these registers) and stop at its exit for `Post`.
    Exit(Regs, Post),
    /// Park the thread at this seccomp stop.
    Park(Park, Wait, Option<u64>),
    /// Return a value and give up the turn (sched_yield).
    Yield(i64),
    /// The handler resumed or parked the thread itself.
    Done,
    /// The thread was resumed to make the call again (not a second event).
    Again,
}

/// Handle the syscall the running thread `tid` stopped at.
pub fn dispatch(s: &mut Ctx, tid: pid_t, regs: Regs) {
    let a = Args::from_regs(&regs);
    if s.cfg.backtrace_turn == Some(s.world.decisions) && !s.backtrace_done {
        s.backtrace_done = true;
        let name = crate::sysnames::name(a.nr).unwrap_or("?");
        s.print_backtrace(tid, &format!("then calls {name}"));
    }
    s.pump_net();
    let out = route(s, tid, &a, regs);
    if s.trace.is_some() && !matches!(out, Out::Again) {
        trace_event(s, tid, &a, &out);
    }
    apply(s, tid, a.nr, out, regs);
}

fn route(s: &mut Ctx, tid: pid_t, a: &Args, regs: Regs) -> Out {
    use crate::handlers::nr::*;
    if s.copy.on {
        if let Some(o) = vpid::route(s, tid, a, regs) {
            return o;
        }
    }
    match table::family(a.nr) {
        Family::Time => time::handle(s, tid, a),
        Family::Futex => futex::handle(s, tid, a),
        Family::Socket if s.cfg.net_host => {
            // Only AF_INET/AF_INET6 trap: with --net=host they reach the
            // host's network. Say so.
            let what = if s.cfg.strict {
                "refused with EAFNOSUPPORT (--strict)"
            } else {
                "use the host's network (--net=host)"
            };
            s.stats
                .hazard("network", format!("AF_INET/AF_INET6 sockets {what}"));
            if s.cfg.strict {
                Out::Ret(-(libc::EAFNOSUPPORT as i64))
            } else {
                Out::Pass
            }
        }
        Family::Socket => net::socket(s, a, regs),
        Family::SockSetup => net::intercept(s, tid, a, regs).unwrap_or(Out::Pass),
        Family::Open => {
            let flags = a.a[if a.nr == SYS_open { 1 } else { 2 }] as i32;
            let writes =
                flags & (libc::O_CREAT | libc::O_TRUNC | libc::O_WRONLY | libc::O_RDWR) != 0;
            match procfs::handle(s, tid, a, regs) {
                Out::Pass if writes && fs::start_window_open(s) => Out::Exit(regs, Post::Touch),
                o => o,
            }
        }
        Family::Stat => fs::handle(s, tid, a, regs),
        Family::NetIo if net::may_concern(s, a.nr) => match net::intercept(s, tid, a, regs) {
            Some(o) => o,
            None => io::handle(s, tid, a, regs),
        },
        Family::NetIo | Family::Io => io::handle(s, tid, a, regs),
        Family::Process => process::handle(s, tid, a, regs),
        Family::Signal => signal::handle(s, tid, a, regs),
        Family::Misc => misc::handle(s, tid, a, regs),
        // JoinNet calls that needed no join, and calls with no handler.
        Family::JoinNet | Family::None | Family::Unknown => misc::unknown(s, a),
    }
}

fn trace_event(s: &mut Ctx, tid: pid_t, a: &Args, out: &Out) {
    let Some(vt) = s.threads.get(&tid).map(|t| t.vt) else {
        return;
    };
    let result = match out {
        // Copy mode answers what the base run passes to the kernel: the
        // trace records the call as the base run would.
        _ if s.copy.on && vpid::EMULATED.contains(&a.nr) => None,
        Out::Ret(v) | Out::Yield(v) => Some(*v),
        _ => None,
    };
    let parked = match out {
        Out::Park(_, w, _) => Some(w.name()),
        _ => None,
    };
    let t = s.world.clock.elapsed();
    if let Some(tr) = s.trace.as_mut() {
        tr.syscall(t, vt, a, result, parked);
    }
}

/// Carry out a handler's answer. `regs` are the registers at the stop
/// (handlers that change them return them in the answer).
fn apply(s: &mut Ctx, tid: pid_t, nr: i64, out: Out, mut regs: Regs) {
    match out {
        Out::Ret(v) => {
            regs.orig_rax = u64::MAX;
            regs.rax = v as u64;
            let _ = sys::set_regs(tid, &regs);
            s.continue_running(tid);
        }
        Out::Pass => s.continue_running(tid),
        Out::PassWith(r) => {
            let _ = sys::set_regs(tid, &r);
            s.continue_running(tid);
        }
        Out::Exit(r, post) => {
            let _ = sys::set_regs(tid, &r);
            if let Some(t) = s.threads.get_mut(&tid) {
                t.post = post;
            }
            let _ = s.resume_syscall(tid, 0);
        }
        Out::Park(p, w, d) => s.park(tid, p, w, d, nr),
        Out::Yield(v) => {
            regs.orig_rax = u64::MAX;
            regs.rax = v as u64;
            let _ = sys::set_regs(tid, &regs);
            if let Some(vt) = s.threads.get(&tid).map(|t| t.vt) {
                s.world.yielded(vt);
            }
            s.yield_running(tid, crate::task::Resume::Cont(0));
        }
        Out::Done => {}
        Out::Again => {
            if let Some(t) = s.threads.get_mut(&tid) {
                t.again = true;
            }
        }
    }
}

/// At the syscall-exit stop that a handler asked for.
pub fn on_syscall_exit(s: &mut Ctx, tid: pid_t) {
    let post = match s.threads.get_mut(&tid) {
        Some(t) => std::mem::replace(&mut t.post, Post::None),
        None => return,
    };
    let Ok(regs) = sys::get_regs(tid) else { return };
    match post {
        Post::None => s.continue_running(tid),
        Post::Started => {
            // A process's first thread other than its own: arm it.
            if s.threads
                .get(&tid)
                .is_some_and(|t| s.world.threads_of(t.proc).len() > 1)
            {
                crate::syncpoints::arm(s, tid);
            }
            process::start_point(s, tid);
        }
        Post::Wait {
            opts_arg,
            orig,
            infop,
        } => process::wait_exit(s, tid, regs, opts_arg, orig, infop),
        Post::Kill { sig, target } => signal::kill_exit(s, tid, sig, target),
        Post::VWait { nr } => vpid::vwait_exit(s, tid, regs, nr),
        Post::LockPid { flock } => vpid::lock_pid_exit(s, tid, regs, flock),
        Post::SetRet {
            value,
            thread,
            start,
        } => {
            let mut r = regs;
            if (r.rax as i64) > 0 {
                r.rax = value as u64;
                let _ = sys::set_regs(tid, &r);
            }
            if thread {
                crate::syncpoints::arm(s, tid);
            }
            if start {
                process::start_point(s, tid);
            } else {
                s.continue_running(tid);
            }
        }
        Post::Stat { buf, statx, path } => fs::stat_exit(s, tid, regs, buf, statx, path),
        Post::Touch => {
            if (regs.rax as i64) >= 0 {
                fs::touch_fd(s, tid, regs.rax as i32);
            }
            s.continue_running(tid);
        }
        Post::RestoreArg { index, value } => {
            let mut r = regs;
            sys::set_arg(&mut r, index, value);
            let _ = sys::set_regs(tid, &r);
            s.continue_running(tid);
        }
        Post::MsgName { hdr, name } => {
            let _ = sys::write_u64(tid, hdr, name);
            if (regs.rax as i64) >= 0 {
                let _ = sys::write_u32(tid, hdr.wrapping_add(8), 0);
            }
            s.continue_running(tid);
        }
        Post::RestoreArgs(args) => {
            let mut r = regs;
            for (index, value) in args {
                sys::set_arg(&mut r, index, value);
            }
            let _ = sys::set_regs(tid, &r);
            s.continue_running(tid);
        }
        Post::Socket {
            proto,
            family,
            rdi,
            rdx,
        } => net::socket_exit(s, tid, regs, proto, family, rdi, rdx),
        Post::Accept {
            listener,
            addr,
            lenp,
            rsi,
            rdx,
        } => {
            let mut r = regs;
            r.rsi = rsi;
            r.rdx = rdx;
            net::accept_exit(s, tid, r, listener, addr, lenp);
            s.continue_running(tid);
        }
    }
}
