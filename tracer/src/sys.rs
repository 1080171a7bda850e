//! Thin, checked wrappers around ptrace, registers and tracee memory.
//!
//! Tracee memory is read with `process_vm_readv` and written with
//! `process_vm_writev`, falling back to `/proc/PID/mem` for read-only pages.
//! Every access can fail: the guest may pass any pointer, so callers turn a
//! failure into `EFAULT` for the guest, never a panic.

use libc::{c_long, c_void, pid_t, user_regs_struct};
use std::io;

pub type Regs = user_regs_struct;

pub const PTRACE_EVENT_STOP: i32 = 128;

/// Result of a raw call, with errno.
pub fn cvt(r: c_long) -> io::Result<c_long> {
    if r == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn ptrace(req: libc::c_uint, pid: pid_t, addr: usize, data: usize) -> io::Result<c_long> {
    // SAFETY: ptrace with integer arguments; pointer-taking requests below
    // pass valid pointers to owned memory.
    unsafe {
        cvt(libc::ptrace(
            req,
            pid,
            addr as *mut c_void,
            data as *mut c_void,
        ))
    }
}

pub fn seize(pid: pid_t, options: i32) -> io::Result<()> {
    ptrace(libc::PTRACE_SEIZE, pid, 0, options as usize).map(drop)
}

pub fn cont(pid: pid_t, sig: i32) -> io::Result<()> {
    note_request(pid, libc::PTRACE_CONT);
    ptrace(libc::PTRACE_CONT, pid, 0, sig as usize).map(drop)
}

pub fn syscall(pid: pid_t, sig: i32) -> io::Result<()> {
    note_request(pid, libc::PTRACE_SYSCALL);
    ptrace(libc::PTRACE_SYSCALL, pid, 0, sig as usize).map(drop)
}

pub fn singlestep(pid: pid_t) -> io::Result<()> {
    note_request(pid, libc::PTRACE_SINGLESTEP);
    ptrace(libc::PTRACE_SINGLESTEP, pid, 0, 0).map(drop)
}

// A spin probe's PTRACE_INTERRUPT is asynchronous: its stop may surface
// inside a nested wait (an injected call, a step of a handler), where it
// is not expected. The thread it was sent to, and the last request each
// thread was resumed with, let such a wait resume the thread as it was
// going (see `Ctx::wait_tid`).
static PROBE_TID: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);
const SLOTS: usize = 1024;
static LAST_REQ: [std::sync::atomic::AtomicU64; SLOTS] =
    [const { std::sync::atomic::AtomicU64::new(0) }; SLOTS];

fn note_request(pid: pid_t, req: u32) {
    let v = (pid as u32 as u64) << 32 | req as u64;
    LAST_REQ[pid as usize % SLOTS].store(v, std::sync::atomic::Ordering::Relaxed);
}

/// Interrupt `pid` for a spin probe.
pub fn probe(pid: pid_t) -> io::Result<()> {
    PROBE_TID.store(pid, std::sync::atomic::Ordering::Relaxed);
    interrupt(pid)
}

/// A probe of `pid` is in flight.
pub fn probe_in_flight(pid: pid_t) -> bool {
    PROBE_TID.load(std::sync::atomic::Ordering::Relaxed) == pid
}

/// `st`, a stop of `pid`, is its probe's: take the probe (true).
pub fn take_probe(pid: pid_t, st: i32) -> bool {
    let ev = libc::WIFSTOPPED(st) && (st >> 16) == PTRACE_EVENT_STOP;
    ev && PROBE_TID
        .compare_exchange(
            pid,
            0,
            std::sync::atomic::Ordering::Relaxed,
            std::sync::atomic::Ordering::Relaxed,
        )
        .is_ok()
}

/// Resume `pid` with the request it was last resumed with.
pub fn resume_as_before(pid: pid_t) -> io::Result<()> {
    let v = LAST_REQ[pid as usize % SLOTS].load(std::sync::atomic::Ordering::Relaxed);
    let req = if (v >> 32) as u32 == pid as u32 {
        v as u32
    } else {
        libc::PTRACE_CONT
    };
    note_request(pid, req);
    ptrace(req as _, pid, 0, 0).map(drop)
}

pub fn interrupt(pid: pid_t) -> io::Result<()> {
    ptrace(libc::PTRACE_INTERRUPT, pid, 0, 0).map(drop)
}

pub fn event_msg(pid: pid_t) -> io::Result<u64> {
    let mut v: libc::c_ulong = 0;
    ptrace(libc::PTRACE_GETEVENTMSG, pid, 0, &mut v as *mut _ as usize)?;
    Ok(v as u64)
}

