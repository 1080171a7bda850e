//! Socket calls of the virtual network (see `crate::net` for the kernel
//! side and `detrun_scheduler::net` for the model).
//!
//! [`intercept`] looks at every socket-family call while the virtual network
//! is on. Calls on descriptors that are not virtual sockets (pipes, files,
//! AF_UNIX sockets of the guest's own) return `None` and go on to their
//! usual handler.

use super::io::nonblocking;
use super::{Out, EFAULT, EINVAL};
use crate::ctx::Ctx;
use crate::net::{encode_addr, read_addr, write_addr};
use crate::sys::ready;
use crate::sys::{self, Args, Regs};
use crate::task::Post;
use detrun_scheduler::net::{Family, Proto, SockId};
use libc::pid_t;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};

fn err(e: i32) -> Out {
    Out::Ret(-(e as i64))
}

/// `socket(AF_INET*, ...)`: create an AF_UNIX socket of the same type
/// instead, and register it at the exit.
pub fn socket(s: &mut Ctx, a: &Args, regs: Regs) -> Out {
    let family = if a.a[0] as i32 == libc::AF_INET6 {
        Family::V6
    } else {
        Family::V4
    };
    let ty = a.a[1] as i32;
    let base = ty & 0xf;
    let proto = a.a[2] as i32;
    let p = match (base, proto) {
        (libc::SOCK_STREAM, 0 | libc::IPPROTO_TCP) => Proto::Tcp,
        (libc::SOCK_DGRAM, 0 | libc::IPPROTO_UDP) => Proto::Udp,
        (libc::SOCK_STREAM | libc::SOCK_DGRAM, _) => return err(libc::EPROTONOSUPPORT),
        _ => {
            s.stats.note(
                "net-raw",
                "raw/packet IP sockets are refused (EPERM): the virtual network has TCP and UDP only",
            );
            return err(libc::EPERM);
        }
    };
    if ty & !(0xf | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) != 0 {
        return err(libc::EINVAL);
    }
    let mut r = regs;
    r.rdi = libc::AF_UNIX as u64;
    r.rdx = 0;
    Out::Exit(
        r,
        Post::Socket {
            proto: p,
            family,
            rdi: regs.rdi,
            rdx: regs.rdx,
        },
    )
}

pub fn socket_exit(
    s: &mut Ctx,
    tid: pid_t,
    mut regs: Regs,
    proto: Proto,
    family: Family,
    rdi: u64,
    rdx: u64,
) {
    let fd = regs.rax as i64;
    if fd >= 0 {
        if let Some(f) = s.steal(tid, fd as i32) {
            if let Some(c) = crate::net::cookie(&f) {
                let id = s.world.net.socket(proto, family);
                s.net.cookies.insert(c, id);
            }
        }
    }
    regs.rdi = rdi;
    regs.rdx = rdx;
    let _ = sys::set_regs(tid, &regs);
    s.continue_running(tid);
}

/// Whether a call may act on a virtual socket in a way the network must
/// handle. Plain reads and writes need it only when a socket has an error
/// to report or (writes) a UDP socket exists: a TCP socket's bytes are the
/// kernel's, so the usual descriptor handler does without a second look.
pub fn may_concern(s: &Ctx, nr: i64) -> bool {
    if s.net.cookies.is_empty() {
        return false;
    }
    let n = &s.world.net;
    match nr {
        libc::SYS_read | libc::SYS_readv => n.any_pending_error(),
        libc::SYS_write | libc::SYS_writev => n.any_pending_error() || n.has_udp(),
        _ => true,
    }
}

/// The virtual socket behind a guest descriptor.
fn vsock(s: &Ctx, tid: pid_t, fd: u64) -> Option<(SockId, OwnedFd)> {
    if s.net.cookies.is_empty() {
        return None;
    }
    let f = s.steal(tid, fd as i32)?;
    let id = s.net.lookup(&f)?;
    Some((id, f))
}

fn sock_type(s: &Ctx, id: SockId) -> i32 {
    match s.world.net.sock(id).map(|x| x.proto) {
        Some(Proto::Udp) => libc::SOCK_DGRAM,
        _ => libc::SOCK_STREAM,
    }
}

/// A v6-only socket cannot reach an IPv4 (mapped) address.
fn v6only_blocks(s: &Ctx, id: SockId, dest: SocketAddr) -> bool {
    let v6only = s.world.net.sock(id).is_some_and(|x| x.v6only);
    v6only && matches!(dest, SocketAddr::V6(a) if a.ip().to_ipv4_mapped().is_some())
}

