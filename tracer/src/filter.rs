//! The seccomp filter installed in the guest before exec.
//!
//! It is an allow-list: the syscalls below run at native speed because their
//! results are deterministic given deterministic inputs (memory management,
//! file I/O on regular files, identity queries answered by namespaces...).
//! Everything else traps to the supervisor, which either virtualizes it or,
//! for a syscall it does not know, reports it by name (fail closed).

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op,
    SeccompCondition as Cond, SeccompFilter, SeccompRule, TargetArch,
};
use std::collections::BTreeMap;

/// Syscalls that never trap.
const ALLOW: &[i64] = &[
    // memory
    libc::SYS_mmap,
    libc::SYS_munmap,
    libc::SYS_mprotect,
    libc::SYS_mremap,
    libc::SYS_madvise,
    libc::SYS_brk,
    libc::SYS_msync,
    libc::SYS_mincore,
    libc::SYS_mlock,
    libc::SYS_munlock,
    libc::SYS_mlockall,
    libc::SYS_munlockall,
    libc::SYS_mlock2,
    libc::SYS_membarrier,
    libc::SYS_pkey_alloc,
    libc::SYS_pkey_free,
    libc::SYS_pkey_mprotect,
    // descriptors and regular-file I/O (pipes and sockets go through read/write, which trap)
    libc::SYS_close,
    libc::SYS_close_range,
    libc::SYS_dup,
    libc::SYS_dup2,
    libc::SYS_dup3,
    libc::SYS_lseek,
    libc::SYS_pread64,
    libc::SYS_pwrite64,
    libc::SYS_preadv,
    libc::SYS_pwritev,
    libc::SYS_preadv2,
    libc::SYS_pwritev2,
    libc::SYS_fsync,
    libc::SYS_fdatasync,
    libc::SYS_ftruncate,
    libc::SYS_truncate,
    libc::SYS_fallocate,
    libc::SYS_sync,
    libc::SYS_syncfs,
    libc::SYS_sync_file_range,
    libc::SYS_fadvise64,
    libc::SYS_readahead,
    libc::SYS_open,
    libc::SYS_openat,
    libc::SYS_openat2,
    libc::SYS_creat,
    libc::SYS_ioctl,
    libc::SYS_pipe,
    libc::SYS_pipe2,
    libc::SYS_memfd_create,
    libc::SYS_eventfd,
    libc::SYS_eventfd2,
    libc::SYS_signalfd,
    libc::SYS_signalfd4,
    libc::SYS_epoll_create,
    libc::SYS_epoll_create1,
    libc::SYS_epoll_ctl,
    libc::SYS_inotify_init,
    libc::SYS_inotify_init1,
    libc::SYS_inotify_add_watch,
    libc::SYS_inotify_rm_watch,
    libc::SYS_flistxattr,
    libc::SYS_listxattr,
    libc::SYS_llistxattr,
    libc::SYS_getxattr,
    libc::SYS_lgetxattr,
    libc::SYS_fgetxattr,
    libc::SYS_setxattr,
    libc::SYS_lsetxattr,
    libc::SYS_fsetxattr,
    libc::SYS_removexattr,
    libc::SYS_lremovexattr,
    libc::SYS_fremovexattr,
    // file system metadata
    libc::SYS_stat,
    libc::SYS_fstat,
    libc::SYS_lstat,
    libc::SYS_newfstatat,
    libc::SYS_statx,
    libc::SYS_statfs,
    libc::SYS_fstatfs,
    libc::SYS_access,
    libc::SYS_faccessat,
    libc::SYS_faccessat2,
    libc::SYS_readlink,
    libc::SYS_readlinkat,
    libc::SYS_getcwd,
    libc::SYS_chdir,
    libc::SYS_fchdir,
    libc::SYS_mkdir,
    libc::SYS_mkdirat,
    libc::SYS_rmdir,
    libc::SYS_unlink,
    libc::SYS_unlinkat,
    libc::SYS_rename,
    libc::SYS_renameat,
    libc::SYS_renameat2,
    libc::SYS_link,
    libc::SYS_linkat,
    libc::SYS_symlink,
    libc::SYS_symlinkat,
    libc::SYS_chmod,
    libc::SYS_fchmod,
    libc::SYS_fchmodat,
    libc::SYS_chown,
    libc::SYS_fchown,
    libc::SYS_lchown,
    libc::SYS_fchownat,
    libc::SYS_umask,
    libc::SYS_utime,
    libc::SYS_utimes,
    libc::SYS_utimensat,
    libc::SYS_futimesat,
    libc::SYS_getdents,
    libc::SYS_getdents64,
    libc::SYS_mknod,
    libc::SYS_mknodat,
    libc::SYS_chroot,
    libc::SYS_name_to_handle_at,
    // sockets (creation and configuration never block)
    libc::SYS_socketpair,
    libc::SYS_bind,
    libc::SYS_listen,
    libc::SYS_getsockname,
    libc::SYS_getpeername,
    libc::SYS_setsockopt,
    libc::SYS_getsockopt,
    libc::SYS_shutdown,
    // signals (delivery is observed at signal stops)
    libc::SYS_rt_sigaction,
    libc::SYS_rt_sigprocmask,
    libc::SYS_rt_sigreturn,
    libc::SYS_sigaltstack,
    libc::SYS_rt_sigpending,
    // identity (deterministic inside the PID namespace)
    libc::SYS_getpid,
    libc::SYS_getppid,
    libc::SYS_gettid,
    libc::SYS_getuid,
    libc::SYS_geteuid,
    libc::SYS_getgid,
    libc::SYS_getegid,
    libc::SYS_getgroups,
    libc::SYS_setgroups,
    libc::SYS_setuid,
    libc::SYS_setgid,
    libc::SYS_setreuid,
    libc::SYS_setregid,
    libc::SYS_setresuid,
    libc::SYS_setresgid,
    libc::SYS_getresuid,
    libc::SYS_getresgid,
    libc::SYS_setfsuid,
    libc::SYS_setfsgid,
    libc::SYS_getpgid,
    libc::SYS_setpgid,
    libc::SYS_getpgrp,
    libc::SYS_setsid,
    libc::SYS_getsid,
    libc::SYS_capget,
    libc::SYS_capset,
    // limits and priorities
    libc::SYS_getrlimit,
    libc::SYS_setrlimit,
    libc::SYS_prlimit64,
    libc::SYS_getpriority,
    libc::SYS_setpriority,
    libc::SYS_sched_getparam,
    libc::SYS_sched_setparam,
    libc::SYS_sched_getscheduler,
    libc::SYS_sched_setscheduler,
    libc::SYS_sched_get_priority_max,
    libc::SYS_sched_get_priority_min,
    libc::SYS_sched_rr_get_interval,
    libc::SYS_ioprio_get,
    libc::SYS_ioprio_set,
    // threads
    libc::SYS_set_robust_list,
    libc::SYS_get_robust_list,
    // exec (observed through PTRACE_EVENT_EXEC)
    libc::SYS_execve,
    libc::SYS_execveat,
    // restart after a stop signal
    libc::SYS_restart_syscall,
    // System V shared memory and semaphores setup (semop traps: it blocks)
    libc::SYS_shmget,
    libc::SYS_shmat,
    libc::SYS_shmdt,
    libc::SYS_shmctl,
    libc::SYS_semget,
    libc::SYS_semctl,
    libc::SYS_msgget,
    libc::SYS_msgctl,
    // mount namespace housekeeping
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_sethostname,
    libc::SYS_setdomainname,
    libc::SYS_landlock_create_ruleset,
    libc::SYS_landlock_add_rule,
    libc::SYS_landlock_restrict_self,
    libc::SYS_seccomp,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_kcmp,
    libc::SYS_pidfd_open,
    libc::SYS_pidfd_getfd,
    libc::SYS_copy_file_range,
];