/// PTRACE_GET_SYSCALL_INFO's op: 1 entry, 2 exit, 3 seccomp.
pub fn syscall_op(pid: pid_t) -> Option<u8> {
    let mut buf = [0u8; 88];
    ptrace(0x420e, pid, buf.len(), buf.as_mut_ptr() as usize).ok()?;
    Some(buf[0])
}

/// The FPU/SSE/AVX register state (XSAVE layout), for comparing two
/// moments of a thread.
pub fn get_xstate(pid: pid_t) -> io::Result<Vec<u8>> {
    const NT_X86_XSTATE: usize = 0x202;
    let mut buf = vec![0u8; 4096];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut c_void,
        iov_len: buf.len(),
    };
    // SAFETY: the kernel writes at most iov_len bytes into `buf`.
    let r = unsafe {
        libc::ptrace(
            libc::PTRACE_GETREGSET,
            pid,
            NT_X86_XSTATE as *mut c_void,
            &mut iov as *mut libc::iovec as *mut c_void,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(iov.iov_len);
    Ok(buf)
}

pub fn get_regs(pid: pid_t) -> io::Result<Regs> {
    // SAFETY: user_regs_struct is plain data; zeroed is a valid value.
    let mut r: Regs = unsafe { std::mem::zeroed() };
    ptrace(libc::PTRACE_GETREGS, pid, 0, &mut r as *mut _ as usize)?;
    Ok(r)
}

pub fn set_regs(pid: pid_t, r: &Regs) -> io::Result<()> {
    ptrace(libc::PTRACE_SETREGS, pid, 0, r as *const _ as usize).map(drop)
}

/// Replace the siginfo of the signal a tracee is stopped to receive.
pub fn set_siginfo(pid: pid_t, info: &[u8; 128]) -> io::Result<()> {
    ptrace(libc::PTRACE_SETSIGINFO, pid, 0, info.as_ptr() as usize).map(drop)
}

pub fn get_siginfo(pid: pid_t) -> io::Result<libc::siginfo_t> {
    // SAFETY: siginfo_t is plain data.
    let mut si: libc::siginfo_t = unsafe { std::mem::zeroed() };
    ptrace(libc::PTRACE_GETSIGINFO, pid, 0, &mut si as *mut _ as usize)?;
    Ok(si)
}

/// Wait for any tracee stop or exit. Returns (tid, raw status).
pub fn wait_any(flags: i32) -> io::Result<(pid_t, i32)> {
    wait_pid(-1, flags)
}

pub fn wait_pid(pid: pid_t, flags: i32) -> io::Result<(pid_t, i32)> {
    let mut st = 0;
    // SAFETY: plain syscall with a pointer to a local.
    let r = unsafe { libc::waitpid(pid, &mut st, flags | libc::__WALL) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok((r, st))
    }
}

/// Read tracee memory. Short reads (an unmapped page in the range) are errors.
pub fn read_mem(pid: pid_t, addr: u64, buf: &mut [u8]) -> io::Result<()> {
    if buf.is_empty() {
        return Ok(());
    }
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut c_void,
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut c_void,
        iov_len: buf.len(),
    };
    // SAFETY: local iovec points at `buf`, which outlives the call.
    let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    if n as usize != buf.len() {
        return Err(io::Error::from_raw_os_error(libc::EFAULT));
    }
    Ok(())
}

/// Write tracee memory; read-only pages are written through /proc/PID/mem.
pub fn write_mem(pid: pid_t, addr: u64, data: &[u8]) -> io::Result<()> {
    if data.is_empty() {
        return Ok(());
    }
    let local = libc::iovec {
        iov_base: data.as_ptr() as *mut c_void,
        iov_len: data.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut c_void,
        iov_len: data.len(),
    };
    // SAFETY: local iovec points at `data`, which outlives the call.
    let n = unsafe { libc::process_vm_writev(pid, &local, 1, &remote, 1, 0) };
    if n >= 0 && n as usize == data.len() {
        return Ok(());
    }
    write_mem_proc(pid, addr, data)
}

/// Write several pieces of code (read-only pages: through /proc/PID/mem,
/// opened once).
pub fn write_code(pid: pid_t, pieces: &[(u64, &[u8])]) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(format!("/proc/{pid}/mem"))?;
    for (addr, data) in pieces {
        f.write_all_at(data, *addr)?;
    }
    Ok(())
}

fn write_mem_proc(pid: pid_t, addr: u64, data: &[u8]) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(format!("/proc/{pid}/mem"))?;
    f.write_all_at(data, addr)
}

pub fn read_u32(pid: pid_t, addr: u64) -> io::Result<u32> {
    let mut b = [0u8; 4];
    read_mem(pid, addr, &mut b)?;
    Ok(u32::from_ne_bytes(b))
}

