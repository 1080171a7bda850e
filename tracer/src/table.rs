//! The syscall table: what detrun does with each x86_64 syscall.
//!
//! One entry per syscall detrun allows or handles; a number not listed
//! traps and is reported as unknown (fail closed). The seccomp filter
//! (`filter.rs`), the dispatch (`handlers::route`), copy mode's filter and
//! `detrun syscalls` are all derived from it, and a test checks the built
//! filters against it for every number.

use crate::sysnames;
use libc::*;

/// What the seccomp filter does with a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Never traps: deterministic given deterministic inputs.
    Allow,
    /// Always traps.
    Trap,
    /// Traps when file metadata is virtual (`--fs-times virtual`, the default).
    Meta,
    /// Traps with the virtual network (not with `--net=host`).
    SockMeta,
    /// Traps only while threads may still have to join the run's network
    /// namespace (made at the first socket: see `netns.rs`).
    JoinNet,
    /// Traps for some arguments only (a rule in `filter.rs`), described here.
    Args(&'static str),
}

/// Which handler answers a trapped call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// No handler: the call is allowed.
    None,
    /// `handlers::time`.
    Time,
    /// `handlers::futex`.
    Futex,
    /// `handlers::net::socket`.
    Socket,
    /// `handlers::net::intercept`, else the call runs.
    SockSetup,
    /// `handlers::procfs` (and `fs` for files made in the start's tick).
    Open,
    /// `handlers::fs`.
    Stat,
    /// `handlers::net` for virtual sockets, else `handlers::io`.
    NetIo,
    /// `handlers::io`.
    Io,
    /// `handlers::process`.
    Process,
    /// `handlers::signal`.
    Signal,
    /// `handlers::misc`.
    Misc,
    /// `netns::before_call`, before the call is an event.
    JoinNet,
    /// Not virtualized: runs with an `unknown-syscall` hazard (ENOSYS with
    /// `--strict`).
    Unknown,
}

#[derive(Clone, Copy, Debug)]
pub struct Entry {
    pub nr: i64,
    pub action: Action,
    pub family: Family,
    /// Copy mode (a checkpoint's branches) traps it too: `handlers::vpid`.
    pub copy: bool,
    pub note: &'static str,
}

const fn e(nr: i64, action: Action, family: Family, note: &'static str) -> Entry {
    Entry {
        nr,
        action,
        family,
        copy: false,
        note,
    }
}

const fn c(nr: i64, action: Action, family: Family, note: &'static str) -> Entry {
    Entry {
        nr,
        action,
        family,
        copy: true,
        note,
    }
}

const MEMORY: &str = "memory management";
const FILE_IO: &str =
    "descriptors and regular-file I/O (pipes and sockets go through read and write, which trap)";
const FS_META: &str = "file system changes and metadata that are the same in every run";
const SOCKET_SETUP: &str = "socket set-up never blocks";
const SIGNALS: &str = "signal delivery is seen at signal stops";
const IDENTITY: &str =
    "deterministic inside the PID namespace; copy mode answers PIDs from the run's table";
const LIMITS: &str = "limits and priorities";
const THREADS: &str = "robust futex lists";
const EXEC: &str = "seen at PTRACE_EVENT_EXEC";
const RESTART: &str = "the restart of a call after a stop";
const SYSV: &str = "System V IPC set-up (semop and msgsnd trap: they block)";
const NAMESPACES: &str = "namespaces, sandboxing and process handles";

use Action::*;
use Family::{Futex, Io, Misc, NetIo, Open, Process, Signal, SockSetup, Socket, Stat, Time};

