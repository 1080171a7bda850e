//! The run's network namespace, made when first needed.
//!
//! A new network namespace costs ~0.8 ms here (the kernel sets up every
//! protocol's per-namespace state): a third of what running `true` under
//! detrun costs, and most programs never make a socket. So the guest starts
//! in detrun's own network namespace, and the run's is made at the first
//! call that needs it: the reaper moves itself into a new one
//! (`spawn::NetRequest`) and the supervisor joins it for its own sockets.
//!
//! A socket belongs for good to the namespace it was created in, so this
//! rule keeps every guest socket inside. Before a thread that is still in
//! detrun's namespace does one of these, it joins the run's:
//! - creates a socket (`socket`, `socketpair`);
//! - opens `/proc/…/net`;
//! - gives up the privilege `setns` needs (`setuid`, `setreuid`,
//!   `setresuid`, `capset`, a new user namespace).
//!
//! Joining is three injected calls, `pidfd_open(1)` (the reaper is PID 1),
//! `setns` and `close`; then the call runs again from its instruction.
//! Threads created after that inherit the namespace; accepted sockets are
//! made in the listener's.
//!
//! Calls that trap only for this rule (a local socket, a `setuid`) are not
//! events: they do not tick the clock or appear in the trace, so schedules
//! are the same as when they did not trap at all. A thread that cannot
//! join gets EPERM for its socket, and the run gets a hazard.

use crate::ctx::Ctx;
use crate::sys::{self, Regs};
use libc::pid_t;
use std::collections::BTreeSet;

pub struct LateNet {
    request: Option<crate::spawn::NetRequest>,
    reaper: pid_t,
    /// detrun's own network namespace (device, inode).
    host: Option<(u64, u64)>,
    /// Made (true) or failed (false), once asked.
    pub made: Option<bool>,
    /// Threads that joined it.
    pub joins: u64,
    /// Threads that could not join (their calls then run where they are).
    refused: BTreeSet<pid_t>,
    /// A thread let go once so that its pending signal came first.
    deferred: Option<pid_t>,
}

impl LateNet {
    pub fn new(request: crate::spawn::NetRequest) -> LateNet {
        LateNet {
            reaper: request.reaper,
            request: Some(request),
            host: ns_of("/proc/thread-self/ns/net"),
            made: None,
            joins: 0,
            refused: BTreeSet::new(),
            deferred: None,
        }
    }
}

fn ns_of(path: &str) -> Option<(u64, u64)> {
    let c = std::ffi::CString::new(path).ok()?;
    // SAFETY: stat into a local struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    (unsafe { libc::stat(c.as_ptr(), &mut st) } == 0).then_some((st.st_dev, st.st_ino))
}

/// Make the run's network namespace if it is not made yet. False: there is
/// none (not asked for, or it failed; names then carry a nonce).
pub fn ensure(s: &mut Ctx) -> bool {
    let Some(l) = s.late_net.as_mut() else {
        return false;
    };
    if let Some(ok) = l.made {
        return ok;
    }
    let reaper = l.reaper;
    let made = l.request.take().map(|r| r.make());
    let ok = matches!(made, Some(Ok(()))) && s.net.join(reaper);
    if let Some(l) = s.late_net.as_mut() {
        l.made = Some(ok);
    }
    if !ok {
        let why = match made {
            Some(Err(e)) => e.to_string(),
            _ => "cannot join it".into(),
        };
        s.stats.hazard(
            "network-namespace",
            format!(
                "the run's network namespace could not be made ({why}): sockets live in the host's"
            ),
        );
        // No guest socket exists yet: the network may start over.
        s.net = crate::net::NetKernel::new(Some(crate::host::run_nonce()));
    }
    ok
}

/// Does the call at `regs` need its thread in the run's namespace first?
fn needs_namespace(tid: pid_t, regs: &Regs) -> bool {
    let nr = regs.orig_rax as i64;
    let newuser = libc::CLONE_NEWUSER as u64;
    match nr {
        libc::SYS_socket | libc::SYS_socketpair | libc::SYS_capset => true,
        // Staying root (0, or -1 for "unchanged") keeps the privilege.
        libc::SYS_setuid => regs.rdi as u32 != 0,
        libc::SYS_setreuid => [regs.rdi, regs.rsi]
            .iter()
            .any(|&u| !matches!(u as u32, 0 | u32::MAX)),
        libc::SYS_setresuid => [regs.rdi, regs.rsi, regs.rdx]
            .iter()
            .any(|&u| !matches!(u as u32, 0 | u32::MAX)),
        libc::SYS_unshare | libc::SYS_clone => regs.rdi & newuser != 0,
        libc::SYS_clone3 => sys::read_u64(tid, regs.rdi).is_ok_and(|f| f & newuser != 0),
        _ => false,
    }
}

/// Trapped only for the rule above (`table::Action::JoinNet`): run on.
fn only_for_join(regs: &Regs) -> bool {
    let nr = regs.orig_rax as i64;
    match nr {
        libc::SYS_socket => !matches!(regs.rdi as i32, libc::AF_INET | libc::AF_INET6),
        libc::SYS_unshare => true,
        _ => crate::table::join_net(nr),
    }
}