pub fn read_u64(pid: pid_t, addr: u64) -> io::Result<u64> {
    let mut b = [0u8; 8];
    read_mem(pid, addr, &mut b)?;
    Ok(u64::from_ne_bytes(b))
}

pub fn write_u32(pid: pid_t, addr: u64, v: u32) -> io::Result<()> {
    write_mem(pid, addr, &v.to_ne_bytes())
}

pub fn write_u64(pid: pid_t, addr: u64, v: u64) -> io::Result<()> {
    write_mem(pid, addr, &v.to_ne_bytes())
}

/// Read a (sec, nsec) pair of i64s.
pub fn read_timespec(pid: pid_t, addr: u64) -> io::Result<(i64, i64)> {
    let mut b = [0u8; 16];
    read_mem(pid, addr, &mut b)?;
    let s = i64::from_ne_bytes(b[0..8].try_into().unwrap_or([0; 8]));
    let n = i64::from_ne_bytes(b[8..16].try_into().unwrap_or([0; 8]));
    Ok((s, n))
}

pub fn write_pair(pid: pid_t, addr: u64, a: i64, b: i64) -> io::Result<()> {
    let mut buf = [0u8; 16];
    buf[..8].copy_from_slice(&a.to_ne_bytes());
    buf[8..].copy_from_slice(&b.to_ne_bytes());
    write_mem(pid, addr, &buf)
}

/// Read a NUL-terminated string of at most `max` bytes, page by page.
pub fn read_cstr(pid: pid_t, addr: u64, max: usize) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut a = addr;
    while out.len() < max {
        let room = 4096 - (a as usize & 4095);
        let mut chunk = vec![0u8; room.min(max - out.len())];
        read_mem(pid, a, &mut chunk)?;
        if let Some(p) = chunk.iter().position(|&c| c == 0) {
            out.extend_from_slice(&chunk[..p]);
            return Ok(out);
        }
        out.extend_from_slice(&chunk);
        a += chunk.len() as u64;
    }
    Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG))
}

/// A pidfd for `pid`, used to steal file descriptors.
pub fn pidfd_open(pid: pid_t) -> io::Result<i32> {
    // SAFETY: plain syscall.
    let r = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    cvt(r).map(|v| v as i32)
}

/// Duplicate file descriptor `fd` of the process behind `pidfd` into ours.
pub fn pidfd_getfd(pidfd: i32, fd: i32) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: plain syscall; on success we own the returned descriptor.
    let r = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd, fd, 0) };
    let fd = cvt(r)? as i32;
    // SAFETY: fd is a fresh descriptor owned by us.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// Send a signal with a given siginfo to one thread.
pub fn tgsigqueue(tgid: pid_t, tid: pid_t, sig: i32, code: i32, value: u64) -> io::Result<()> {
    // siginfo_t for the rt variant: signo, errno, code, then the union:
    // (pid, uid) then sigval at offset 24.
    let mut si = [0u8; 128];
    si[0..4].copy_from_slice(&sig.to_ne_bytes());
    si[8..12].copy_from_slice(&code.to_ne_bytes());
    si[24..32].copy_from_slice(&value.to_ne_bytes());
    // SAFETY: si is a 128-byte buffer, the size of siginfo_t.
    let r = unsafe { libc::syscall(libc::SYS_rt_tgsigqueueinfo, tgid, tid, sig, si.as_ptr()) };
    cvt(r).map(drop)
}

pub fn tgkill(tgid: pid_t, tid: pid_t, sig: i32) -> io::Result<()> {
    // SAFETY: plain syscall.
    cvt(unsafe { libc::syscall(libc::SYS_tgkill, tgid, tid, sig) }).map(drop)
}

/// Decoded arguments of the syscall at a stop.
#[derive(Clone, Copy, Debug)]
pub struct Args {
    pub nr: i64,
    pub a: [u64; 6],
}

impl Args {
    pub fn from_regs(r: &Regs) -> Args {
        Args {
            nr: r.orig_rax as i64,
            a: [r.rdi, r.rsi, r.rdx, r.r10, r.r8, r.r9],
        }
    }
}

/// Store argument `i` into registers.
pub fn set_arg(r: &mut Regs, i: usize, v: u64) {
    match i {
        0 => r.rdi = v,
        1 => r.rsi = v,
        2 => r.rdx = v,
        3 => r.r10 = v,
        4 => r.r8 = v,
        _ => r.r9 = v,
    }
}

/// Signal masks and pending sets of a thread, from /proc.
#[derive(Clone, Copy, Debug, Default)]
pub struct SigState {
    pub pending: u64,
    pub shared: u64,
    pub blocked: u64,
    pub ignored: u64,
    pub caught: u64,
}