/// Every syscall detrun allows or handles, by number.
pub static TABLE: &[Entry] = &[
    e(SYS_read, Trap, NetIo, "pipes and sockets: the thread parks until data is there; regular files: read in the tracee at patched sites"),
    e(SYS_write, Trap, NetIo, "pipes and sockets: parks while full, and the supervisor completes large writes"),
    e(SYS_open, Meta, Open, "/proc and /sys files with host facts are replaced by generated ones; files created in the start's tick are marked as the run's"),
    e(SYS_close, Allow, Family::None, FILE_IO),
    e(SYS_stat, Meta, Stat, "virtual inode numbers, devices and timestamps; answered in the tracee at patched call sites"),
    e(SYS_fstat, Meta, Stat, "virtual inode numbers, devices and timestamps; answered in the tracee at patched call sites"),
    e(SYS_lstat, Meta, Stat, "virtual inode numbers, devices and timestamps; answered in the tracee at patched call sites"),
    e(SYS_poll, Trap, Io, "readiness is checked without blocking; the thread parks until a descriptor is ready or the virtual timeout"),
    e(SYS_lseek, Allow, Family::None, FILE_IO),
    e(SYS_mmap, Allow, Family::None, MEMORY),
    e(SYS_mprotect, Allow, Family::None, MEMORY),
    e(SYS_munmap, Allow, Family::None, MEMORY),
    e(SYS_brk, Allow, Family::None, MEMORY),
    e(SYS_rt_sigaction, Allow, Family::None, SIGNALS),
    e(SYS_rt_sigprocmask, Allow, Family::None, SIGNALS),
    e(SYS_rt_sigreturn, Allow, Family::None, SIGNALS),
    e(SYS_ioctl, Allow, Family::None, FILE_IO),
    e(SYS_pread64, Allow, Family::None, FILE_IO),
    e(SYS_pwrite64, Allow, Family::None, FILE_IO),
    e(SYS_readv, Trap, NetIo, "as read"),
    e(SYS_writev, Trap, NetIo, "as write"),
    e(SYS_access, Allow, Family::None, FS_META),
    e(SYS_pipe, Allow, Family::None, FILE_IO),
    e(SYS_select, Trap, Io, "readiness is checked without blocking; the thread parks until a descriptor is ready or the virtual timeout"),
    e(SYS_sched_yield, Trap, Misc, "the thread gives up the turn"),
    e(SYS_mremap, Allow, Family::None, MEMORY),
    e(SYS_msync, Allow, Family::None, MEMORY),
    e(SYS_mincore, Allow, Family::None, MEMORY),
    e(SYS_madvise, Allow, Family::None, MEMORY),
    e(SYS_shmget, Allow, Family::None, SYSV),
    e(SYS_shmat, Allow, Family::None, SYSV),
    e(SYS_shmctl, Allow, Family::None, SYSV),
    e(SYS_dup, Allow, Family::None, FILE_IO),
    e(SYS_dup2, Allow, Family::None, FILE_IO),
    e(SYS_pause, Trap, Signal, "parks until a signal (or the virtual timeout)"),
    e(SYS_nanosleep, Trap, Time, "a virtual sleep: the thread parks until the virtual clock reaches its deadline"),
    e(SYS_getitimer, Trap, Time, "virtual timers: the signal is sent when the virtual clock passes the deadline"),
    e(SYS_alarm, Trap, Time, "virtual timers: the signal is sent when the virtual clock passes the deadline"),
    e(SYS_setitimer, Trap, Time, "virtual timers: the signal is sent when the virtual clock passes the deadline"),
    c(SYS_getpid, Allow, Family::None, IDENTITY),
    e(SYS_sendfile, Trap, Io, "parks while the pipe is not ready"),
    e(SYS_socket, Args("AF_INET and AF_INET6 trap (every domain while threads may still have to join the run's network namespace)"), Socket, "AF_INET/AF_INET6 become virtual sockets (a socketpair-backed stand-in); other domains run as they are"),
    e(SYS_connect, Trap, NetIo, "virtual sockets connect through the virtual network (seeded latency, loss, partitions)"),
    e(SYS_accept, Trap, NetIo, "parks until a connection is there; virtual listeners accept virtual connections"),
    e(SYS_sendto, Trap, NetIo, "as write; virtual sockets go through the virtual network"),
    e(SYS_recvfrom, Trap, NetIo, "as read; virtual sockets answer from the virtual network"),
    e(SYS_sendmsg, Trap, NetIo, "checked for readiness; virtual sockets go through the virtual network"),
    e(SYS_recvmsg, Trap, NetIo, "as recvfrom"),
    e(SYS_shutdown, Allow, Family::None, SOCKET_SETUP),
    e(SYS_bind, SockMeta, SockSetup, "virtual sockets: answered from the virtual network; other sockets run as they are"),
    e(SYS_listen, SockMeta, SockSetup, "virtual sockets: answered from the virtual network; other sockets run as they are"),
    e(SYS_getsockname, SockMeta, SockSetup, "virtual sockets: answered from the virtual network; other sockets run as they are"),
    e(SYS_getpeername, SockMeta, SockSetup, "virtual sockets: answered from the virtual network; other sockets run as they are"),
    e(SYS_socketpair, JoinNet, Family::JoinNet, "traps only so that the thread joins the run's network namespace first, then runs"),
    e(SYS_setsockopt, SockMeta, SockSetup, "virtual sockets: answered from the virtual network; other sockets run as they are"),
    e(SYS_getsockopt, SockMeta, SockSetup, "virtual sockets: answered from the virtual network; other sockets run as they are"),
    e(SYS_clone, Trap, Process, "the new thread or process becomes a world thread; vfork's parent waits without the turn"),
    e(SYS_fork, Trap, Process, "the new thread or process becomes a world thread; vfork's parent waits without the turn"),
    e(SYS_vfork, Trap, Process, "the new thread or process becomes a world thread; vfork's parent waits without the turn"),
    e(SYS_execve, Allow, Family::None, EXEC),
    e(SYS_exit, Trap, Process, "the thread leaves the world"),
    e(SYS_wait4, Trap, Process, "made non-blocking: a parent with nothing to reap parks until a child changes state"),
    e(SYS_kill, Trap, Signal, "sent for real; the waiters it interrupts are woken in the world"),
    e(SYS_uname, Trap, Misc, "a fixed machine identity"),
    e(SYS_semget, Allow, Family::None, SYSV),
    e(SYS_semop, Trap, Misc, "runs for real with a hazard (real time or may block); ENOSYS with --strict"),
    e(SYS_semctl, Allow, Family::None, SYSV),
    e(SYS_shmdt, Allow, Family::None, SYSV),
    e(SYS_msgget, Allow, Family::None, SYSV),
    e(SYS_msgsnd, Trap, Misc, "runs for real with a hazard (real time or may block); ENOSYS with --strict"),
    e(SYS_msgrcv, Trap, Misc, "runs for real with a hazard (real time or may block); ENOSYS with --strict"),
    e(SYS_msgctl, Allow, Family::None, SYSV),
    c(SYS_fcntl, Args("F_SETLKW and F_OFD_SETLKW trap (they block); copy mode also traps F_GETLK and F_OFD_GETLK"), Io, "blocking record locks as flock; everything else runs as it is"),
    e(SYS_flock, Trap, Io, "a lock that is held parks the thread and is retried after another thread ran"),
    e(SYS_fsync, Allow, Family::None, FILE_IO),
    e(SYS_fdatasync, Allow, Family::None, FILE_IO),
    e(SYS_truncate, Allow, Family::None, FILE_IO),
    e(SYS_ftruncate, Allow, Family::None, FILE_IO),
    e(SYS_getdents, Allow, Family::None, FS_META),
    e(SYS_getcwd, Allow, Family::None, FS_META),
    e(SYS_chdir, Allow, Family::None, FS_META),
    e(SYS_fchdir, Allow, Family::None, FS_META),
    e(SYS_rename, Allow, Family::None, FS_META),
    e(SYS_mkdir, Allow, Family::None, FS_META),
    e(SYS_rmdir, Allow, Family::None, FS_META),
    e(SYS_creat, Allow, Family::None, FILE_IO),
    e(SYS_link, Allow, Family::None, FS_META),
    e(SYS_unlink, Allow, Family::None, FS_META),
    e(SYS_symlink, Allow, Family::None, FS_META),
    e(SYS_readlink, Allow, Family::None, FS_META),
    e(SYS_chmod, Allow, Family::None, FS_META),
    e(SYS_fchmod, Allow, Family::None, FS_META),
    e(SYS_chown, Allow, Family::None, FS_META),
    e(SYS_fchown, Allow, Family::None, FS_META),
    e(SYS_lchown, Allow, Family::None, FS_META),
    e(SYS_umask, Allow, Family::None, FS_META),
    e(SYS_gettimeofday, Trap, Time, "answered from the virtual clock"),
    e(SYS_getrlimit, Allow, Family::None, LIMITS),
    e(SYS_getrusage, Trap, Time, "CPU times from the virtual clock"),
    e(SYS_sysinfo, Trap, Misc, "fixed memory and load, uptime from the virtual clock"),
    e(SYS_times, Trap, Time, "CPU times from the virtual clock"),
    e(SYS_ptrace, Trap, Process, "refused (EPERM) with a hazard: detrun is the tracer"),
    e(SYS_getuid, Allow, Family::None, IDENTITY),
    e(SYS_getgid, Allow, Family::None, IDENTITY),
    e(SYS_setuid, JoinNet, Family::JoinNet, "traps only so that the thread joins the run's network namespace first, then runs"),
    e(SYS_setgid, Allow, Family::None, IDENTITY),
    e(SYS_geteuid, Allow, Family::None, IDENTITY),
    e(SYS_getegid, Allow, Family::None, IDENTITY),
    c(SYS_setpgid, Allow, Family::None, IDENTITY),
    c(SYS_getppid, Allow, Family::None, IDENTITY),
    c(SYS_getpgrp, Allow, Family::None, IDENTITY),
    c(SYS_setsid, Allow, Family::None, IDENTITY),
    e(SYS_setreuid, JoinNet, Family::JoinNet, "traps only so that the thread joins the run's network namespace first, then runs"),
    e(SYS_setregid, Allow, Family::None, IDENTITY),
    e(SYS_getgroups, Allow, Family::None, IDENTITY),
    e(SYS_setgroups, Allow, Family::None, IDENTITY),
    e(SYS_setresuid, JoinNet, Family::JoinNet, "traps only so that the thread joins the run's network namespace first, then runs"),
    e(SYS_getresuid, Allow, Family::None, IDENTITY),
    e(SYS_setresgid, Allow, Family::None, IDENTITY),
    e(SYS_getresgid, Allow, Family::None, IDENTITY),
    c(SYS_getpgid, Allow, Family::None, IDENTITY),
    e(SYS_setfsuid, Allow, Family::None, IDENTITY),
    e(SYS_setfsgid, Allow, Family::None, IDENTITY),
    c(SYS_getsid, Allow, Family::None, IDENTITY),
    e(SYS_capget, Allow, Family::None, IDENTITY),
    e(SYS_capset, JoinNet, Family::JoinNet, "traps only so that the thread joins the run's network namespace first, then runs"),
    e(SYS_rt_sigpending, Allow, Family::None, SIGNALS),
    e(SYS_rt_sigtimedwait, Trap, Signal, "parks until a signal (or the virtual timeout)"),
    e(SYS_rt_sigqueueinfo, Trap, Signal, "sent for real; the waiters it interrupts are woken in the world"),
    e(SYS_rt_sigsuspend, Trap, Signal, "parks until a signal (or the virtual timeout)"),
    e(SYS_sigaltstack, Allow, Family::None, SIGNALS),
    e(SYS_utime, Allow, Family::None, FS_META),
    e(SYS_mknod, Allow, Family::None, FS_META),
    e(SYS_personality, Args("settings that would turn ASLR back on trap"), Misc, "ASLR stays off (ADDR_NO_RANDOMIZE is kept), with a hazard"),
    e(SYS_statfs, Allow, Family::None, FS_META),
    e(SYS_fstatfs, Allow, Family::None, FS_META),
    e(SYS_getpriority, Allow, Family::None, LIMITS),
    e(SYS_setpriority, Allow, Family::None, LIMITS),
    e(SYS_sched_setparam, Allow, Family::None, LIMITS),
    e(SYS_sched_getparam, Allow, Family::None, LIMITS),
    e(SYS_sched_setscheduler, Allow, Family::None, LIMITS),
    e(SYS_sched_getscheduler, Allow, Family::None, LIMITS),
    e(SYS_sched_get_priority_max, Allow, Family::None, LIMITS),
    e(SYS_sched_get_priority_min, Allow, Family::None, LIMITS),
    e(SYS_sched_rr_get_interval, Allow, Family::None, LIMITS),
    e(SYS_mlock, Allow, Family::None, MEMORY),
    e(SYS_munlock, Allow, Family::None, MEMORY),
    e(SYS_mlockall, Allow, Family::None, MEMORY),
    e(SYS_munlockall, Allow, Family::None, MEMORY),
    e(SYS_pivot_root, Allow, Family::None, NAMESPACES),
    e(SYS_prctl, Args("PR_SET_TSC traps"), Misc, "PR_SET_TSC is ignored with a hazard: rdtsc stays virtual"),
    e(SYS_arch_prctl, Args("ARCH_GET_CPUID and ARCH_SET_CPUID trap, except re-arming CPUID faulting"), Misc, "CPUID faulting control is ignored with a hazard: cpuid stays virtual"),
    e(SYS_adjtimex, Trap, Time, "refused (EPERM): the guest may not set the clock"),
    e(SYS_setrlimit, Allow, Family::None, LIMITS),
    e(SYS_chroot, Allow, Family::None, FS_META),
    e(SYS_sync, Allow, Family::None, FILE_IO),
    e(SYS_settimeofday, Trap, Time, "refused (EPERM): the guest may not set the clock"),
    e(SYS_mount, Allow, Family::None, NAMESPACES),
    e(SYS_umount2, Allow, Family::None, NAMESPACES),
    e(SYS_sethostname, Allow, Family::None, NAMESPACES),
    e(SYS_setdomainname, Allow, Family::None, NAMESPACES),
    c(SYS_gettid, Allow, Family::None, IDENTITY),
    e(SYS_readahead, Allow, Family::None, FILE_IO),
    e(SYS_setxattr, Allow, Family::None, FILE_IO),
    e(SYS_lsetxattr, Allow, Family::None, FILE_IO),
    e(SYS_fsetxattr, Allow, Family::None, FILE_IO),
    e(SYS_getxattr, Allow, Family::None, FILE_IO),
    e(SYS_lgetxattr, Allow, Family::None, FILE_IO),
    e(SYS_fgetxattr, Allow, Family::None, FILE_IO),
    e(SYS_listxattr, Allow, Family::None, FILE_IO),
    e(SYS_llistxattr, Allow, Family::None, FILE_IO),
    e(SYS_flistxattr, Allow, Family::None, FILE_IO),
    e(SYS_removexattr, Allow, Family::None, FILE_IO),
    e(SYS_lremovexattr, Allow, Family::None, FILE_IO),
    e(SYS_fremovexattr, Allow, Family::None, FILE_IO),
    e(SYS_tkill, Trap, Signal, "sent for real; the waiters it interrupts are woken in the world"),
    e(SYS_time, Trap, Time, "answered from the virtual clock"),
    e(SYS_futex, Trap, Futex, "waits park in the world and wakes are the world's; timeouts on the virtual clock"),
    e(SYS_sched_setaffinity, Trap, Misc, "accepted and ignored"),
    e(SYS_sched_getaffinity, Trap, Misc, "the virtual CPU set"),
    e(SYS_epoll_create, Allow, Family::None, FILE_IO),
    e(SYS_getdents64, Meta, Stat, "directory entries in sorted order with virtual inode numbers"),
    e(SYS_set_tid_address, Trap, Process, "the clear-tid address is noted (its futex wake at thread death)"),
    e(SYS_restart_syscall, Allow, Family::None, RESTART),
    e(SYS_semtimedop, Trap, Misc, "runs for real with a hazard (real time or may block); ENOSYS with --strict"),
    e(SYS_fadvise64, Allow, Family::None, FILE_IO),
    e(SYS_timer_create, Trap, Time, "virtual timers: the signal is sent when the virtual clock passes the deadline"),
    e(SYS_timer_settime, Trap, Time, "virtual timers: the signal is sent when the virtual clock passes the deadline"),
    e(SYS_timer_gettime, Trap, Time, "virtual timers: the signal is sent when the virtual clock passes the deadline"),
    e(SYS_timer_getoverrun, Trap, Time, "virtual timers: the signal is sent when the virtual clock passes the deadline"),
    e(SYS_timer_delete, Trap, Time, "virtual timers: the signal is sent when the virtual clock passes the deadline"),
    e(SYS_clock_settime, Trap, Time, "refused (EPERM): the guest may not set the clock"),
    e(SYS_clock_gettime, Trap, Time, "answered from the virtual clock"),
    e(SYS_clock_getres, Trap, Time, "answered from the virtual clock"),
    e(SYS_clock_nanosleep, Trap, Time, "a virtual sleep: the thread parks until the virtual clock reaches its deadline"),
    e(SYS_exit_group, Trap, Process, "the process leaves the world"),
    e(SYS_epoll_wait, Trap, Io, "readiness is checked without blocking; the thread parks until a descriptor is ready or the virtual timeout"),
    e(SYS_epoll_ctl, Allow, Family::None, FILE_IO),
    e(SYS_tgkill, Trap, Signal, "sent for real; the waiters it interrupts are woken in the world"),
    e(SYS_utimes, Allow, Family::None, FS_META),
    e(SYS_mq_timedsend, Trap, Misc, "runs for real with a hazard (real time or may block); ENOSYS with --strict"),
    e(SYS_mq_timedreceive, Trap, Misc, "runs for real with a hazard (real time or may block); ENOSYS with --strict"),
    e(SYS_waitid, Trap, Process, "made non-blocking: a parent with nothing to reap parks until a child changes state"),
    e(SYS_ioprio_set, Allow, Family::None, LIMITS),
    e(SYS_ioprio_get, Allow, Family::None, LIMITS),
    e(SYS_inotify_init, Allow, Family::None, FILE_IO),
    e(SYS_inotify_add_watch, Allow, Family::None, FILE_IO),
    e(SYS_inotify_rm_watch, Allow, Family::None, FILE_IO),
    e(SYS_openat, Meta, Open, "as open"),
    e(SYS_mkdirat, Allow, Family::None, FS_META),
    e(SYS_mknodat, Allow, Family::None, FS_META),
    e(SYS_fchownat, Allow, Family::None, FS_META),
    e(SYS_futimesat, Allow, Family::None, FS_META),
    e(SYS_newfstatat, Meta, Stat, "virtual inode numbers, devices and timestamps; answered in the tracee at patched call sites"),
    e(SYS_unlinkat, Allow, Family::None, FS_META),
    e(SYS_renameat, Allow, Family::None, FS_META),
    e(SYS_linkat, Allow, Family::None, FS_META),
    e(SYS_symlinkat, Allow, Family::None, FS_META),
    e(SYS_readlinkat, Allow, Family::None, FS_META),
    e(SYS_fchmodat, Allow, Family::None, FS_META),
    e(SYS_faccessat, Allow, Family::None, FS_META),
    e(SYS_pselect6, Trap, Io, "readiness is checked without blocking; the thread parks until a descriptor is ready or the virtual timeout"),
    e(SYS_ppoll, Trap, Io, "readiness is checked without blocking; the thread parks until a descriptor is ready or the virtual timeout"),
    e(SYS_unshare, JoinNet, Family::JoinNet, "CLONE_NEWUSER only: the thread joins the run's network namespace first (a new user namespace could not), then the call runs"),
    e(SYS_set_robust_list, Allow, Family::None, THREADS),
    e(SYS_get_robust_list, Allow, Family::None, THREADS),
    e(SYS_splice, Trap, Io, "parks while the pipe is not ready"),
    e(SYS_tee, Trap, Io, "parks while the pipe is not ready"),
    e(SYS_sync_file_range, Allow, Family::None, FILE_IO),
    e(SYS_vmsplice, Trap, Io, "parks while the pipe is not ready"),
    e(SYS_utimensat, Allow, Family::None, FS_META),
    e(SYS_epoll_pwait, Trap, Io, "readiness is checked without blocking; the thread parks until a descriptor is ready or the virtual timeout"),
    e(SYS_signalfd, Allow, Family::None, FILE_IO),
    e(SYS_timerfd_create, Trap, Misc, "runs for real with a hazard (real time or may block); ENOSYS with --strict"),
    e(SYS_eventfd, Allow, Family::None, FILE_IO),
    e(SYS_fallocate, Allow, Family::None, FILE_IO),
    e(SYS_timerfd_settime, Trap, Misc, "runs for real with a hazard (real time or may block); ENOSYS with --strict"),
    e(SYS_timerfd_gettime, Trap, Misc, "runs for real with a hazard (real time or may block); ENOSYS with --strict"),
    e(SYS_accept4, Trap, NetIo, "as accept"),
    e(SYS_signalfd4, Allow, Family::None, FILE_IO),
    e(SYS_eventfd2, Allow, Family::None, FILE_IO),
    e(SYS_epoll_create1, Allow, Family::None, FILE_IO),
    e(SYS_dup3, Allow, Family::None, FILE_IO),
    e(SYS_pipe2, Allow, Family::None, FILE_IO),
    e(SYS_inotify_init1, Allow, Family::None, FILE_IO),
    e(SYS_preadv, Allow, Family::None, FILE_IO),
    e(SYS_pwritev, Allow, Family::None, FILE_IO),
    e(SYS_rt_tgsigqueueinfo, Trap, Signal, "sent for real; the waiters it interrupts are woken in the world"),
    e(SYS_perf_event_open, Trap, Misc, "ENOSYS with a hazard: it would bypass the sandbox"),
    e(SYS_recvmmsg, Trap, NetIo, "as recvfrom"),
    e(SYS_prlimit64, Allow, Family::None, LIMITS),
    e(SYS_name_to_handle_at, Allow, Family::None, FS_META),
    e(SYS_clock_adjtime, Trap, Time, "refused (EPERM): the guest may not set the clock"),
    e(SYS_syncfs, Allow, Family::None, FILE_IO),
    e(SYS_sendmmsg, Trap, NetIo, "as sendmsg"),
    e(SYS_setns, Allow, Family::None, NAMESPACES),
    e(SYS_getcpu, Trap, Misc, "a virtual CPU number"),
    e(SYS_process_vm_readv, Allow, Family::None, NAMESPACES),
    e(SYS_process_vm_writev, Allow, Family::None, NAMESPACES),
    e(SYS_kcmp, Allow, Family::None, NAMESPACES),
    e(SYS_renameat2, Allow, Family::None, FS_META),
    e(SYS_seccomp, Allow, Family::None, NAMESPACES),
    e(SYS_getrandom, Trap, Misc, "bytes from the seeded random stream"),
    e(SYS_memfd_create, Allow, Family::None, FILE_IO),
    e(SYS_bpf, Trap, Misc, "ENOSYS with a hazard: it would bypass the sandbox"),
    e(SYS_execveat, Allow, Family::None, EXEC),
    e(SYS_userfaultfd, Trap, Misc, "ENOSYS with a hazard: it would bypass the sandbox"),
    e(SYS_membarrier, Allow, Family::None, MEMORY),
    e(SYS_mlock2, Allow, Family::None, MEMORY),
    e(SYS_copy_file_range, Allow, Family::None, NAMESPACES),
    e(SYS_preadv2, Allow, Family::None, FILE_IO),
    e(SYS_pwritev2, Allow, Family::None, FILE_IO),
    e(SYS_pkey_mprotect, Allow, Family::None, MEMORY),
    e(SYS_pkey_alloc, Allow, Family::None, MEMORY),
    e(SYS_pkey_free, Allow, Family::None, MEMORY),
    e(SYS_statx, Meta, Stat, "virtual inode numbers, devices and timestamps; answered in the tracee at patched call sites"),
    e(SYS_rseq, Trap, Misc, "ENOSYS (glibc falls back): restartable sequences would let the kernel's CPU choice show"),
    e(SYS_pidfd_send_signal, Trap, Signal, "sent for real; the waiters it interrupts are woken in the world"),
    e(SYS_io_uring_setup, Trap, Misc, "ENOSYS with a hazard: it would bypass the sandbox"),
    e(SYS_io_uring_enter, Trap, Misc, "ENOSYS with a hazard: it would bypass the sandbox"),
    e(SYS_io_uring_register, Trap, Misc, "ENOSYS with a hazard: it would bypass the sandbox"),
    e(SYS_pidfd_open, Allow, Family::None, NAMESPACES),
    e(SYS_clone3, Trap, Process, "the new thread or process becomes a world thread; vfork's parent waits without the turn"),
    e(SYS_close_range, Allow, Family::None, FILE_IO),
    e(SYS_openat2, Allow, Family::None, FILE_IO),
    e(SYS_pidfd_getfd, Allow, Family::None, NAMESPACES),
    e(SYS_faccessat2, Allow, Family::None, FS_META),
    e(SYS_epoll_pwait2, Trap, Io, "readiness is checked without blocking; the thread parks until a descriptor is ready or the virtual timeout"),
    e(SYS_landlock_create_ruleset, Allow, Family::None, NAMESPACES),
    e(SYS_landlock_add_rule, Allow, Family::None, NAMESPACES),
    e(SYS_landlock_restrict_self, Allow, Family::None, NAMESPACES),
    e(SYS_futex_waitv, Trap, Misc, "ENOSYS with a hazard: it would bypass the sandbox"),
];