fn is_v6(s: &Ctx, id: SockId) -> bool {
    s.world.net.sock(id).is_some_and(|x| x.family == Family::V6)
}

/// Handle a socket-family call on a virtual socket, or `None` to let the
/// usual handler have it.
pub fn intercept(s: &mut Ctx, tid: pid_t, a: &Args, regs: Regs) -> Option<Out> {
    use libc::{
        SYS_accept, SYS_accept4, SYS_bind, SYS_connect, SYS_getpeername, SYS_getsockname,
        SYS_getsockopt, SYS_listen, SYS_read, SYS_readv, SYS_recvfrom, SYS_recvmmsg, SYS_recvmsg,
        SYS_sendmmsg, SYS_sendmsg, SYS_sendto, SYS_setsockopt, SYS_write, SYS_writev, EBADF,
        ENOTCONN, MSG_DONTWAIT, POLLIN,
    };
    let x = a.a;
    let (id, f) = vsock(s, tid, x[0])?;
    let sk = s.world.net.sock(id)?;
    let proto = sk.proto;
    let io = matches!(
        a.nr,
        SYS_read
            | SYS_readv
            | SYS_recvfrom
            | SYS_recvmsg
            | SYS_recvmmsg
            | SYS_write
            | SYS_writev
            | SYS_sendto
            | SYS_sendmsg
            | SYS_sendmmsg
    );
    if io && sk.pending_error.is_some() {
        let e = s.world.net.take_error(id)?;
        if proto == Proto::Udp {
            crate::net::drop_marker(&f);
        }
        return Some(err(e));
    }
    Some(match a.nr {
        SYS_bind => bind(s, tid, id, &f, x[1], x[2]),
        SYS_listen => listen(s, id, &f, x[1]),
        SYS_connect => match proto {
            Proto::Tcp => connect_tcp(s, tid, id, &f, x[1], x[2]),
            Proto::Udp => connect_udp(s, tid, id, &f, x[1], x[2]),
        },
        SYS_accept | SYS_accept4 => {
            if !ready(&f, POLLIN) && !nonblocking(&f) {
                return None; // the fd handler parks it; woken, we come back
            }
            let mut r = regs;
            r.rsi = 0;
            r.rdx = 0;
            Out::Exit(
                r,
                Post::Accept {
                    listener: id,
                    addr: x[1],
                    lenp: x[2],
                    rsi: regs.rsi,
                    rdx: regs.rdx,
                },
            )
        }
        SYS_getsockname | SYS_getpeername => {
            let Some(sk) = s.world.net.sock(id) else {
                return Some(err(EBADF));
            };
            let v6 = sk.family == Family::V6;
            let addr = if a.nr == SYS_getsockname {
                sk.local.unwrap_or_else(|| unspecified(v6))
            } else {
                match sk.peer {
                    Some(p) => p,
                    None => return Some(err(ENOTCONN)),
                }
            };
            match write_addr(tid, x[1], x[2], &encode_addr(addr, v6)) {
                Ok(()) => Out::Ret(0),
                Err(e) => err(e),
            }
        }
        SYS_setsockopt => setsockopt(s, tid, id, x[1] as i32, x[2] as i32, x[3], x[4]),
        SYS_getsockopt => getsockopt(s, tid, id, &f, x[1] as i32, x[2] as i32, x[3], x[4]),
        SYS_sendto | SYS_sendmsg | SYS_sendmmsg | SYS_write | SYS_writev if proto == Proto::Udp => {
            udp_send(s, tid, id, &f, a)
        }
        SYS_sendto if x[4] != 0 => {
            // An address on a connected stream is ignored (as TCP does).
            let mut b = *a;
            b.a[4] = 0;
            b.a[5] = 0;
            match super::io::handle(s, tid, &b, regs) {
                Out::Pass => {
                    let mut r = regs;
                    r.r8 = 0;
                    r.r9 = 0;
                    Out::Exit(r, Post::RestoreArgs([(4, regs.r8), (5, regs.r9)]))
                }
                o => o,
            }
        }
        SYS_recvfrom | SYS_recvmsg | SYS_recvmmsg if proto == Proto::Udp => {
            let flags = if a.nr == SYS_recvfrom { x[3] } else { x[2] } as i32;
            if !ready(&f, POLLIN) && !nonblocking(&f) && flags & MSG_DONTWAIT == 0 {
                return None;
            }
            udp_recv(s, tid, id, &f, a)
        }
        SYS_recvfrom if x[4] != 0 => {
            // TCP reports no source address.
            if !ready(&f, POLLIN) && !nonblocking(&f) && x[3] as i32 & MSG_DONTWAIT == 0 {
                return None;
            }
            if x[5] != 0 && sys::write_u32(tid, x[5], 0).is_err() {
                return Some(Out::Ret(EFAULT));
            }
            let mut r = regs;
            r.r8 = 0;
            r.r9 = 0;
            Out::Exit(r, Post::RestoreArgs([(4, regs.r8), (5, regs.r9)]))
        }
        SYS_recvmsg => {
            // TCP reports no source address: the kernel would name our
            // AF_UNIX end. Hide msg_name for the call, report length 0.
            let name = match sys::read_u64(tid, x[1]) {
                Ok(n) => n,
                Err(_) => return Some(Out::Ret(EFAULT)),
            };
            if name == 0 {
                return None;
            }
            if !ready(&f, POLLIN) && !nonblocking(&f) && x[2] as i32 & MSG_DONTWAIT == 0 {
                return None;
            }
            if sys::write_u64(tid, x[1], 0).is_err() {
                return Some(Out::Ret(EFAULT));
            }
            Out::Exit(regs, Post::MsgName { hdr: x[1], name })
        }
        _ => return None,
    })
}