const ARCH_GET_CPUID: u64 = 0x1011;
const ARCH_SET_CPUID: u64 = 0x1012;
const PR_SET_TSC: u64 = 26;
const ADDR_NO_RANDOMIZE: u64 = 0x0040000;

fn cond(arg: u8, len: Len, op: Op, v: u64) -> Cond {
    Cond::new(arg, len, op, v).expect("static filter condition")
}

fn rule(c: Vec<Cond>) -> SeccompRule {
    SeccompRule::new(c).expect("static filter rule")
}

/// Metadata calls that trap only when file metadata is virtualized.
const FS_META: &[i64] = &[
    libc::SYS_open,
    libc::SYS_openat,
    libc::SYS_stat,
    libc::SYS_fstat,
    libc::SYS_lstat,
    libc::SYS_newfstatat,
    libc::SYS_statx,
    libc::SYS_getdents64,
];

/// Socket calls that trap when the virtual network answers AF_INET.
const NET: &[i64] = &[
    libc::SYS_bind,
    libc::SYS_listen,
    libc::SYS_getsockname,
    libc::SYS_getpeername,
    libc::SYS_setsockopt,
    libc::SYS_getsockopt,
];

/// Build the BPF program. Built once in the supervisor, before fork.
pub fn build(fs_virtual: bool, net_virtual: bool) -> Result<BpfProgram, String> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for &nr in ALLOW {
        let traps = (fs_virtual && FS_META.contains(&nr)) || (net_virtual && NET.contains(&nr));
        if !traps {
            rules.insert(nr, vec![]);
        }
    }
    // socket: local domains run as they are; AF_INET/AF_INET6 trap so that
    // the use of the host's network is reported.
    rules.insert(
        libc::SYS_socket,
        vec![rule(vec![
            cond(0, Len::Dword, Op::Ne, libc::AF_INET as u64),
            cond(0, Len::Dword, Op::Ne, libc::AF_INET6 as u64),
        ])],
    );
    // fcntl: everything but the blocking lock commands.
    rules.insert(
        libc::SYS_fcntl,
        vec![rule(vec![
            cond(1, Len::Dword, Op::Ne, libc::F_SETLKW as u64),
            cond(1, Len::Dword, Op::Ne, libc::F_OFD_SETLKW as u64),
        ])],
    );
    // arch_prctl: everything but CPUID faulting control; re-arming it (our
    // own injection at exec) is allowed.
    rules.insert(
        libc::SYS_arch_prctl,
        vec![
            rule(vec![
                cond(0, Len::Dword, Op::Ne, ARCH_GET_CPUID),
                cond(0, Len::Dword, Op::Ne, ARCH_SET_CPUID),
            ]),
            rule(vec![
                cond(0, Len::Dword, Op::Eq, ARCH_SET_CPUID),
                cond(1, Len::Qword, Op::Eq, 0),
            ]),
        ],
    );
    // prctl: everything but turning TSC trapping off.
    rules.insert(
        libc::SYS_prctl,
        vec![rule(vec![cond(0, Len::Dword, Op::Ne, PR_SET_TSC)])],
    );
    // personality: only settings that keep ASLR off (or a query).
    rules.insert(
        libc::SYS_personality,
        vec![
            rule(vec![cond(
                0,
                Len::Dword,
                Op::MaskedEq(ADDR_NO_RANDOMIZE),
                ADDR_NO_RANDOMIZE,
            )]),
            rule(vec![cond(0, Len::Dword, Op::Eq, 0xffff_ffff)]),
        ],
    );
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Trace(0),
        SeccompAction::Allow,
        TargetArch::x86_64,
    )
    .map_err(|e| e.to_string())?;
    BpfProgram::try_from(filter).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn filter_builds() {
        let p = super::build(true, true).expect("filter");
        assert!(p.len() > 50 && p.len() < 4096, "{} instructions", p.len());
    }
}
