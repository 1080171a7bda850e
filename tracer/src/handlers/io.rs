//! Calls that can block on a descriptor. None of them may block the turn:
//! the supervisor steals a duplicate of the guest's descriptor (pidfd_getfd
//! shares the open file description) and asks the kernel whether the call
//! would block. If it would, the thread parks in the world and the stolen
//! descriptor is polled (without blocking) at each scheduling decision. A
//! large write to a pipe or socket is done in non-blocking steps and
//! continued by the supervisor until it is complete, as a blocking write
//! would be.

use super::{Out, EFAULT, EINVAL};
use crate::ctx::Ctx;
use crate::sys::{self, ready, Args, Regs};
use crate::task::{Park, WriteCont};
use detrun_scheduler::Wait;
use libc::pid_t;
use std::os::fd::{AsRawFd, OwnedFd};

const POLLIN: i16 = libc::POLLIN;
const POLLOUT: i16 = libc::POLLOUT;
/// Writes up to this size fit in one free pipe buffer: POLLOUT means they
/// will not block.
const ATOMIC_WRITE: u64 = 4096;

enum Probe {
    /// Regular file, directory, block device, or a descriptor we cannot
    /// steal (the kernel will answer EBADF): never blocks.
    File,
    /// /dev/random or /dev/urandom.
    Random,
    /// Would not block now (or the description is O_NONBLOCK).
    Ready(OwnedFd),
    /// Would block.
    Block(OwnedFd),
}

impl Ctx {
    pub fn steal(&self, tid: pid_t, fd: i32) -> Option<OwnedFd> {
        let p = self.threads.get(&tid)?.proc;
        let pidfd = self.procs[p as usize].pidfd;
        if pidfd < 0 || fd < 0 {
            return None;
        }
        sys::pidfd_getfd(pidfd, fd).ok()
    }
}

fn mode_of(f: &OwnedFd) -> Option<(u32, u64)> {
    // SAFETY: fstat into a local struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(f.as_raw_fd(), &mut st) } != 0 {
        return None;
    }
    Some((st.st_mode & libc::S_IFMT, st.st_rdev))
}

pub(crate) fn nonblocking(f: &OwnedFd) -> bool {
    // SAFETY: F_GETFL on an owned descriptor.
    let fl = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_GETFL) };
    fl >= 0 && fl & libc::O_NONBLOCK != 0
}

fn probe(s: &Ctx, tid: pid_t, fd: u64, events: i16) -> Probe {
    let Some(f) = s.steal(tid, fd as i32) else {
        return Probe::File;
    };
    let Some((mode, rdev)) = mode_of(&f) else {
        return Probe::File;
    };
    match mode {
        libc::S_IFREG | libc::S_IFDIR | libc::S_IFBLK => return Probe::File,
        libc::S_IFCHR if libc::major(rdev) == 1 && matches!(libc::minor(rdev), 8 | 9) => {
            return Probe::Random
        }
        _ => {}
    }
    if ready(&f, events) || nonblocking(&f) {
        Probe::Ready(f)
    } else {
        Probe::Block(f)
    }
}

fn park_on(s: &mut Ctx, tid: pid_t, fds: Vec<(OwnedFd, i16)>) -> Out {
    if let Some(t) = s.threads.get_mut(&tid) {
        t.io = fds;
    }
    Out::Park(Park::Io, Wait::Io, None)
}

/// Park on one descriptor, in the thread's own list (no allocation: the
/// list keeps its capacity from park to park).
fn park_on_one(s: &mut Ctx, tid: pid_t, f: OwnedFd, events: i16) -> Out {
    if let Some(t) = s.threads.get_mut(&tid) {
        t.io.clear();
        t.io.push((f, events));
    }
    Out::Park(Park::Io, Wait::Io, None)
}

/// Readiness check for a call that reads (`events` = POLLIN) or writes.
fn simple(s: &mut Ctx, tid: pid_t, fd: u64, events: i16) -> Out {
    match probe(s, tid, fd, events) {
        Probe::File | Probe::Random | Probe::Ready(_) => Out::Pass,
        Probe::Block(f) => park_on_one(s, tid, f, events),
    }
}