/// Say once per address why the guest's connection failed.
fn unreachable(s: &mut Ctx, e: i32) -> Out {
    let ext = &s.world.net.stats.external;
    while s.net.warned < ext.len() {
        eprintln!(
            "detrun: {} is outside the sandbox: unreachable (the virtual network has loopback and --host addresses; --net=host reaches the real network)",
            ext[s.net.warned]
        );
        s.net.warned += 1;
    }
    err(e)
}

fn unspecified(v6: bool) -> SocketAddr {
    if v6 {
        "[::]:0".parse().expect("literal")
    } else {
        "0.0.0.0:0".parse().expect("literal")
    }
}

fn check_family(s: &Ctx, id: SockId, a: SocketAddr) -> Result<(), i32> {
    match (is_v6(s, id), a) {
        (false, SocketAddr::V6(_)) => Err(libc::EAFNOSUPPORT),
        (true, SocketAddr::V4(_)) => Err(libc::EAFNOSUPPORT),
        _ => Ok(()),
    }
}

/// Bind in the world and name the kernel socket; an address held by a
/// socket whose guest closed it is taken over.
fn bind_at(s: &mut Ctx, id: SockId, f: &OwnedFd, addr: SocketAddr) -> Result<SocketAddr, i32> {
    for _ in 0..64 {
        match s.world.net.bind(id, addr) {
            Ok(l) => {
                s.net.name(id, f)?;
                return Ok(l);
            }
            Err(Ok(other)) if s.net.name_is_free(other, sock_type(s, other)) => {
                s.world.net.close(other)
            }
            Err(Ok(_)) => return Err(libc::EADDRINUSE),
            Err(Err(e)) => return Err(e),
        }
    }
    Err(libc::EADDRINUSE)
}

fn bind(s: &mut Ctx, tid: pid_t, id: SockId, f: &OwnedFd, ptr: u64, len: u64) -> Out {
    let addr = match read_addr(tid, ptr, len) {
        Ok(Some(a)) => a,
        Ok(None) => return err(libc::EAFNOSUPPORT),
        Err(e) => return err(e),
    };
    if let Err(e) = check_family(s, id, addr) {
        return err(e);
    }
    match bind_at(s, id, f, addr) {
        Ok(_) => Out::Ret(0),
        Err(e) => err(e),
    }
}

/// Name the kernel socket after an implicit bind in the world.
fn ensure_named(s: &mut Ctx, id: SockId, f: &OwnedFd) -> Result<(), i32> {
    if s.world.net.sock(id).is_some_and(|x| x.local.is_some()) {
        s.net.name(id, f)
    } else {
        Ok(())
    }
}

fn listen(s: &mut Ctx, id: SockId, f: &OwnedFd, backlog: u64) -> Out {
    if let Err(e) = s.world.net.listen(id) {
        return err(e);
    }
    if let Err(e) = ensure_named(s, id, f) {
        return err(e);
    }
    let b = (backlog as i32).clamp(1, 4096);
    // SAFETY: listen on the stolen duplicate of the guest's socket.
    if unsafe { libc::listen(f.as_raw_fd(), b) } != 0 {
        return err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO));
    }
    Out::Ret(0)
}

