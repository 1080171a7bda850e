//! What the supervisor knows of each tracee thread and process, and the
//! states a thread's turn moves through (how it resumes, why it is parked,
//! what its syscall-exit stop must do).

use crate::sys::Regs;
use detrun_scheduler::{ProcId, Tid};
use libc::pid_t;
use std::os::fd::OwnedFd;

/// How to continue a stopped thread when it gets the turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resume {
    /// Its first stop: continue, suppressing the SIGSTOP.
    Initial,
    /// PTRACE_CONT with this signal (registers already set).
    Cont(i32),
    /// Handle the pending syscall (at a seccomp stop) again.
    Redo,
    /// At a syscall-exit stop: execute the syscall again from its start.
    Reissue,
    /// Make the pending syscall return this value.
    Return(i64),
    /// At a syscall-exit stop: return -ERESTARTSYS-like code so the kernel
    /// delivers the pending signal and restarts or fails the call.
    Interrupt(i64),
    /// At a seccomp stop with a deliverable signal pending: let the real
    /// (blocking) call run; the kernel returns at once.
    PassReal,
    /// Resume to the syscall's exit stop (its `Post` is set).
    Syscall,
}

/// Why a parked thread is parked, and how each kind of wake completes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Park {
    /// futex wait at a seccomp stop.
    Futex,
    /// A sleep: `rem` is where to write the remaining time on EINTR.
    Sleep { rem: u64, deadline: u64 },
    /// fd readiness at a seccomp stop: re-handle when woken.
    Io,
    /// poll/select/epoll_wait: re-handle; on timeout pass with a zero timeout.
    Poll,
    /// pause, sigsuspend, sigtimedwait: only a signal (or its timeout).
    Signal,
    /// At a syscall-exit stop with the registers to reissue the call.
    Exit,
    /// A vfork parent, resumed into the kernel until its child execs or exits.
    Vfork,
    /// Interrupted out of a syscall the filter let through but that blocked;
    /// retried whenever another thread has run.
    Kernel,
    /// A lock that was taken: re-handle whenever another thread has run.
    Retry,
}

/// Post-processing at a syscall-exit stop.
#[derive(Debug)]
pub enum Post {
    None,
    /// A new thread's creator at the exit of clone: arm the sync-op
    /// entries, then thread start's scheduling point.
    Started,
    /// wait4/waitid made non-blocking: `opts_arg` is the argument index of
    /// the options, `orig` their original value.
    Wait {
        opts_arg: usize,
        orig: u64,
        infop: u64,
    },
    /// A signal was sent: look for waiters it interrupts.
    Kill {
        sig: i32,
        target: i64,
    },
    /// A file opened for writing in the start's tick: note it as the run's.
    Touch,
    /// A stat call: rewrite the answer at `buf`.
    Stat {
        buf: u64,
        statx: bool,
        /// The path argument (0: fstat or none).
        path: u64,
    },
    /// Put the guest's original argument back (syscalls preserve registers).
    RestoreArg {
        index: usize,
        value: u64,
    },
    /// Two arguments to put back.
    RestoreArgs([(usize, u64); 2]),
    /// recvmsg on a TCP socket: put msg_name back, msg_namelen 0.
    MsgName {
        hdr: u64,
        name: u64,
    },
    /// socket(AF_INET*) ran as AF_UNIX: register it, restore rdi/rdx.
    Socket {
        proto: detrun_scheduler::net::Proto,
        family: detrun_scheduler::net::Family,
        rdi: u64,
        rdx: u64,
    },
    /// Copy mode: a wait that found nothing, skipped; park at its exit.
    VWait {
        nr: i64,
    },
    /// Copy mode: F_GETLK's `struct flock`, whose l_pid is translated.
    LockPid {
        flock: u64,
    },
    /// Copy mode: the call returns this (a child's guest PID) if it
    /// succeeded; for a clone that made a thread, the sync-op entries are
    /// armed then, as `Started` does; `start`: thread start's point is
    /// taken then (not for vfork, whose parent resumes when released).
    SetRet {
        value: i32,
        thread: bool,
        start: bool,
    },
    /// accept on a virtual listener: name the new socket's peer.
    Accept {
        listener: detrun_scheduler::net::SockId,
        addr: u64,
        lenp: u64,
        rsi: u64,
        rdx: u64,
    },
}