pub fn handle(s: &mut Ctx, tid: pid_t, a: &Args, regs: Regs) -> Out {
    use crate::handlers::nr::*;
    let x = a.a;
    match a.nr {
        SYS_read => match probe(s, tid, x[0], POLLIN) {
            Probe::Random => Out::Ret(super::misc::fill_random(s, tid, x[1], x[2] as usize)),
            // (The stat code checks the file is regular; otherwise it makes
            // the call trapped, as here.)
            Probe::File if x[0] > 2 => match crate::patch::at_read(s, tid, &regs) {
                Some(r) => Out::PassWith(r),
                None => Out::Pass,
            },
            Probe::File | Probe::Ready(_) => Out::Pass,
            Probe::Block(f) => park_on_one(s, tid, f, POLLIN),
        },
        SYS_readv => match probe(s, tid, x[0], POLLIN) {
            Probe::Random => Out::Ret(readv_random(s, tid, x[1], x[2])),
            Probe::File | Probe::Ready(_) => Out::Pass,
            Probe::Block(f) => park_on_one(s, tid, f, POLLIN),
        },
        SYS_recvfrom | SYS_recvmsg | SYS_recvmmsg => {
            let flags = if a.nr == SYS_recvfrom { x[3] } else { x[2] };
            if flags & MSG_DONTWAIT as u64 != 0 {
                return Out::Pass;
            }
            simple(s, tid, x[0], POLLIN)
        }
        SYS_accept | SYS_accept4 => simple(s, tid, x[0], POLLIN),
        SYS_write | SYS_writev => write(s, tid, a),
        SYS_sendto if x[3] & MSG_DONTWAIT as u64 == 0 && x[4] == 0 => write(s, tid, a),
        SYS_sendto | SYS_sendmsg | SYS_sendmmsg => {
            let flags = if a.nr == SYS_sendto { x[3] } else { x[2] };
            if flags & MSG_DONTWAIT as u64 != 0 {
                return Out::Pass;
            }
            simple(s, tid, x[0], POLLOUT)
        }
        SYS_connect => Out::Pass,
        SYS_splice | SYS_tee | SYS_sendfile | SYS_vmsplice => {
            let (inp, out) = match a.nr {
                SYS_splice => (Some(x[0]), Some(x[2])),
                SYS_tee => (Some(x[0]), Some(x[1])),
                SYS_sendfile => (Some(x[1]), Some(x[0])),
                _ => (None, Some(x[0])),
            };
            let mut wait = Vec::new();
            for (fd, ev) in [(inp, POLLIN), (out, POLLOUT)] {
                if let Some(fd) = fd {
                    if let Probe::Block(f) = probe(s, tid, fd, ev) {
                        wait.push((f, ev));
                    }
                }
            }
            if wait.is_empty() {
                Out::Pass
            } else {
                park_on(s, tid, wait)
            }
        }
        SYS_poll | SYS_ppoll => poll(s, tid, a),
        SYS_select | SYS_pselect6 => select(s, tid, a),
        SYS_epoll_wait | SYS_epoll_pwait | SYS_epoll_pwait2 => epoll(s, tid, a),
        SYS_flock => flock(s, tid, x[0], x[1]),
        SYS_fcntl => {
            // Only F_SETLKW and F_OFD_SETLKW trap. Try without waiting.
            let Some(f) = s.steal(tid, x[0] as i32) else {
                return Out::Pass;
            };
            let nb = if x[1] as i32 == F_SETLKW {
                F_SETLK
            } else {
                F_OFD_SETLK
            };
            let mut lk = [0u8; 32];
            if sys::read_mem(tid, x[2], &mut lk).is_err() {
                return Out::Ret(EFAULT);
            }
            if x[1] as i32 == F_OFD_SETLKW {
                // OFD locks belong to the description: take it here.
                // SAFETY: fcntl with a local flock buffer.
                let r = unsafe { libc::fcntl(f.as_raw_fd(), nb, lk.as_mut_ptr()) };
                if r == 0 {
                    return Out::Ret(0);
                }
                return retry_later(s, tid);
            }
            // POSIX locks belong to the process: test for a conflict here.
            let mut probe_lk = lk;
            // SAFETY: F_GETLK on a local copy.
            let r = unsafe { libc::fcntl(f.as_raw_fd(), F_GETLK, probe_lk.as_mut_ptr()) };
            let typ = i16::from_ne_bytes([probe_lk[0], probe_lk[1]]);
            if r == 0 && typ == F_UNLCK as i16 {
                return Out::Pass; // no conflict: the real F_SETLKW will not wait
            }
            let _ = nb;
            retry_later(s, tid)
        }
        _ => Out::Pass,
    }
}