fn connect_tcp(s: &mut Ctx, tid: pid_t, id: SockId, f: &OwnedFd, ptr: u64, len: u64) -> Out {
    let dest = match read_addr(tid, ptr, len) {
        Ok(Some(a)) => a,
        Ok(None) => return err(libc::EAFNOSUPPORT),
        Err(e) => return err(e),
    };
    if let Err(e) = check_family(s, id, dest) {
        return err(e);
    }
    if let Some(sk) = s.world.net.sock_mut(id) {
        if sk.conn.is_some() {
            if sk.connecting {
                sk.connecting = false;
                return Out::Ret(0);
            }
            return err(libc::EISCONN);
        }
        if sk.listening {
            return err(libc::EINVAL);
        }
    }
    if v6only_blocks(s, id, dest) {
        return err(libc::ENETUNREACH);
    }
    if let Err(e) = s.world.net.reachable(dest) {
        return unreachable(s, e);
    }
    for listener in s.world.net.receivers(Proto::Tcp, dest) {
        let conn = match s.world.net.connect(id, listener, dest) {
            Ok(c) => c,
            Err(e) => return err(e),
        };
        // Without faults the kernel carries the bytes; with them, the
        // supervisor relays each chunk at its delivery time.
        let direct = !s.world.net.cfg.has_faults();
        let made = if direct {
            ensure_named(s, id, f).and_then(|_| s.net.connect_direct(f, listener))
        } else {
            s.net.dial(conn, listener).and_then(|ss| {
                ensure_named(s, id, f)?;
                s.net.attach(conn, f, ss)
            })
        };
        match made {
            Ok(()) => {
                return if nonblocking(f) {
                    if let Some(sk) = s.world.net.sock_mut(id) {
                        sk.connecting = true;
                    }
                    err(libc::EINPROGRESS)
                } else {
                    Out::Ret(0)
                };
            }
            Err(libc::ECONNREFUSED) => {
                // That listener's guest closed it; try the next.
                s.world.net.abort_conn(conn);
                s.world.net.close(listener);
            }
            Err(e) => {
                s.world.net.abort_conn(conn);
                return err(e);
            }
        }
    }
    s.world.net.refused();
    err(libc::ECONNREFUSED)
}

fn connect_udp(s: &mut Ctx, tid: pid_t, id: SockId, f: &OwnedFd, ptr: u64, len: u64) -> Out {
    let dest = match read_addr(tid, ptr, len) {
        Ok(Some(a)) => a,
        Ok(None) => {
            if let Some(sk) = s.world.net.sock_mut(id) {
                sk.peer = None;
            }
            return Out::Ret(0);
        }
        Err(e) => return err(e),
    };
    if let Err(e) = check_family(s, id, dest) {
        return err(e);
    }
    if v6only_blocks(s, id, dest) {
        return err(libc::ENETUNREACH);
    }
    if let Err(e) = s.world.net.reachable(dest) {
        return unreachable(s, e);
    }
    let local = match s.world.net.autobind(id, dest.ip()) {
        Ok(l) => l,
        Err(e) => return err(e),
    };
    if let Err(e) = ensure_named(s, id, f) {
        return err(e);
    }
    if let Some(sk) = s.world.net.sock_mut(id) {
        sk.peer = Some(detrun_scheduler::net::norm(dest));
        if sk.local.is_some_and(|l| l.ip().is_unspecified()) {
            sk.local = Some(local);
        }
    }
    Out::Ret(0)
}

pub fn accept_exit(
    s: &mut Ctx,
    tid: pid_t,
    mut regs: Regs,
    listener: SockId,
    addr: u64,
    lenp: u64,
) {
    let fd = regs.rax as i64;
    if fd >= 0 {
        let f = s.steal(tid, fd as i32);
        let conn = match f.as_ref().and_then(|f| s.net.accepted_peer(f)) {
            Some(crate::net::Peer::Conn(c)) => Some(c),
            Some(crate::net::Peer::Sock(client)) => {
                s.world.net.sock(client).and_then(|x| x.conn).map(|c| c.0)
            }
            None => None,
        };
        let ck = f.as_ref().and_then(crate::net::cookie);
        if let (Some(conn), Some(ck)) = (conn, ck) {
            let family = s.world.net.sock(listener).map_or(Family::V4, |l| l.family);
            let id = s.world.net.socket(Proto::Tcp, family);
            s.net.cookies.insert(ck, id);
            if let Some(peer) = s.world.net.accept(conn, id) {
                if let Err(e) =
                    write_addr(tid, addr, lenp, &encode_addr(peer, family == Family::V6))
                {
                    regs.rax = (-(e as i64)) as u64;
                }
            }
        }
    }
    let _ = sys::set_regs(tid, &regs);
}