pub fn sig_state(tid: pid_t) -> Option<SigState> {
    let s = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    let mut st = SigState::default();
    for line in s.lines() {
        let (k, v) = line.split_once(':')?;
        let v = u64::from_str_radix(v.trim(), 16).unwrap_or(0);
        match k {
            "SigPnd" => st.pending = v,
            "ShdPnd" => st.shared = v,
            "SigBlk" => st.blocked = v,
            "SigIgn" => st.ignored = v,
            "SigCgt" => {
                st.caught = v;
                break;
            }
            _ => {}
        }
    }
    Some(st)
}

/// Signals whose default action is to do nothing.
pub const DEFAULT_IGNORED: u64 = (1 << (libc::SIGCHLD - 1))
    | (1 << (libc::SIGURG - 1))
    | (1 << (libc::SIGWINCH - 1))
    | (1 << (libc::SIGCONT - 1));

impl SigState {
    /// Pending signals that would interrupt a wait under mask `blocked`.
    pub fn deliverable(&self, blocked: u64) -> u64 {
        let pend = self.pending | self.shared;
        let unblockable = (1u64 << (libc::SIGKILL - 1)) | (1u64 << (libc::SIGSTOP - 1));
        let blocked = blocked & !unblockable;
        pend & !blocked & !self.ignored & !(DEFAULT_IGNORED & !self.caught)
    }
}

/// The thread id as the guest sees it (inside the PID namespace).
pub fn ns_tid(tid: pid_t) -> Option<pid_t> {
    ns_ids(tid).map(|(p, _, _)| p)
}

/// `ns_tid`, or the host id where there is none.
pub fn ns_id(tid: pid_t) -> pid_t {
    ns_tid(tid).unwrap_or(tid)
}

/// PID, process group and session of host process `pid` in its namespace.
pub fn ns_ids(pid: pid_t) -> Option<(pid_t, pid_t, pid_t)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let last = |key: &str| -> Option<pid_t> {
        let l = s.lines().find(|l| l.starts_with(key))?;
        l.split_whitespace().last()?.parse().ok()
    };
    let pid = last("NSpid:")?;
    Some((
        pid,
        last("NSpgid:").unwrap_or(pid),
        last("NSsid:").unwrap_or(pid),
    ))
}

/// Is `f` ready for `events` now?
pub fn ready(f: &std::os::fd::OwnedFd, events: i16) -> bool {
    let mut p = libc::pollfd {
        fd: std::os::fd::AsRawFd::as_raw_fd(f),
        events,
        revents: 0,
    };
    // SAFETY: polling one owned descriptor without blocking.
    unsafe { libc::poll(&mut p, 1, 0) > 0 }
}

/// Offset of debug register `i` in the tracee's `struct user`.
fn debugreg_off(i: usize) -> usize {
    std::mem::offset_of!(libc::user, u_debugreg) + 8 * i
}

/// Debug register `i` of a stopped tracee (DR6: what fired).
pub fn debugreg(pid: pid_t, i: usize) -> io::Result<u64> {
    // SAFETY: PEEKUSER into no buffer; the value is the return (errno tells errors).
    unsafe { *libc::__errno_location() = 0 };
    let v = unsafe { libc::ptrace(libc::PTRACE_PEEKUSER, pid, debugreg_off(i), 0) };
    if v == -1 && io::Error::last_os_error().raw_os_error() != Some(0) {
        return Err(io::Error::last_os_error());
    }
    Ok(v as u64)
}

/// Watch `w` (address, length 1/2/4/8, aligned) for reads and writes in
/// debug registers 0-3 of a stopped tracee; the rest off.
pub fn set_watches(pid: pid_t, w: &[(u64, u8)]) -> io::Result<()> {
    let poke = |i: usize, v: u64| {
        // SAFETY: POKEUSER of a debug register; the kernel checks the value.
        cvt(unsafe { libc::ptrace(libc::PTRACE_POKEUSER, pid, debugreg_off(i), v) }).map(|_| ())
    };
    poke(7, 0)?;
    let mut dr7 = 0u64;
    for (i, &(addr, len)) in w.iter().take(4).enumerate() {
        poke(i, addr)?;
        let len_bits = match len {
            1 => 0b00,
            2 => 0b01,
            8 => 0b10,
            _ => 0b11,
        };
        dr7 |= 1 << (2 * i) | 0b11 << (16 + 4 * i) | len_bits << (18 + 4 * i);
    }
    if dr7 != 0 {
        poke(7, dr7)?;
    }
    Ok(())
}

/// Clear DR6's record of what fired (ptrace keeps it until written).
pub fn clear_dr6(pid: pid_t) {
    // SAFETY: POKEUSER of DR6; errors leave it as it was.
    unsafe { libc::ptrace(libc::PTRACE_POKEUSER, pid, debugreg_off(6), 0u64) };
}