/// A write being continued across partial non-blocking steps.
#[derive(Clone, Copy, Debug)]
pub struct WriteCont {
    pub done: u64,
}

pub struct Tracee {
    pub tid: pid_t,
    pub vt: Tid,
    pub proc: ProcId,
    pub resume: Resume,
    pub park: Option<Park>,
    /// Registers of the original syscall while parked at an exit stop.
    pub saved: Option<Regs>,
    /// At a syscall-exit stop (rather than a seccomp stop).
    pub at_exit: bool,
    pub post: Post,
    pub pending_clone: Option<(u64, u64)>,
    /// clone's parent_tid and child_tid addresses (CLONE_*_SETTID).
    pub settid: (u64, u64),
    pub clear_tid: u64,
    pub wcont: Option<WriteCont>,
    /// Stolen descriptors (and poll events) whose readiness wakes this thread.
    pub io: Vec<(OwnedFd, i16)>,
    /// Signal mask to use for interruption while parked (sigsuspend & co).
    pub wait_mask: Option<u64>,
    /// The syscall it is parked in, for deadlock reports.
    pub parked_nr: i64,
    /// The last sync-op entry the thread made: (function, first argument),
    /// for the deadlock report.
    pub last_sync: Option<(&'static str, u64)>,
    /// The generation of its process's watches its debug registers hold.
    pub watch_gen: u64,
    /// A spin probe interrupted this passed-through call (number, address
    /// of its seccomp stop), which the kernel restarts: if the thread's next
    /// stop is that call's seccomp stop, it is not a new event.
    pub restart: Option<(i64, u64)>,
    /// Descriptors to steal again into `io` (an instance of a checkpoint).
    pub io_restore: Vec<(i32, i16)>,
    /// Guest-visible TID (as the original run had it) and the kernel's
    /// namespace TID (they differ in copy mode).
    pub vtid: pid_t,
    pub nstid: pid_t,
    /// Its next seccomp stop repeats a call that was an event already.
    pub again: bool,
}

#[derive(Clone)]
pub struct ProcInfo {
    pub tgid: pid_t,
    pub pidfd: i32,
    pub space: u64,
    pub group_exit: bool,
    pub parent: Option<ProcId>,
    pub vfork_parent: Option<pid_t>,
    pub alive: bool,
    /// Guest-visible PID, process group and session; the kernel's
    /// namespace PID (see `handlers::vpid`; tracked only for checkpoints).
    pub vpid: pid_t,
    pub vpgid: pid_t,
    pub vsid: pid_t,
    pub nspid: pid_t,
    /// Wait status once dead, and whether the guest parent reaped it.
    pub status: Option<i32>,
    pub reaped: bool,
    /// Signal for the parent at death (SIGCHLD for fork).
    pub exit_signal: i32,
    /// The kernel parent is the guest parent (false for copies, whose
    /// kernel parent is a frozen process: detrun sends the signal).
    pub notify_kernel: bool,
    /// Copy mode's filter is installed.
    pub copy_filter: bool,
    /// Address of a `syscall` instruction in the process's vDSO (0: none
    /// known), for injected calls.
    pub syscall_insn: u64,
    /// The shared file is mapped in this image, and its stat sites patched
    /// so far.
    pub shim_mapped: bool,
    pub patch: crate::patch::Patches,
    /// Copy mode: (PID, code, status) of the child whose SIGCHLD detrun
    /// sent, for the siginfo the guest sees.
    pub chld_info: Option<(pid_t, i32, i32)>,
}

impl ProcInfo {
    pub fn tgid_ns(&self) -> pid_t {
        crate::sys::ns_id(self.tgid)
    }
}