const SOL_SOCKET: i32 = libc::SOL_SOCKET;

fn setsockopt(
    s: &mut Ctx,
    tid: pid_t,
    id: SockId,
    level: i32,
    name: i32,
    val: u64,
    len: u64,
) -> Out {
    use libc::{
        EBADF, ENOPROTOOPT, IPPROTO_IP, IPPROTO_IPV6, IPPROTO_TCP, IPPROTO_UDP, IPV6_V6ONLY,
        SO_RCVTIMEO, SO_REUSEPORT, SO_SNDTIMEO,
    };
    if !matches!(
        level,
        SOL_SOCKET | IPPROTO_IP | IPPROTO_IPV6 | IPPROTO_TCP | IPPROTO_UDP
    ) {
        return err(ENOPROTOOPT);
    }
    if len > 256 {
        return err(libc::EINVAL);
    }
    let mut v = vec![0u8; len as usize];
    if sys::read_mem(tid, val, &mut v).is_err() {
        return Out::Ret(EFAULT);
    }
    let int = (v.len() >= 4).then(|| i32::from_ne_bytes([v[0], v[1], v[2], v[3]]));
    let Some(sk) = s.world.net.sock_mut(id) else {
        return err(EBADF);
    };
    match (level, name) {
        (IPPROTO_IPV6, IPV6_V6ONLY) => {
            if sk.family != Family::V6 {
                return err(ENOPROTOOPT);
            }
            if sk.local.is_some() {
                return err(libc::EINVAL);
            }
            sk.v6only = int.unwrap_or(0) != 0;
        }
        (SOL_SOCKET, SO_REUSEPORT) => sk.reuseport = int.unwrap_or(0) != 0,
        (SOL_SOCKET, SO_RCVTIMEO | SO_SNDTIMEO) => s.stats.note(
            "net-timeo",
            "SO_RCVTIMEO/SO_SNDTIMEO are accepted, but blocking socket calls do not time out",
        ),
        _ => {}
    }
    if let Some(sk) = s.world.net.sock_mut(id) {
        sk.opts.insert((level, name), v);
    }
    Out::Ret(0)
}

#[allow(clippy::too_many_arguments)]
fn getsockopt(
    s: &mut Ctx,
    tid: pid_t,
    id: SockId,
    f: &OwnedFd,
    level: i32,
    name: i32,
    val: u64,
    lenp: u64,
) -> Out {
    use libc::{
        socklen_t, AF_INET, AF_INET6, EBADF, ENOPROTOOPT, IPPROTO_IP, IPPROTO_IPV6, IPPROTO_TCP,
        IPPROTO_UDP, IPV6_V6ONLY, SOCK_DGRAM, SOCK_STREAM, SO_ACCEPTCONN, SO_DOMAIN, SO_ERROR,
        SO_PROTOCOL, SO_RCVBUF, SO_SNDBUF, SO_TYPE,
    };
    let Some(sk) = s.world.net.sock(id) else {
        return err(EBADF);
    };
    let int = |v: i32| v.to_ne_bytes().to_vec();
    let bytes: Vec<u8> = match (level, name) {
        (SOL_SOCKET, SO_TYPE) => int(if sk.proto == Proto::Tcp {
            SOCK_STREAM
        } else {
            SOCK_DGRAM
        }),
        (SOL_SOCKET, SO_DOMAIN) => int(if sk.family == Family::V6 {
            AF_INET6
        } else {
            AF_INET
        }),
        (SOL_SOCKET, SO_PROTOCOL) => int(if sk.proto == Proto::Tcp {
            IPPROTO_TCP
        } else {
            IPPROTO_UDP
        }),
        (SOL_SOCKET, SO_ACCEPTCONN) => int(sk.listening as i32),
        (SOL_SOCKET, SO_ERROR) => {
            // The kernel's pending error (a reset shows up here).
            let mut e: i32 = 0;
            let mut l = 4 as socklen_t;
            // SAFETY: a 4-byte out value.
            unsafe {
                libc::getsockopt(
                    f.as_raw_fd(),
                    SOL_SOCKET,
                    SO_ERROR,
                    (&mut e as *mut i32).cast(),
                    &mut l,
                )
            };
            int(e)
        }
        (IPPROTO_IPV6, IPV6_V6ONLY) if sk.family == Family::V6 => int(sk.v6only as i32),
        (SOL_SOCKET, SO_RCVBUF | SO_SNDBUF) => match sk.opts.get(&(level, name)) {
            Some(v) if v.len() >= 4 => {
                int(i32::from_ne_bytes([v[0], v[1], v[2], v[3]]).saturating_mul(2))
            }
            _ => int(if name == SO_RCVBUF { 131072 } else { 16384 }),
        },
        (SOL_SOCKET | IPPROTO_IP | IPPROTO_IPV6 | IPPROTO_TCP | IPPROTO_UDP, _) => sk
            .opts
            .get(&(level, name))
            .cloned()
            .unwrap_or_else(|| int(0)),
        _ => return err(ENOPROTOOPT),
    };
    if lenp == 0 {
        return Out::Ret(EFAULT);
    }
    let Ok(cap) = sys::read_u32(tid, lenp) else {
        return Out::Ret(EFAULT);
    };
    if (cap as i32) < 0 {
        return Out::Ret(EINVAL);
    }
    let n = (cap as usize).min(bytes.len());
    if sys::write_mem(tid, val, &bytes[..n]).is_err()
        || sys::write_u32(tid, lenp, n as u32).is_err()
    {
        return Out::Ret(EFAULT);
    }
    Out::Ret(0)
}