/// Table slots by number (`NONE`: not listed).
const NONE: u16 = u16::MAX;
const SLOTS: usize = 512;

const fn index() -> [u16; SLOTS] {
    let mut ix = [NONE; SLOTS];
    let mut i = 0;
    while i < TABLE.len() {
        ix[TABLE[i].nr as usize] = i as u16;
        i += 1;
    }
    ix
}

static INDEX: [u16; SLOTS] = index();

const UNLISTED: Entry = e(
    -1,
    Trap,
    Family::Unknown,
    "not virtualized: runs with an unknown-syscall hazard (ENOSYS with --strict)",
);

/// The entry of syscall `nr` (an unknown one for numbers not listed).
pub fn entry(nr: i64) -> Entry {
    match usize::try_from(nr).ok().and_then(|i| INDEX.get(i)) {
        Some(&i) if i != NONE => TABLE[i as usize],
        _ => Entry { nr, ..UNLISTED },
    }
}

/// The dispatch family of a trapped call.
#[inline]
pub fn family(nr: i64) -> Family {
    entry(nr).family
}

/// Numbers whose filter action is `action` (for building the filter).
pub fn with_action(pred: impl Fn(Action) -> bool) -> impl Iterator<Item = i64> {
    TABLE.iter().filter(move |x| pred(x.action)).map(|x| x.nr)
}