/// Park until another thread has run (locks have no readiness to poll).
fn retry_later(s: &mut Ctx, tid: pid_t) -> Out {
    if let Some(t) = s.threads.get_mut(&tid) {
        t.io.clear();
    }
    Out::Park(Park::Retry, Wait::Io, None)
}

fn flock(s: &mut Ctx, tid: pid_t, fd: u64, op: u64) -> Out {
    if op & libc::LOCK_NB as u64 != 0 {
        return Out::Pass;
    }
    let Some(f) = s.steal(tid, fd as i32) else {
        return Out::Pass;
    };
    // flock locks belong to the open file description, which we share.
    // SAFETY: flock on an owned descriptor.
    let r = unsafe { libc::flock(f.as_raw_fd(), op as i32 | libc::LOCK_NB) };
    if r == 0 {
        return Out::Ret(0);
    }
    let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
    if e == libc::EWOULDBLOCK {
        return retry_later(s, tid);
    }
    Out::Ret(-(e as i64))
}

fn readv_random(s: &mut Ctx, tid: pid_t, iov: u64, cnt: u64) -> i64 {
    if cnt > 1024 {
        return EINVAL;
    }
    let mut total = 0i64;
    for i in 0..cnt {
        let mut b = [0u8; 16];
        if sys::read_mem(tid, iov + i * 16, &mut b).is_err() {
            return if total > 0 { total } else { EFAULT };
        }
        let base = u64::from_ne_bytes(b[..8].try_into().unwrap_or([0; 8]));
        let len = u64::from_ne_bytes(b[8..].try_into().unwrap_or([0; 8]));
        let r = super::misc::fill_random(s, tid, base, len as usize);
        if r < 0 {
            return if total > 0 { total } else { r };
        }
        total += r;
    }
    total
}

/// The (base, len) segments of a write or writev, skipping `skip` bytes,
/// into `out` (reused: no allocation per call).
fn segments(
    tid: pid_t,
    nr: i64,
    a: &[u64; 6],
    skip: u64,
    out: &mut Vec<(u64, u64)>,
) -> Result<(), i64> {
    out.clear();
    let mut skip = skip;
    let mut add = |b: u64, l: u64| {
        if skip >= l {
            skip -= l;
        } else {
            out.push((b + skip, l - skip));
            skip = 0;
        }
    };
    if nr != libc::SYS_writev {
        add(a[1], a[2]);
        return Ok(());
    }
    if a[2] > 1024 {
        return Err(EINVAL);
    }
    // The iovec array, 64 entries at a time.
    let mut raw = [0u8; 64 * 16];
    let mut i = 0;
    while i < a[2] {
        let k = (a[2] - i).min(64) as usize;
        sys::read_mem(tid, a[1] + i * 16, &mut raw[..k * 16]).map_err(|_| EFAULT)?;
        for c in raw[..k * 16].chunks_exact(16) {
            let base = u64::from_ne_bytes(c[..8].try_into().unwrap_or([0; 8]));
            let len = u64::from_ne_bytes(c[8..].try_into().unwrap_or([0; 8]));
            add(base, len);
        }
        i += k as u64;
    }
    Ok(())
}