/// The end of x86-64 user space (the kernel's TASK_SIZE_MAX).
const USER_END: u64 = 0x7fff_ffff_f000;

/// (base, len) pairs of an iovec array in the guest.
fn iovecs(tid: pid_t, iov: u64, cnt: u64) -> Result<Vec<(u64, u64)>, i64> {
    if cnt > 1024 {
        return Err(EINVAL);
    }
    let mut raw = vec![0u8; cnt as usize * 16];
    sys::read_mem(tid, iov, &mut raw).map_err(|_| EFAULT)?;
    let v: Vec<(u64, u64)> = raw
        .chunks_exact(16)
        .map(|c| {
            let w = |i: usize| u64::from_ne_bytes(c[i..i + 8].try_into().unwrap_or([0; 8]));
            (w(0), w(8))
        })
        .collect();
    // As the kernel checks them: a length negative as ssize_t is EINVAL,
    // a range outside user space EFAULT.
    for &(base, len) in &v {
        if (len as i64) < 0 {
            return Err(EINVAL);
        }
        if len > 0 && base.checked_add(len).is_none_or(|end| end > USER_END) {
            return Err(EFAULT);
        }
    }
    Ok(v)
}

fn gather(tid: pid_t, segs: &[(u64, u64)]) -> Result<Vec<u8>, i64> {
    // The guest chooses the lengths: add them without overflow.
    let total = segs
        .iter()
        .try_fold(0u64, |t, s| t.checked_add(s.1))
        .ok_or(EINVAL)?;
    if total > 65536 * 4 {
        return Err(-(libc::EMSGSIZE as i64));
    }
    let mut out = vec![0u8; total as usize];
    let mut at = 0usize;
    for &(b, l) in segs {
        sys::read_mem(tid, b, &mut out[at..at + l as usize]).map_err(|_| EFAULT)?;
        at += l as usize;
    }
    Ok(out)
}

fn scatter(tid: pid_t, segs: &[(u64, u64)], data: &[u8]) -> Result<(), i64> {
    let mut at = 0usize;
    for &(b, l) in segs {
        if at >= data.len() {
            break;
        }
        let n = (l as usize).min(data.len() - at);
        sys::write_mem(tid, b, &data[at..at + n]).map_err(|_| EFAULT)?;
        at += n;
    }
    Ok(())
}

/// A guest msghdr: (name, namelen, iovecs, address of the struct).
struct MsgHdr {
    name: u64,
    namelen: u32,
    iov: Vec<(u64, u64)>,
}

