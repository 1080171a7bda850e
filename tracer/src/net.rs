//! The kernel side of the virtual network.
//!
//! A guest's `socket(AF_INET*, ...)` becomes an `AF_UNIX` socket of the same
//! type, so every descriptor operation the kernel already does well (read,
//! write, poll, epoll, select, dup, fork inheritance, FIONREAD, MSG_PEEK)
//! works unchanged. What the world decides (addresses, ports, who may reach
//! whom, when bytes arrive) is applied here:
//!
//! - a connected TCP socket is connected to an end the supervisor holds
//!   (through a relay listener), and the server side accepts a connection
//!   the supervisor made to the guest's listener; the supervisor moves the
//!   bytes between its two ends when the world says they arrive;
//! - a UDP socket is bound to an abstract name; a datagram is written to it
//!   at its delivery time from a supervisor socket named after the sender,
//!   so `recvfrom` can name the virtual source.
//!
//! Guest sockets are recognized by `SO_COOKIE`, which the kernel never
//! reuses, so dup, fork and close need no bookkeeping. Abstract names live
//! in the guest's network namespace (the supervisor joins it); without one
//! they carry a per-run nonce, so concurrent runs never meet.

use crate::sys;
use detrun_scheduler::net::{ConnId, Head, Net, Side, SockId};
use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Bytes taken in per direction before the supervisor stops reading (the
/// guest's writes then block as on a full socket).
const CAP: usize = 4 << 20;

fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// An abstract AF_UNIX address.
pub fn sun(name: &str) -> (libc::sockaddr_un, libc::socklen_t) {
    // SAFETY: all-zero is a valid sockaddr_un.
    let mut a: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    a.sun_family = libc::AF_UNIX as u16;
    let b = name.as_bytes();
    let n = b.len().min(a.sun_path.len() - 1);
    for (d, s) in a.sun_path[1..=n].iter_mut().zip(b) {
        *d = *s as libc::c_char;
    }
    (a, (2 + 1 + n) as libc::socklen_t)
}

/// The abstract name in a sockaddr_un the kernel filled in.
fn name_of(a: &libc::sockaddr_un, len: libc::socklen_t) -> Option<String> {
    let n = (len as usize).checked_sub(2)?;
    if n < 1 || a.sun_path[0] != 0 {
        return None;
    }
    let b: Vec<u8> = a.sun_path[1..n.min(a.sun_path.len())]
        .iter()
        .map(|&c| c as u8)
        .collect();
    String::from_utf8(b).ok()
}

pub fn new_sock(ty: i32) -> Option<OwnedFd> {
    // SAFETY: plain socket creation.
    let fd = unsafe {
        libc::socket(
            libc::AF_UNIX,
            ty | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    // SAFETY: a fresh descriptor we own.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
}

pub fn bind_name(f: &OwnedFd, name: &str) -> Result<(), i32> {
    let (a, l) = sun(name);
    // SAFETY: binding to a local address struct.
    let r = unsafe { libc::bind(f.as_raw_fd(), (&a as *const libc::sockaddr_un).cast(), l) };
    if r == 0 {
        Ok(())
    } else {
        Err(errno())
    }
}

pub fn connect_name(f: &OwnedFd, name: &str) -> Result<(), i32> {
    let (a, l) = sun(name);
    // SAFETY: connecting to a local address struct.
    let r = unsafe { libc::connect(f.as_raw_fd(), (&a as *const libc::sockaddr_un).cast(), l) };
    if r == 0 {
        Ok(())
    } else {
        Err(errno())
    }
}

/// The abstract name of the peer (`peer`) or of the socket itself.
pub fn addr_name(f: &OwnedFd, peer: bool) -> Option<String> {
    // SAFETY: zeroed sockaddr_un filled by the kernel.
    let mut a: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    let mut l = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
    let p = (&mut a as *mut libc::sockaddr_un).cast();
    // SAFETY: a and l are valid for the kernel to write.
    let r = unsafe {
        if peer {
            libc::getpeername(f.as_raw_fd(), p, &mut l)
        } else {
            libc::getsockname(f.as_raw_fd(), p, &mut l)
        }
    };
    (r == 0).then(|| name_of(&a, l)).flatten()
}

pub fn cookie(f: &OwnedFd) -> Option<u64> {
    let mut v: u64 = 0;
    let mut l = 8 as libc::socklen_t;
    // SAFETY: an 8-byte out value.
    let r = unsafe {
        libc::getsockopt(
            f.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_COOKIE,
            (&mut v as *mut u64).cast(),
            &mut l,
        )
    };
    (r == 0).then_some(v)
}

fn is_socket(f: &OwnedFd) -> bool {
    // SAFETY: fstat into a local struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    unsafe {
        libc::fstat(f.as_raw_fd(), &mut st) == 0 && st.st_mode & libc::S_IFMT == libc::S_IFSOCK
    }
}

/// The peer of an accepted socket, by its abstract name.
pub enum Peer {
    Conn(ConnId),
    Sock(SockId),
}

pub struct NetKernel {
    /// Abstract-name prefix of this run.
    prefix: String,
    relay: Option<OwnedFd>,
    epfd: Option<OwnedFd>,
    /// The supervisor's end facing the guest socket of (conn, side).
    ends: BTreeMap<(ConnId, Side), OwnedFd>,
    /// Epoll events registered per end (absent: not registered).
    interest: BTreeMap<(ConnId, Side), u32>,
    /// Ends whose guest shut down writing.
    eof: BTreeSet<(ConnId, Side)>,
    /// Guest sockets by SO_COOKIE.
    pub cookies: BTreeMap<u64, SockId>,
    /// Sockets whose kernel socket carries their abstract name.
    named: BTreeSet<SockId>,
    /// UDP sending sockets named after the virtual source address.
    senders: BTreeMap<std::net::SocketAddr, OwnedFd>,
    buf: Vec<u8>,
    /// The network namespace the supervisor came from, to return to.
    home: Option<OwnedFd>,
    /// Unreachable addresses already reported on stderr.
    pub warned: usize,
}

impl NetKernel {
    pub fn new(nonce: Option<u64>) -> NetKernel {
        NetKernel {
            prefix: match nonce {
                Some(n) => format!("detrun.{n:016x}"),
                None => "detrun".into(),
            },
            relay: None,
            epfd: None,
            ends: BTreeMap::new(),
            interest: BTreeMap::new(),
            eof: BTreeSet::new(),
            cookies: BTreeMap::new(),
            named: BTreeSet::new(),
            senders: BTreeMap::new(),
            buf: Vec::new(),
            home: None,
            warned: 0,
        }
    }

    /// Join the network namespace of `pid` (the guest's), remembering ours.
    pub fn join(&mut self, pid: libc::pid_t) -> bool {
        let open = |p: &str| std::fs::File::open(p).ok().map(OwnedFd::from);
        let (Some(home), Some(theirs)) = (
            open("/proc/thread-self/ns/net"),
            open(&format!("/proc/{pid}/ns/net")),
        ) else {
            return false;
        };
        // SAFETY: setns with a namespace descriptor we opened.
        if unsafe { libc::setns(theirs.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return false;
        }
        self.home = Some(home);
        true
    }

    pub fn leave(&mut self) {
        if let Some(h) = self.home.take() {
            // SAFETY: back to the namespace we came from.
            unsafe { libc::setns(h.as_raw_fd(), libc::CLONE_NEWNET) };
        }
    }

    pub fn sock_name(&self, id: SockId) -> String {
        format!("{}/{id}", self.prefix)
    }

    fn conn_name(&self, c: ConnId) -> String {
        format!("{}/c/{c}", self.prefix)
    }

    fn sender_name(&self, a: std::net::SocketAddr) -> String {
        format!("{}/s/{a}", self.prefix)
    }

    /// The connection an accepted socket belongs to (its peer is our end).
    /// Who an accepted socket's peer is: our relay end of a connection, or
    /// (direct connections) the connecting guest socket itself.
    pub fn accepted_peer(&self, f: &OwnedFd) -> Option<Peer> {
        let n = addr_name(f, true)?;
        let rest = n.strip_prefix(&self.prefix)?.strip_prefix('/')?;
        match rest.strip_prefix("c/") {
            Some(c) => c.parse().ok().map(Peer::Conn),
            None => rest.parse().ok().map(Peer::Sock),
        }
    }

    /// Connect the guest socket `g` (already named) straight to the guest
    /// listener `listener`: with no faults to apply, the kernel carries the
    /// bytes. The description is made non-blocking for the call (every
    /// tracee sharing it is stopped) so that the supervisor never waits.
    pub fn connect_direct(&self, g: &OwnedFd, listener: SockId) -> Result<(), i32> {
        let fd = g.as_raw_fd();
        // SAFETY: flag changes on a descriptor we hold, restored below.
        let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        unsafe { libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK) };
        let r = connect_name(g, &self.sock_name(listener));
        // SAFETY: as above.
        unsafe { libc::fcntl(fd, libc::F_SETFL, fl) };
        match r {
            Err(libc::EAGAIN) => Err(libc::ECONNREFUSED),
            r => r,
        }
    }

    /// The virtual source named by a datagram's kernel source address.
    pub fn sender_of(
        &self,
        a: &libc::sockaddr_un,
        l: libc::socklen_t,
    ) -> Option<std::net::SocketAddr> {
        let n = name_of(a, l)?;
        n.strip_prefix(&format!("{}/s/", self.prefix))?.parse().ok()
    }

    /// A guest socket of the virtual network, by its stolen descriptor.
    pub fn lookup(&self, f: &OwnedFd) -> Option<SockId> {
        if self.cookies.is_empty() || !is_socket(f) {
            return None;
        }
        self.cookies.get(&cookie(f)?).copied()
    }

    /// Give the guest socket its abstract name (once).
    pub fn name(&mut self, id: SockId, f: &OwnedFd) -> Result<(), i32> {
        if self.named.contains(&id) {
            return Ok(());
        }
        bind_name(f, &self.sock_name(id))?;
        self.named.insert(id);
        Ok(())
    }

    pub fn is_named(&self, id: SockId) -> bool {
        self.named.contains(&id)
    }

    /// A socket's name is free again: its guest closed it.
    pub fn name_is_free(&self, id: SockId, ty: i32) -> bool {
        if !self.named.contains(&id) {
            return false;
        }
        // Abstract names are per socket type: probe with the holder's.
        let Some(probe) = new_sock(ty) else {
            return false;
        };
        bind_name(&probe, &self.sock_name(id)).is_ok()
    }

    fn relay(&mut self) -> Result<&OwnedFd, i32> {
        if self.relay.is_none() {
            let f = new_sock(libc::SOCK_STREAM).ok_or(libc::EMFILE)?;
            bind_name(&f, &format!("{}/relay", self.prefix))?;
            // SAFETY: listen on our own socket.
            if unsafe { libc::listen(f.as_raw_fd(), 4096) } != 0 {
                return Err(errno());
            }
            self.relay = Some(f);
        }
        self.relay.as_ref().ok_or(libc::EIO)
    }

    fn epoll(&mut self) -> Result<i32, i32> {
        if self.epfd.is_none() {
            // SAFETY: creating an epoll instance.
            let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
            if fd < 0 {
                return Err(errno());
            }
            // SAFETY: fresh descriptor we own.
            self.epfd = Some(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        Ok(self.epfd.as_ref().map_or(-1, |f| f.as_raw_fd()))
    }

    /// Queue a connection from the supervisor to the listener `listener`
    /// (its guest will accept it). Err(ECONNREFUSED): the listener is gone.
    pub fn dial(&mut self, conn: ConnId, listener: SockId) -> Result<OwnedFd, i32> {
        let ss = new_sock(libc::SOCK_STREAM).ok_or(libc::EMFILE)?;
        bind_name(&ss, &self.conn_name(conn))?;
        match connect_name(&ss, &self.sock_name(listener)) {
            Ok(()) => Ok(ss),
            Err(libc::EAGAIN) => Err(libc::ECONNREFUSED),
            Err(e) => Err(e),
        }
    }

    /// Connect the guest's socket `g` to an end of ours and start relaying
    /// the connection with `ss` (from [`NetKernel::dial`]) as the server's end.
    pub fn attach(&mut self, conn: ConnId, g: &OwnedFd, ss: OwnedFd) -> Result<(), i32> {
        let rname = format!("{}/relay", self.prefix);
        let relay_fd = self.relay()?.as_raw_fd();
        connect_name(g, &rname)?;
        // SAFETY: accepting on our own listener.
        let sc = unsafe {
            libc::accept4(
                relay_fd,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            )
        };
        if sc < 0 {
            return Err(errno());
        }
        // SAFETY: fresh descriptor we own.
        let sc = unsafe { OwnedFd::from_raw_fd(sc) };
        self.ends.insert((conn, Side::Client), sc);
        self.ends.insert((conn, Side::Server), ss);
        self.set_interest((conn, Side::Client), true, false);
        self.set_interest((conn, Side::Server), true, false);
        Ok(())
    }

    fn set_interest(&mut self, key: (ConnId, Side), read: bool, write: bool) {
        let Ok(ep) = self.epoll() else { return };
        let Some(fd) = self.ends.get(&key).map(|f| f.as_raw_fd()) else {
            return;
        };
        let mut want = 0u32;
        if read {
            want |= (libc::EPOLLIN | libc::EPOLLRDHUP) as u32;
        }
        if write {
            want |= libc::EPOLLOUT as u32;
        }
        let had = self.interest.get(&key).copied();
        if had == Some(want) {
            return;
        }
        let mut ev = libc::epoll_event {
            events: want,
            u64: ((key.0 as u64) << 1) | key.1 as u64,
        };
        // SAFETY: epoll_ctl on our own descriptors with a local event.
        unsafe {
            match (had, want) {
                (None, 0) => {}
                (None, _) => {
                    libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut ev);
                    self.interest.insert(key, want);
                }
                (Some(_), 0) => {
                    libc::epoll_ctl(ep, libc::EPOLL_CTL_DEL, fd, &mut ev);
                    self.interest.remove(&key);
                }
                (Some(_), _) => {
                    libc::epoll_ctl(ep, libc::EPOLL_CTL_MOD, fd, &mut ev);
                    self.interest.insert(key, want);
                }
            }
        }
    }

    fn refresh(&mut self, net: &Net, key: (ConnId, Side)) {
        let read = !self.eof.contains(&key);
        // Data toward this end's guest comes from the other side.
        let write = net.is_stalled(key.0, key.1.other());
        self.set_interest(key, read, write);
    }

    /// Something to do at a scheduling point.
    pub fn busy(&self, net: &Net) -> bool {
        !self.ends.is_empty() || net.next_due().is_some()
    }

    /// Take in what the guests wrote, deliver what is due, at `now`.
    pub fn pump(&mut self, net: &mut Net, now: u64) {
        if !self.busy(net) {
            return;
        }
        self.ingest(net, now);
        self.deliver(net, now);
    }

    fn ingest(&mut self, net: &mut Net, now: u64) {
        let Some(ep) = self.epfd.as_ref().map(|f| f.as_raw_fd()) else {
            return;
        };
        let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 64];
        // SAFETY: non-blocking wait into a local array.
        let n = unsafe { libc::epoll_wait(ep, evs.as_mut_ptr(), evs.len() as i32, 0) };
        if n <= 0 {
            return;
        }
        // Handle in a fixed order, whatever order epoll reported.
        let mut keys: Vec<(ConnId, Side, u32)> = evs[..n as usize]
            .iter()
            .map(|e| {
                let d = e.u64;
                let side = if d & 1 == 0 {
                    Side::Client
                } else {
                    Side::Server
                };
                ((d >> 1) as ConnId, side, e.events)
            })
            .collect();
        keys.sort();
        if self.buf.len() < 65536 {
            self.buf.resize(65536, 0);
        }
        for (c, side, ev) in keys {
            let key = (c, side);
            if ev & libc::EPOLLOUT as u32 != 0 && net.is_stalled(c, side.other()) {
                net.drained(c, side);
            }
            if ev & (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR) as u32 != 0
                && !self.eof.contains(&key)
            {
                let Some(fd) = self.ends.get(&key).map(|f| f.as_raw_fd()) else {
                    continue;
                };
                let mut taken = net.conn(c).map_or(0, |x| x.queued_bytes(side));
                while taken < CAP {
                    // SAFETY: receive into our own buffer.
                    let r = unsafe {
                        libc::recv(
                            fd,
                            self.buf.as_mut_ptr().cast(),
                            self.buf.len(),
                            libc::MSG_DONTWAIT,
                        )
                    };
                    if r > 0 {
                        net.send(c, side, self.buf[..r as usize].to_vec(), now);
                        taken += r as usize;
                        continue;
                    }
                    if r < 0 && errno() == libc::EAGAIN {
                        break;
                    }
                    // EOF or a reset: the guest shut down its writing side.
                    net.fin(c, side, now);
                    self.eof.insert(key);
                    break;
                }
            }
            self.refresh(net, key);
        }
    }

    fn deliver(&mut self, net: &mut Net, now: u64) {
        for (c, from) in net.due_streams(now) {
            let to = (c, from.other());
            loop {
                let Some(fd) = self.ends.get(&to).map(|f| f.as_raw_fd()) else {
                    net.discard(c, from);
                    break;
                };
                match net.head(c, from, now) {
                    None => break,
                    Some(Head::Reset) => {
                        // Closing our ends shows the guests EOF and EPIPE;
                        // their next call reports ECONNRESET (handlers/net).
                        net.reset_conn(c);
                        for side in [Side::Client, Side::Server] {
                            self.set_interest((c, side), false, false);
                            self.ends.remove(&(c, side));
                            self.eof.remove(&(c, side));
                        }
                        break;
                    }
                    Some(Head::Fin) => {
                        // SAFETY: shutdown on our own end.
                        unsafe { libc::shutdown(fd, libc::SHUT_WR) };
                        net.delivered(c, from, 0, false);
                    }
                    Some(Head::Data(d)) => {
                        // SAFETY: send from the world's buffer to our end.
                        let r = unsafe {
                            libc::send(
                                fd,
                                d.as_ptr().cast(),
                                d.len(),
                                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                            )
                        };
                        let len = d.len();
                        if r >= 0 {
                            let full = (r as usize) < len;
                            net.delivered(c, from, r as usize, full);
                            if full {
                                self.refresh(net, to);
                                break;
                            }
                        } else if errno() == libc::EAGAIN {
                            net.delivered(c, from, 0, true);
                            self.refresh(net, to);
                            break;
                        } else {
                            // The receiving guest is gone: like a reset, the
                            // sender's later writes fail.
                            net.discard(c, from);
                            if let Some(f) = self.ends.get(&(c, from)) {
                                // SAFETY: shutdown on our own end.
                                unsafe { libc::shutdown(f.as_raw_fd(), libc::SHUT_RDWR) };
                            }
                            break;
                        }
                    }
                }
            }
            if net.finished(c)
                && self.eof.contains(&(c, Side::Client))
                && self.eof.contains(&(c, Side::Server))
            {
                self.drop_conn(net, c);
            }
        }
        for d in net.take_due_datagrams(now) {
            if !self.deliver_datagram(net, d.from, d.to, &d.data) && net.refused_port(d.sender) {
                self.mark_error(d.sender);
            }
        }
    }

    fn drop_conn(&mut self, net: &mut Net, c: ConnId) {
        for side in [Side::Client, Side::Server] {
            self.set_interest((c, side), false, false);
            self.ends.remove(&(c, side));
            self.eof.remove(&(c, side));
        }
        net.remove_conn(c);
    }

    /// False when the receiver is gone.
    fn deliver_datagram(
        &mut self,
        net: &mut Net,
        from: std::net::SocketAddr,
        to: SockId,
        data: &[u8],
    ) -> bool {
        if !self.senders.contains_key(&from) {
            let Some(f) = new_sock(libc::SOCK_DGRAM) else {
                net.dropped_no_receiver();
                return true;
            };
            if bind_name(&f, &self.sender_name(from)).is_err() {
                net.dropped_no_receiver();
                return true;
            }
            self.senders.insert(from, f);
        }
        let Some(fd) = self.senders.get(&from).map(|f| f.as_raw_fd()) else {
            return true;
        };
        let (a, l) = sun(&self.sock_name(to));
        // SAFETY: sending from a local buffer to a local address.
        let r = unsafe {
            libc::sendto(
                fd,
                data.as_ptr().cast(),
                data.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                (&a as *const libc::sockaddr_un).cast(),
                l,
            )
        };
        if r < 0 {
            net.dropped_no_receiver();
            if errno() == libc::ECONNREFUSED {
                net.close(to);
                return false;
            }
        }
        true
    }

    /// A pending error on UDP socket `id`: queue an empty datagram from an
    /// unnamed socket (a marker, never shown to the guest) so that a
    /// waiting poll or epoll wakes and the next call reports the error.
    pub fn mark_error(&mut self, id: SockId) {
        let Some(f) = new_sock(libc::SOCK_DGRAM) else {
            return;
        };
        let (a, l) = sun(&self.sock_name(id));
        // SAFETY: an empty datagram to a local address.
        unsafe {
            libc::sendto(
                f.as_raw_fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                (&a as *const libc::sockaddr_un).cast(),
                l,
            )
        };
    }

    /// Whether a descriptor some thread waits on is fed only from inside
    /// the sandbox (a guest socket of the virtual network).
    pub fn internal(&self, f: &OwnedFd) -> bool {
        self.lookup(f).is_some()
    }
}

/// Read a sockaddr_in/sockaddr_in6 from the guest. `Ok(None)`: AF_UNSPEC.
pub fn read_addr(
    tid: libc::pid_t,
    ptr: u64,
    len: u64,
) -> Result<Option<std::net::SocketAddr>, i32> {
    use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
    if ptr == 0 || len < 2 {
        return Err(if ptr == 0 { libc::EFAULT } else { libc::EINVAL });
    }
    let mut b = [0u8; 28];
    let n = (len as usize).min(28);
    sys::read_mem(tid, ptr, &mut b[..n]).map_err(|_| libc::EFAULT)?;
    let fam = u16::from_ne_bytes([b[0], b[1]]) as i32;
    let port = u16::from_be_bytes([b[2], b[3]]);
    match fam {
        libc::AF_UNSPEC => Ok(None),
        libc::AF_INET if n >= 16 => Ok(Some(SocketAddr::V4(SocketAddrV4::new(
            Ipv4Addr::new(b[4], b[5], b[6], b[7]),
            port,
        )))),
        libc::AF_INET6 if n >= 24 => {
            let mut ip = [0u8; 16];
            ip.copy_from_slice(&b[8..24]);
            let flow = u32::from_ne_bytes([b[4], b[5], b[6], b[7]]);
            let scope = if n >= 28 {
                u32::from_ne_bytes([b[24], b[25], b[26], b[27]])
            } else {
                0
            };
            Ok(Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(ip),
                port,
                flow,
                scope,
            ))))
        }
        libc::AF_INET | libc::AF_INET6 => Err(libc::EINVAL),
        _ => Err(libc::EAFNOSUPPORT),
    }
}