/// A write, writev or sendto (without address) that could block: the
/// supervisor writes the guest's bytes itself, without blocking, through its
/// duplicate of the descriptor, parking the guest while the pipe or socket
/// is full. The guest sees one call that wrote everything, as a blocking
/// write would.
fn write(s: &mut Ctx, tid: pid_t, a: &Args) -> Out {
    let fd = a.a[0] as i32;
    if super::fs::start_window_open(s) {
        super::fs::touch_fd(s, tid, fd);
    }
    let total = if a.nr == libc::SYS_writev {
        let mut segs = std::mem::take(&mut s.io.segs);
        let r = segments(tid, a.nr, &a.a, 0, &mut segs);
        let total = segs.iter().fold(0u64, |t, x| t.saturating_add(x.1));
        s.io.segs = segs;
        match r {
            Ok(()) => total,
            Err(e) => return Out::Ret(e),
        }
    } else {
        a.a[2]
    };
    let cont = s.threads.get(&tid).and_then(|t| t.wcont);
    let (f, w) = match cont {
        Some(w) => match s.steal(tid, fd) {
            Some(f) => (f, w),
            None => return Out::Pass,
        },
        None => match probe(s, tid, fd as u64, POLLOUT) {
            Probe::File | Probe::Random => return Out::Pass,
            Probe::Ready(f) if total <= ATOMIC_WRITE || nonblocking(&f) => return Out::Pass,
            Probe::Ready(f) | Probe::Block(f) => (f, WriteCont { done: 0 }),
        },
    };
    let is_sock = mode_of(&f).is_some_and(|m| m.0 == libc::S_IFSOCK);
    let nosig = a.nr == libc::SYS_sendto && a.a[3] & libc::MSG_NOSIGNAL as u64 != 0;
    // One buffer for the run: no allocation (or zeroing) per write.
    let mut buf = std::mem::take(&mut s.io.buf);
    if buf.len() < COPY_BUF {
        buf.resize(COPY_BUF, 0);
    }
    let n = COPY_BUF.min(total as usize).max(1);
    let out = copy_out(s, tid, a, (f, w), total, (is_sock, nosig), &mut buf[..n]);
    s.io.buf = buf;
    out
}

/// Bytes the supervisor moves per step of a write it completes itself.
const COPY_BUF: usize = 65536;

/// The loop of [`write`]: gather the guest's bytes into `buf` and write
/// them without blocking, parking the guest when the descriptor is full.
fn copy_out(
    s: &mut Ctx,
    tid: pid_t,
    a: &Args,
    (f, mut w): (OwnedFd, WriteCont),
    total: u64,
    (is_sock, nosig): (bool, bool),
    buf: &mut [u8],
) -> Out {
    while w.done < total {
        let mut segs = std::mem::take(&mut s.io.segs);
        if let Err(e) = segments(tid, a.nr, &a.a, w.done, &mut segs) {
            s.io.segs = segs;
            return finish(s, tid, w, e);
        }
        // Gather up to one buffer of the remaining bytes.
        let mut n = 0usize;
        let mut fault = false;
        for &(b, l) in &segs {
            let take = (l as usize).min(buf.len() - n);
            if take == 0 {
                break;
            }
            if sys::read_mem(tid, b, &mut buf[n..n + take]).is_err() {
                fault = n == 0;
                break;
            }
            n += take;
        }
        s.io.segs = segs;
        if fault {
            return finish(s, tid, w, EFAULT);
        }
        let r = nb_write(&f, &buf[..n], is_sock);
        if r > 0 {
            w.done += r as u64;
            continue;
        }
        if r == -(libc::EAGAIN as i64) {
            if let Some(t) = s.threads.get_mut(&tid) {
                t.wcont = Some(w);
            }
            return park_on_one(s, tid, f, POLLOUT);
        }
        if r == -(libc::EPIPE as i64) && !nosig {
            let tgid = s
                .threads
                .get(&tid)
                .map(|t| s.procs[t.proc as usize].tgid)
                .unwrap_or(tid);
            let _ = sys::tgkill(tgid, tid, libc::SIGPIPE);
        }
        return finish(s, tid, w, r);
    }
    finish(s, tid, w, 0)
}

fn finish(s: &mut Ctx, tid: pid_t, w: WriteCont, err: i64) -> Out {
    if let Some(t) = s.threads.get_mut(&tid) {
        t.wcont = None;
    }
    Out::Ret(if w.done > 0 || err == 0 {
        w.done as i64
    } else {
        err
    })
}