fn read_msghdr(tid: pid_t, p: u64) -> Result<MsgHdr, i64> {
    let mut b = [0u8; 56];
    sys::read_mem(tid, p, &mut b).map_err(|_| EFAULT)?;
    let w = |i: usize| u64::from_ne_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
    Ok(MsgHdr {
        name: w(0),
        namelen: u32::from_ne_bytes([b[8], b[9], b[10], b[11]]),
        iov: iovecs(tid, w(16), w(24))?,
    })
}

/// Send one datagram of `data` from `id` to `dest` (or its peer).
fn send_one(s: &mut Ctx, f: &OwnedFd, id: SockId, dest: Option<SocketAddr>, data: Vec<u8>) -> i64 {
    let Some(dest) = dest.or_else(|| s.world.net.sock(id).and_then(|x| x.peer)) else {
        return -(libc::EDESTADDRREQ as i64);
    };
    if let Err(e) = check_family(s, id, dest) {
        return -(e as i64);
    }
    if v6only_blocks(s, id, dest) {
        return -(libc::ENETUNREACH as i64);
    }
    let len = data.len() as i64;
    let now = s.world.clock.monotonic();
    let had_error = s
        .world
        .net
        .sock(id)
        .is_some_and(|x| x.pending_error.is_some());
    match s.world.net.send_to(id, dest, data, now) {
        Ok(_) => {
            let now_error = s
                .world
                .net
                .sock(id)
                .is_some_and(|x| x.pending_error.is_some());
            if !had_error && now_error && !ready(f, libc::POLLIN) {
                s.net.mark_error(id);
            }
            len
        }
        Err(libc::ENETUNREACH) => {
            let _ = unreachable(s, libc::ENETUNREACH);
            -(libc::ENETUNREACH as i64)
        }
        Err(e) => -(e as i64),
    }
}

fn dest_of(tid: pid_t, ptr: u64, len: u64) -> Result<Option<SocketAddr>, i64> {
    if ptr == 0 {
        return Ok(None);
    }
    match read_addr(tid, ptr, len) {
        // UDP cannot send to port 0 (checked before the data is read).
        Ok(Some(a)) if a.port() == 0 => Err(EINVAL),
        Ok(a) => Ok(a),
        Err(e) => Err(-(e as i64)),
    }
}

fn udp_send(s: &mut Ctx, tid: pid_t, id: SockId, f: &OwnedFd, a: &Args) -> Out {
    use libc::{SYS_sendmsg, SYS_sendto, SYS_write, SYS_writev};
    let x = a.a;
    let r = match a.nr {
        SYS_write => gather(tid, &[(x[1], x[2])]).map(|d| (None, d)),
        SYS_writev => iovecs(tid, x[1], x[2])
            .and_then(|v| gather(tid, &v))
            .map(|d| (None, d)),
        SYS_sendto => {
            dest_of(tid, x[4], x[5]).and_then(|dst| gather(tid, &[(x[1], x[2])]).map(|d| (dst, d)))
        }
        SYS_sendmsg => read_msghdr(tid, x[1]).and_then(|m| {
            let dst = dest_of(tid, m.name, m.namelen as u64)?;
            gather(tid, &m.iov).map(|d| (dst, d))
        }),
        _ => {
            // sendmmsg: each message in turn; the count sent is returned.
            let n = x[2].min(1024);
            let mut sent = 0i64;
            for i in 0..n {
                let hdr = x[1].wrapping_add(i * 64);
                let one = read_msghdr(tid, hdr).and_then(|m| {
                    let dst = dest_of(tid, m.name, m.namelen as u64)?;
                    gather(tid, &m.iov).map(|d| (dst, d))
                });
                let r = match one {
                    Ok((dst, d)) => send_one(s, f, id, dst, d),
                    Err(e) => e,
                };
                if r < 0 {
                    if sent == 0 {
                        return Out::Ret(r);
                    }
                    break;
                }
                let _ = sys::write_u32(tid, hdr.wrapping_add(56), r as u32);
                sent += 1;
            }
            return finish_send(s, f, id, sent);
        }
    };
    let r = match r {
        Ok((dst, d)) => send_one(s, f, id, dst, d),
        Err(e) => e,
    };
    finish_send(s, f, id, r)
}

/// After a send, the socket may have been bound: name it so replies reach it.
fn finish_send(s: &mut Ctx, f: &OwnedFd, id: SockId, r: i64) -> Out {
    if let Err(e) = ensure_named(s, id, f) {
        return err(e);
    }
    Out::Ret(r)
}