/// Whether `path` (as the guest gave it) shows a network namespace.
pub fn is_proc_net(path: &str) -> bool {
    let Some(rest) = path.strip_prefix("/proc/") else {
        return false;
    };
    let c: Vec<&str> = rest.split('/').take(4).collect();
    c.first() == Some(&"net")
        || c.get(1) == Some(&"net")
        || (c.get(1) == Some(&"task") && c.get(3) == Some(&"net"))
}

/// At a seccomp stop, before the call is an event. True: handled (the
/// thread was resumed).
pub fn before_call(s: &mut Ctx, tid: pid_t, regs: &Regs) -> bool {
    let nr = regs.orig_rax as i64;
    let relevant = matches!(
        nr,
        libc::SYS_socket | libc::SYS_unshare | libc::SYS_clone | libc::SYS_clone3
    ) || crate::table::join_net(nr);
    if !relevant {
        return false;
    }
    if needs_namespace(tid, regs) && join(s, tid, regs) {
        return true;
    }
    if only_for_join(regs) {
        s.continue_running(tid);
        return true;
    }
    false
}

/// Move `tid`, stopped at the call `regs`, into the run's namespace if it
/// is still in detrun's. True: it was resumed (to make the call again, or
/// with EPERM for a socket it may not make).
pub fn join(s: &mut Ctx, tid: pid_t, regs: &Regs) -> bool {
    let Some(l) = s.late_net.as_mut() else {
        return false;
    };
    if l.host.is_none()
        || l.made == Some(false)
        || l.refused.contains(&tid)
        || ns_of(&format!("/proc/{tid}/ns/net")) != l.host
    {
        return false;
    }
    // A signal due now would arrive between the injected calls: let it
    // be delivered first (once), the call then comes again.
    let due = sys::sig_state(tid).is_some_and(|st| (st.pending | st.shared) & !st.blocked != 0);
    if due && l.deferred != Some(tid) {
        l.deferred = Some(tid);
        let mut r = *regs;
        r.orig_rax = u64::MAX;
        r.rip = r.rip.wrapping_sub(2);
        r.rax = regs.orig_rax;
        let _ = sys::set_regs(tid, &r);
        let _ = s.cont(tid, 0);
        return true;
    }
    l.deferred = None;
    if !ensure(s) {
        return false;
    }
    let insn = regs.rip.wrapping_sub(2);
    let inj = |nr: i64, args: [u64; 6]| crate::checkpoint::inject_raw(tid, insn, nr, args);
    let mut held = 0u64;
    let mut joined = false;
    if let Ok(o) = inj(libc::SYS_pidfd_open, [1, 0, 0, 0, 0, 0]) {
        held |= o.held;
        if o.ret >= 0 {
            if let Ok(j) = inj(
                libc::SYS_setns,
                [o.ret as u64, libc::CLONE_NEWNET as u64, 0, 0, 0, 0],
            ) {
                held |= j.held;
                joined = j.ret == 0;
            }
            if let Ok(c) = inj(libc::SYS_close, [o.ret as u64, 0, 0, 0, 0, 0]) {
                held |= c.held;
            }
        }
    }
    let host = s.late_net.as_ref().and_then(|l| l.host);
    joined &= ns_of(&format!("/proc/{tid}/ns/net")) != host;
    let mut r = *regs;
    let refuse = !joined
        && matches!(
            regs.orig_rax as i64,
            libc::SYS_socket | libc::SYS_socketpair
        );
    if refuse {
        // The call returns EPERM from where it was (past the instruction).
        r.rax = (-libc::EPERM) as u64;
    } else {
        r.rip = r.rip.wrapping_sub(2);
        r.rax = regs.orig_rax;
    }
    if let Some(l) = s.late_net.as_mut() {
        if joined {
            l.joins += 1;
        } else {
            l.refused.insert(tid);
        }
    }
    if !joined {
        let name = crate::sysnames::name(regs.orig_rax as i64).unwrap_or("?");
        s.stats.hazard(
            "network-namespace",
            format!("a thread could not join the run's network namespace before {name}"),
        );
    }
    let _ = sys::set_regs(tid, &r);
    let tgid = s
        .threads
        .get(&tid)
        .map(|t| s.procs[t.proc as usize].tgid)
        .unwrap_or(tid);
    for sig in 1..=64 {
        if held & (1 << (sig - 1)) != 0 {
            let _ = sys::tgkill(tgid, tid, sig);
        }
    }
    let _ = s.cont(tid, 0);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_net_paths() {
        for p in [
            "/proc/net/dev",
            "/proc/self/net/tcp",
            "/proc/12/net",
            "/proc/thread-self/net/if_inet6",
            "/proc/1/task/3/net/dev",
        ] {
            assert!(is_proc_net(p), "{p}");
        }
        for p in [
            "/proc/self/stat",
            "/proc/12/task/13/status",
            "/proc/netfoo",
            "/sys/class/net",
            "net/dev",
            "/proc/self/fd/3",
        ] {
            assert!(!is_proc_net(p), "{p}");
        }
    }
}