/// The bytes of `a` as a socket of family `v6` reports it.
pub fn encode_addr(a: std::net::SocketAddr, v6: bool) -> Vec<u8> {
    use std::net::IpAddr;
    let port = a.port().to_be_bytes();
    if v6 {
        let ip = match a.ip() {
            IpAddr::V4(v4) => v4.to_ipv6_mapped(),
            IpAddr::V6(v6) => v6,
        };
        let mut b = vec![0u8; 28];
        b[..2].copy_from_slice(&(libc::AF_INET6 as u16).to_ne_bytes());
        b[2..4].copy_from_slice(&port);
        b[8..24].copy_from_slice(&ip.octets());
        b
    } else {
        let ip = match detrun_scheduler::net::norm_ip(a.ip()) {
            IpAddr::V4(v4) => v4.octets(),
            IpAddr::V6(_) => [0; 4],
        };
        let mut b = vec![0u8; 16];
        b[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        b[2..4].copy_from_slice(&port);
        b[4..8].copy_from_slice(&ip);
        b
    }
}

/// Write an address to the guest's (addr, *addrlen) pair, truncating as the
/// kernel does and storing the full length.
pub fn write_addr(tid: libc::pid_t, ptr: u64, lenp: u64, bytes: &[u8]) -> Result<(), i32> {
    if ptr == 0 || lenp == 0 {
        return Ok(());
    }
    let cap = sys::read_u32(tid, lenp).map_err(|_| libc::EFAULT)? as usize;
    if (cap as i32) < 0 {
        return Err(libc::EINVAL);
    }
    let n = cap.min(bytes.len());
    sys::write_mem(tid, ptr, &bytes[..n]).map_err(|_| libc::EFAULT)?;
    sys::write_u32(tid, lenp, bytes.len() as u32).map_err(|_| libc::EFAULT)
}

/// Whether the datagram at the head of `f`'s queue is an error marker
/// (empty, from an unnamed socket): if so, drop it.
pub fn drop_marker(f: &OwnedFd) -> bool {
    // SAFETY: zeroed sockaddr_un filled by the kernel.
    let mut sa: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    let mut sl = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
    let mut b = [0u8; 1];
    // SAFETY: peek into local buffers.
    let n = unsafe {
        libc::recvfrom(
            f.as_raw_fd(),
            b.as_mut_ptr().cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT | libc::MSG_TRUNC,
            (&mut sa as *mut libc::sockaddr_un).cast(),
            &mut sl,
        )
    };
    if n != 0 || sl as usize > std::mem::size_of::<libc::sa_family_t>() {
        return false;
    }
    // SAFETY: consume that one datagram.
    unsafe { libc::recv(f.as_raw_fd(), b.as_mut_ptr().cast(), 1, libc::MSG_DONTWAIT) };
    true
}