/// Receive one datagram through the supervisor's duplicate, writing the
/// payload and the virtual source address into the guest.
fn recv_one(
    s: &Ctx,
    f: &OwnedFd,
    flags: i32,
    cap: usize,
) -> Result<(Vec<u8>, usize, Option<SocketAddr>), i64> {
    // Error markers are never shown to the guest.
    while crate::net::drop_marker(f) {}
    let mut buf = vec![0u8; cap.min(65536)];
    // SAFETY: zeroed sockaddr_un filled by the kernel.
    let mut sa: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    let mut sl = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
    let fl = (flags & (libc::MSG_PEEK | libc::MSG_TRUNC)) | libc::MSG_DONTWAIT | libc::MSG_TRUNC;
    // SAFETY: receive into local buffers.
    let n = unsafe {
        libc::recvfrom(
            f.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            fl,
            (&mut sa as *mut libc::sockaddr_un).cast(),
            &mut sl,
        )
    };
    if n < 0 {
        return Err(-(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO) as i64));
    }
    let full = n as usize;
    buf.truncate(full.min(buf.len()));
    let src = s.net.sender_of(&sa, sl);
    Ok((buf, full, src))
}

fn udp_recv(s: &mut Ctx, tid: pid_t, id: SockId, f: &OwnedFd, a: &Args) -> Out {
    use libc::{SYS_recvfrom, SYS_recvmsg, MSG_DONTWAIT, MSG_TRUNC};
    let x = a.a;
    let v6 = is_v6(s, id);
    match a.nr {
        SYS_recvfrom => {
            let flags = x[3] as i32;
            let (data, full, src) = match recv_one(s, f, flags, x[2] as usize) {
                Ok(v) => v,
                Err(e) => return Out::Ret(e),
            };
            if sys::write_mem(tid, x[1], &data).is_err() {
                return Out::Ret(EFAULT);
            }
            if let Some(src) = src {
                if let Err(e) = write_addr(tid, x[4], x[5], &encode_addr(src, v6)) {
                    return err(e);
                }
            }
            Out::Ret(if flags & MSG_TRUNC != 0 {
                full
            } else {
                data.len()
            } as i64)
        }
        SYS_recvmsg => match recv_msg(s, tid, f, x[1], x[2] as i32, v6) {
            Ok(n) => Out::Ret(n),
            Err(e) => Out::Ret(e),
        },
        _ => {
            // recvmmsg: as many as are waiting, up to vlen (the timeout is
            // not needed: only the first may wait, and it did).
            let n = x[2].min(1024);
            let mut got = 0i64;
            for i in 0..n {
                let hdr = x[1].wrapping_add(i * 64);
                let fl = if got == 0 {
                    x[3] as i32
                } else {
                    x[3] as i32 | MSG_DONTWAIT
                };
                match recv_msg(s, tid, f, hdr, fl, v6) {
                    Ok(r) => {
                        let _ = sys::write_u32(tid, hdr.wrapping_add(56), r as u32);
                        got += 1;
                    }
                    Err(e) if got == 0 => return Out::Ret(e),
                    Err(_) => break,
                }
            }
            Out::Ret(got)
        }
    }
}

fn recv_msg(s: &Ctx, tid: pid_t, f: &OwnedFd, hdr: u64, flags: i32, v6: bool) -> Result<i64, i64> {
    let m = read_msghdr(tid, hdr)?;
    let cap = m.iov.iter().fold(0u64, |t, v| t.saturating_add(v.1));
    let (data, full, src) = recv_one(s, f, flags, cap as usize)?;
    scatter(tid, &m.iov, &data)?;
    if m.name != 0 {
        let b = src.map(|a| encode_addr(a, v6)).unwrap_or_default();
        let n = (m.namelen as usize).min(b.len());
        sys::write_mem(tid, m.name, &b[..n]).map_err(|_| EFAULT)?;
        sys::write_u32(tid, hdr.wrapping_add(8), b.len() as u32).map_err(|_| EFAULT)?;
    }
    // No control messages; MSG_TRUNC when the datagram did not fit.
    let trunc = if full > data.len() {
        libc::MSG_TRUNC
    } else {
        0
    };
    sys::write_u64(tid, hdr.wrapping_add(40), 0).map_err(|_| EFAULT)?;
    sys::write_u32(tid, hdr.wrapping_add(48), trunc as u32).map_err(|_| EFAULT)?;
    Ok(if flags & libc::MSG_TRUNC != 0 {
        full
    } else {
        data.len()
    } as i64)
}