/// One non-blocking write through the supervisor's duplicate.
fn nb_write(f: &OwnedFd, data: &[u8], sock: bool) -> i64 {
    let fd = f.as_raw_fd();
    // SAFETY: writes from a local buffer to an owned descriptor; the
    // description's O_NONBLOCK is set only for this call (every tracee
    // sharing it is stopped).
    unsafe {
        let r = if sock {
            libc::send(
                fd,
                data.as_ptr().cast(),
                data.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        } else {
            let fl = libc::fcntl(fd, libc::F_GETFL);
            libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK);
            let r = libc::write(fd, data.as_ptr().cast(), data.len());
            let e = *libc::__errno_location();
            libc::fcntl(fd, libc::F_SETFL, fl);
            *libc::__errno_location() = e;
            r
        };
        if r < 0 {
            -(*libc::__errno_location() as i64)
        } else {
            r as i64
        }
    }
}

fn deadline_ms(s: &Ctx, ms: i64) -> Option<u64> {
    (ms >= 0).then(|| {
        s.world
            .clock
            .monotonic()
            .saturating_add(ms as u64 * 1_000_000)
    })
}

fn deadline_ts(s: &Ctx, tid: pid_t, addr: u64) -> Result<Option<u64>, i64> {
    if addr == 0 {
        return Ok(None);
    }
    let d = super::time::read_ts(tid, addr)?;
    Ok(Some(s.world.clock.monotonic().saturating_add(d)))
}

/// Park a poll-like call until one of `fds` is ready or `deadline`.
fn poll_wait(
    s: &mut Ctx,
    tid: pid_t,
    fds: Vec<(OwnedFd, i16)>,
    any_ready: bool,
    deadline: Option<u64>,
    mask: Option<u64>,
) -> Out {
    if any_ready || deadline == Some(s.world.clock.monotonic()) {
        return Out::Pass;
    }
    if let Some(t) = s.threads.get_mut(&tid) {
        t.io = fds;
        t.wait_mask = mask;
    }
    Out::Park(Park::Poll, Wait::Io, deadline)
}

/// Steal each descriptor and check readiness; a descriptor that cannot be
/// stolen is "ready" (the kernel reports POLLNVAL at once).
fn gather(s: &Ctx, tid: pid_t, want: &[(i32, i16)]) -> (Vec<(OwnedFd, i16)>, bool) {
    let mut out = Vec::with_capacity(want.len());
    let mut any = false;
    for &(fd, ev) in want {
        if fd < 0 {
            continue;
        }
        match s.steal(tid, fd) {
            Some(f) => {
                if ready(&f, ev) {
                    any = true;
                }
                out.push((f, ev));
            }
            None => any = true,
        }
    }
    (out, any)
}

fn read_mask(tid: pid_t, addr: u64) -> Result<Option<u64>, i64> {
    if addr == 0 {
        return Ok(None);
    }
    sys::read_u64(tid, addr).map(Some).map_err(|_| EFAULT)
}

fn poll(s: &mut Ctx, tid: pid_t, a: &Args) -> Out {
    let x = a.a;
    let n = x[1];
    if n > 65536 {
        return Out::Ret(EINVAL);
    }
    let mut raw = vec![0u8; n as usize * 8];
    if sys::read_mem(tid, x[0], &mut raw).is_err() {
        return Out::Ret(EFAULT);
    }
    let want: Vec<(i32, i16)> = raw
        .chunks_exact(8)
        .map(|c| {
            (
                i32::from_ne_bytes([c[0], c[1], c[2], c[3]]),
                i16::from_ne_bytes([c[4], c[5]]),
            )
        })
        .collect();
    let (deadline, mask) = if a.nr == libc::SYS_poll {
        (deadline_ms(s, x[2] as i32 as i64), None)
    } else {
        let d = match deadline_ts(s, tid, x[2]) {
            Ok(d) => d,
            Err(e) => return Out::Ret(e),
        };
        match read_mask(tid, x[3]) {
            Ok(m) => (d, m),
            Err(e) => return Out::Ret(e),
        }
    };
    let (fds, any) = gather(s, tid, &want);
    poll_wait(s, tid, fds, any, deadline, mask)
}

