//! Syscalls injected into a stopped tracee (set-up of a checkpoint's
//! copies: fork, descriptors, filters), with a scratch page of its own.

use super::SCRATCH;
use crate::ctx::Ctx;
use crate::sys::{self, Regs};
use libc::pid_t;

/// Syscall injection into one stopped thread, with a scratch page.
pub(super) struct Inj {
    pub(super) tid: pid_t,
    pub(super) insn: u64,
    pub(super) scratch: u64,
}

/// What an injected syscall produced besides its result.
#[derive(Default)]
pub struct InjOut {
    pub ret: i64,
    /// The new thread or process of a clone/fork.
    pub child: Option<pid_t>,
    /// Signals that arrived meanwhile and were held back (bit n-1: signal n).
    pub held: u64,
}

/// Run one syscall in stopped thread `tid` through the `syscall`
/// instruction at `insn` (past the seccomp filter and any fork/clone
/// event), restoring its registers after.
pub fn inject_raw(tid: pid_t, insn: u64, nr: i64, args: [u64; 6]) -> Result<InjOut, String> {
    let saved = sys::get_regs(tid).map_err(|e| format!("registers of {tid}: {e}"))?;
    let r = run_injected(tid, saved, insn, nr, args);
    // Whatever happened, the thread gets its registers back.
    let _ = sys::set_regs(tid, &saved);
    r
}

pub(super) fn run_injected(
    tid: pid_t,
    saved: Regs,
    insn: u64,
    nr: i64,
    args: [u64; 6],
) -> Result<InjOut, String> {
    let mut r = saved;
    r.rip = insn;
    r.rax = nr as u64;
    r.orig_rax = u64::MAX;
    r.rdi = args[0];
    r.rsi = args[1];
    r.rdx = args[2];
    r.r10 = args[3];
    r.r8 = args[4];
    r.r9 = args[5];
    sys::set_regs(tid, &r).map_err(|e| format!("set registers of {tid}: {e}"))?;
    let mut out = InjOut::default();
    sys::singlestep(tid).map_err(|e| format!("step {tid}: {e}"))?;
    let mut done = false;
    for round in 0..64 {
        if round > 0 {
            sys::singlestep(tid).map_err(|e| format!("step {tid}: {e}"))?;
        }
        // (EINTR from the watchdog's alarm is retried inside.)
        let st = Ctx::wait_tid(tid).ok_or_else(|| format!("cannot wait for {tid}"))?;
        if !libc::WIFSTOPPED(st) {
            return Err(format!("thread {tid} died during an injected syscall"));
        }
        let sig = libc::WSTOPSIG(st);
        let event = (st >> 16) & 0xffff;
        match (sig, event) {
            (libc::SIGTRAP, libc::PTRACE_EVENT_SECCOMP) => {}
            (
                libc::SIGTRAP,
                libc::PTRACE_EVENT_FORK | libc::PTRACE_EVENT_CLONE | libc::PTRACE_EVENT_VFORK,
            ) => out.child = sys::event_msg(tid).ok().map(|m| m as pid_t),
            (libc::SIGTRAP, 0) => {
                // From a syscall stop, the first trap comes before the
                // injected instruction ran.
                let at = sys::get_regs(tid).map(|r| r.rip).unwrap_or(0);
                if at != insn {
                    done = true;
                    break;
                }
            }
            // The instruction is not there (a stale address): give up,
            // leaving the thread stopped.
            (libc::SIGSEGV | libc::SIGBUS | libc::SIGILL, 0)
                if sys::get_regs(tid).is_ok_and(|r| r.rip == insn) =>
            {
                return Err(format!("no syscall instruction at {insn:#x} in {tid}"));
            }
            // A signal arriving meanwhile: held back, for the caller to
            // raise again if the thread goes on.
            (sig, 0) if (1..=64).contains(&sig) => out.held |= 1 << (sig - 1),
            _ => {}
        }
    }
    if !done {
        return Err(format!("injected syscall {nr} in {tid} did not complete"));
    }
    out.ret = sys::get_regs(tid).map(|r| r.rax as i64).unwrap_or(-1);
    Ok(out)
}

impl Inj {
    pub(super) fn new(tid: pid_t, insn: u64) -> Result<Inj, String> {
        let r = inject_raw(
            tid,
            insn,
            libc::SYS_mmap,
            [
                0,
                SCRATCH as u64,
                (libc::PROT_READ | libc::PROT_WRITE) as u64,
                (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as u64,
                u64::MAX,
                0,
            ],
        )?;
        if r.ret < 0 {
            return Err(format!("mmap of a scratch page in {tid}: errno {}", -r.ret));
        }
        Ok(Inj {
            tid,
            insn,
            scratch: r.ret as u64,
        })
    }

    pub(super) fn call(&self, nr: i64, args: [u64; 6]) -> Result<InjOut, String> {
        inject_raw(self.tid, self.insn, nr, args)
    }

    pub(super) fn ret(&self, nr: i64, args: [u64; 6]) -> Result<i64, String> {
        self.call(nr, args).map(|o| o.ret)
    }

    /// Put `data` at offset `off` of the scratch page; returns its address.
    pub(super) fn put(&self, off: usize, data: &[u8]) -> Result<u64, String> {
        let a = self.scratch + off as u64;
        sys::write_mem(self.tid, a, data).map_err(|e| format!("scratch write: {e}"))?;
        Ok(a)
    }

    pub(super) fn done(self) {
        let _ = self.ret(libc::SYS_munmap, [self.scratch, SCRATCH as u64, 0, 0, 0, 0]);
    }

    /// Open `path` in the process with `flags`; `what` names it in errors.
    pub(super) fn open(&self, what: &str, path: &[u8], flags: i32) -> Result<i32, String> {
        let mut b = path.to_vec();
        b.push(0);
        let a = self.put(0, &b)?;
        let fd = self.ret(
            libc::SYS_openat,
            [libc::AT_FDCWD as u64, a, flags as u64, 0, 0, 0],
        )?;
        Ok(check(what, fd)? as i32)
    }
}

pub(super) fn check(what: &str, r: i64) -> Result<i64, String> {
    if r < 0 {
        Err(format!("{what}: errno {}", -r))
    } else {
        Ok(r)
    }
}

/// Wait for the first stop of a new tracee (its initial SIGSTOP or event stop).
pub(super) fn first_stop(tid: pid_t) -> Result<(), String> {
    match Ctx::wait_tid(tid) {
        Some(st) if libc::WIFSTOPPED(st) => Ok(()),
        Some(_) => Err(format!("new tracee {tid} died at birth")),
        None => Err(format!("cannot wait for new tracee {tid}")),
    }
}