/// Does `nr` trap only so that the thread can join the run's network
/// namespace first?
pub fn join_net(nr: i64) -> bool {
    entry(nr).action == JoinNet
}

/// Is `nr` allowed by the base filter but trapped in copy mode?
pub fn copy_only(nr: i64) -> bool {
    let x = entry(nr);
    x.copy && x.action == Allow
}

/// The numbers copy mode's filter traps besides the base filter's.
pub fn copy_trapped() -> impl Iterator<Item = i64> {
    TABLE.iter().map(|x| x.nr).filter(|&n| copy_only(n))
}

/// Name of a syscall for the listing (`syscall N` when unnamed).
fn display_name(nr: i64) -> String {
    sysnames::name(nr).map_or_else(|| format!("syscall_{nr}"), str::to_string)
}

fn action_text(a: Action) -> String {
    match a {
        Allow => "allow".into(),
        Trap => "trap".into(),
        Meta => "trap (virtual file metadata)".into(),
        SockMeta => "trap (virtual network)".into(),
        JoinNet => "trap (late network namespace)".into(),
        Args(why) => format!("trap for some arguments: {why}"),
    }
}

/// `detrun syscalls [NAME|NUMBER...]`: one line per syscall (all of them
/// without arguments), or a Markdown table with `markdown`.
pub fn render(select: &[String], markdown: bool) -> Result<String, String> {
    let nrs: Vec<i64> = if select.is_empty() {
        (0..sysnames::COUNT as i64)
            .filter(|&n| sysnames::name(n).is_some())
            .collect()
    } else {
        select
            .iter()
            .map(|s| {
                s.parse::<i64>()
                    .ok()
                    .filter(|&n| sysnames::name(n).is_some())
                    .or_else(|| sysnames::number(s))
                    .ok_or_else(|| format!("no x86_64 syscall named {s:?}"))
            })
            .collect::<Result<_, _>>()?
    };
    let mut out = String::new();
    if markdown {
        out.push_str("# What detrun does with each syscall\n\n");
        out.push_str("Generated by `detrun syscalls --markdown` from `tracer/src/table.rs`.\n");
        out.push_str("\"copy\" marks calls that the branches of a checkpoint also trap.\n\n");
        out.push_str("| nr | syscall | filter | handler | what detrun does |\n");
        out.push_str("|---|---|---|---|---|\n");
    }
    for nr in nrs {
        let x = entry(nr);
        let handler = match x.family {
            Family::None => "-".to_string(),
            f => format!("{f:?}").to_lowercase(),
        };
        let copy = if x.copy { ", copy" } else { "" };
        let (name, action) = (display_name(nr), action_text(x.action));
        if markdown {
            out.push_str(&format!(
                "| {nr} | `{name}` | {action}{copy} | {handler} | {} |\n",
                x.note
            ));
        } else {
            out.push_str(&format!(
                "{nr:>3} {name:<24} {action}{copy}; handler {handler}: {}\n",
                x.note
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/syscalls.md is the table's own listing (regenerate it with
    /// `detrun syscalls --markdown > docs/syscalls.md`).
    #[test]
    fn docs_listing_is_current() {
        let doc = include_str!("../../docs/syscalls.md");
        assert_eq!(doc, render(&[], true).expect("listing"));
    }

    #[test]
    fn one_entry_per_number_and_lookups() {
        for w in TABLE.windows(2) {
            assert!(w[0].nr < w[1].nr, "{} before {}", w[0].nr, w[1].nr);
        }
        assert_eq!(entry(SYS_futex).family, Family::Futex);
        assert_eq!(entry(-1).family, Family::Unknown);
        assert_eq!(entry(100_000).action, Trap);
        let one = render(&["futex".into(), "0".into()], false).expect("known");
        assert!(
            one.starts_with("202 futex") && one.contains("\n  0 read"),
            "{one}"
        );
        assert!(render(&["nosuch".into()], false).is_err());
        assert!(copy_only(SYS_getpid) && !copy_only(SYS_fcntl) && !copy_only(SYS_read));
    }
}