fn select(s: &mut Ctx, tid: pid_t, a: &Args) -> Out {
    let x = a.a;
    let nfds = x[0] as i32;
    if !(0..=1024 * 64).contains(&nfds) {
        return Out::Ret(EINVAL);
    }
    let words = (nfds as usize).div_ceil(64);
    let mut want: Vec<(i32, i16)> = Vec::new();
    for (set, ev) in [(x[1], POLLIN), (x[2], POLLOUT), (x[3], libc::POLLPRI)] {
        if set == 0 {
            continue;
        }
        let mut b = vec![0u8; words * 8];
        if sys::read_mem(tid, set, &mut b).is_err() {
            return Out::Ret(EFAULT);
        }
        for fd in 0..nfds {
            if b[fd as usize / 8] & (1 << (fd % 8)) != 0 {
                want.push((fd, ev));
            }
        }
    }
    let (deadline, mask) = if a.nr == libc::SYS_select {
        if x[4] == 0 {
            (None, None)
        } else {
            let Ok((sec, usec)) = sys::read_timespec(tid, x[4]) else {
                return Out::Ret(EFAULT);
            };
            if sec < 0 || !(0..1_000_000).contains(&usec) {
                return Out::Ret(EINVAL);
            }
            let ns = sec as u64 * 1_000_000_000 + usec as u64 * 1000;
            (Some(s.world.clock.monotonic().saturating_add(ns)), None)
        }
    } else {
        let d = match deadline_ts(s, tid, x[4]) {
            Ok(d) => d,
            Err(e) => return Out::Ret(e),
        };
        // The sixth argument points at {sigset pointer, size}.
        let mask = if x[5] != 0 {
            match sys::read_u64(tid, x[5]) {
                Ok(p) => match read_mask(tid, p) {
                    Ok(m) => m,
                    Err(e) => return Out::Ret(e),
                },
                Err(_) => return Out::Ret(EFAULT),
            }
        } else {
            None
        };
        (d, mask)
    };
    let (fds, any) = gather(s, tid, &want);
    poll_wait(s, tid, fds, any, deadline, mask)
}

fn epoll(s: &mut Ctx, tid: pid_t, a: &Args) -> Out {
    let x = a.a;
    let (deadline, mask) = match a.nr {
        libc::SYS_epoll_wait => (deadline_ms(s, x[3] as i32 as i64), None),
        libc::SYS_epoll_pwait => match read_mask(tid, x[4]) {
            Ok(m) => (deadline_ms(s, x[3] as i32 as i64), m),
            Err(e) => return Out::Ret(e),
        },
        _ => {
            let d = match deadline_ts(s, tid, x[3]) {
                Ok(d) => d,
                Err(e) => return Out::Ret(e),
            };
            match read_mask(tid, x[4]) {
                Ok(m) => (d, m),
                Err(e) => return Out::Ret(e),
            }
        }
    };
    // An epoll descriptor is readable when events are waiting; polling it
    // does not consume edge-triggered events.
    let (fds, any) = gather(s, tid, &[(x[0] as i32, POLLIN)]);
    poll_wait(s, tid, fds, any, deadline, mask)
}

/// A poll-like call reached its virtual deadline: make the real call
/// return at once by zeroing its timeout.
pub fn expire_poll(s: &mut Ctx, tid: pid_t) {
    let _ = s;
    let Ok(mut r) = sys::get_regs(tid) else {
        return;
    };
    let nr = r.orig_rax as i64;
    match nr {
        libc::SYS_poll => r.rdx = 0,
        libc::SYS_epoll_wait | libc::SYS_epoll_pwait => r.r10 = 0,
        libc::SYS_ppoll => {
            let _ = sys::write_pair(tid, r.rdx, 0, 0);
        }
        libc::SYS_select | libc::SYS_pselect6 => {
            let _ = sys::write_pair(tid, r.r8, 0, 0);
        }
        libc::SYS_epoll_pwait2 => {
            let _ = sys::write_pair(tid, r.r10, 0, 0);
        }
        _ => {}
    }
    let _ = sys::set_regs(tid, &r);
}
