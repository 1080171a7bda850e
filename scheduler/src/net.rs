//! The virtual network: hosts, sockets, connections, data in flight with
//! virtual delivery times, and the fault plan.
//!
//! The model is one machine with many addresses: loopback, the unspecified
//! address and every virtual host (`--host NAME=ADDR`) are local; anything
//! else is outside the sandbox and unreachable. TCP data moves as chunks,
//! in order per direction, each delivered at `send time + latency (+ jitter)`,
//! later when a loss forces a retransmission or a partition holds it until
//! it heals. UDP datagrams are delivered at the same kind of time or dropped
//! (loss, partition, no receiver). Every fault decision is drawn from the
//! seed's fault stream in the order of sends, so one seed gives one packet
//! history.
//!
//! Times are virtual monotonic nanoseconds; partition windows are given as
//! time since the start of the run.
//!
//! The tracer owns the kernel side (which descriptor is which socket, moving
//! bytes); this module only decides.

use rand_chacha::ChaCha20Rng;
use rand_core::RngCore;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

pub type SockId = u32;
pub type ConnId = u32;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Proto {
    Tcp,
    Udp,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    V4,
    V6,
}

/// One side of a TCP connection: the connecting socket or the accepted one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Side {
    Client = 0,
    Server = 1,
}

impl Side {
    pub fn other(self) -> Side {
        match self {
            Side::Client => Side::Server,
            Side::Server => Side::Client,
        }
    }
}

/// An address pattern of a partition: any field left out matches anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub ip: Option<IpAddr>,
    pub port: Option<u16>,
}

impl Endpoint {
    pub fn matches(&self, a: SocketAddr) -> bool {
        self.ip.is_none_or(|ip| norm_ip(ip) == norm_ip(a.ip()))
            && self.port.is_none_or(|p| p == a.port())
    }
}

/// Traffic between `a` and `b` (either way) is cut from `from` until
/// `until` (ns since the start of the run).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Partition {
    pub a: Endpoint,
    pub b: Endpoint,
    pub from: u64,
    pub until: u64,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct NetConfig {
    /// One-way delay of every delivery.
    pub latency_ns: u64,
    /// Up to this much more, uniformly.
    pub jitter_ns: u64,
    /// Probability that a datagram is dropped or a TCP chunk is retransmitted.
    pub loss: f64,
    /// Probability that a TCP chunk resets its connection instead of arriving.
    pub reset: f64,
    pub partitions: Vec<Partition>,
    /// Virtual hosts: addresses that are local besides loopback.
    pub hosts: Vec<(String, IpAddr)>,
}

impl NetConfig {
    pub fn has_faults(&self) -> bool {
        self.latency_ns > 0
            || self.jitter_ns > 0
            || self.loss > 0.0
            || self.reset > 0.0
            || !self.partitions.is_empty()
    }
}

/// v4-mapped IPv6 addresses are their IPv4 address.
pub fn norm_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => ip,
        },
        v4 => v4,
    }
}

pub fn norm(a: SocketAddr) -> SocketAddr {
    SocketAddr::new(norm_ip(a.ip()), a.port())
}

#[derive(Clone, Debug)]
pub struct Sock {
    pub proto: Proto,
    pub family: Family,
    pub local: Option<SocketAddr>,
    pub peer: Option<SocketAddr>,
    pub listening: bool,
    pub closed: bool,
    pub v6only: bool,
    pub reuseport: bool,
    pub conn: Option<(ConnId, Side)>,
    /// An error the next read or write reports (ECONNRESET after a reset,
    /// ECONNREFUSED after a connected UDP socket sent to a closed port).
    pub pending_error: Option<i32>,
    /// A non-blocking connect answered EINPROGRESS: the next connect
    /// reports success (then EISCONN), as a completed TCP handshake does.
    pub connecting: bool,
    /// Options set by the guest, answered back by getsockopt.
    pub opts: BTreeMap<(i32, i32), Vec<u8>>,
}

#[derive(Clone, Debug)]
struct Chunk {
    at: u64,
    data: Vec<u8>,
    fin: bool,
    /// A reset fault: the connection breaks when this chunk would arrive.
    reset: bool,
}

#[derive(Clone, Debug)]
pub struct Conn {
    pub client: SockId,
    pub server: Option<SockId>,
    pub listener: SockId,
    pub client_addr: SocketAddr,
    pub server_addr: SocketAddr,
    /// Chunks in flight, indexed by the sending side.
    q: [VecDeque<Chunk>; 2],
    last_at: [u64; 2],
    /// The receiver's buffer was full: wait until the tracer says it drained.
    stalled: [bool; 2],
    /// A FIN was sent by this side / delivered to the other.
    pub fin_sent: [bool; 2],
    pub fin_delivered: [bool; 2],
}

impl Conn {
    pub fn queued_bytes(&self, from: Side) -> usize {
        self.q[from as usize].iter().map(|c| c.data.len()).sum()
    }
}

/// What the head of a direction holds when it is due.
#[derive(Debug, PartialEq, Eq)]
pub enum Head<'a> {
    Data(&'a [u8]),
    Fin,
    Reset,
}

#[derive(Clone, Debug)]
pub struct Datagram {
    pub to: SockId,
    /// The sender's address (its socket may be bound to the unspecified
    /// address: this is the source the receiver sees).
    pub from: SocketAddr,
    /// The sending socket (told of a closed port if it is connected).
    pub sender: SockId,
    pub data: Vec<u8>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NetStats {
    pub connections: u64,
    pub refused: u64,
    pub datagrams: u64,
    pub dropped_loss: u64,
    pub dropped_partition: u64,
    pub dropped_no_receiver: u64,
    pub retransmits: u64,
    pub held_by_partition: u64,
    pub resets: u64,
    /// Destinations outside the sandbox that the guest tried, in order of
    /// first attempt.
    pub external: Vec<SocketAddr>,
}

#[derive(Clone, Debug)]
pub struct Net {
    pub cfg: NetConfig,
    rng: ChaCha20Rng,
    start: u64,
    socks: BTreeMap<SockId, Sock>,
    next_sock: SockId,
    conns: BTreeMap<ConnId, Conn>,
    next_conn: ConnId,
    /// Directions with chunks in flight, as (conn, sending side).
    busy: BTreeSet<(ConnId, Side)>,
    dgrams: BTreeMap<(u64, u64), Datagram>,
    seq: u64,
    next_port: u16,
    /// Sockets with a pending error, and UDP sockets ever made: cheap
    /// answers for the tracer's hot path.
    errors: usize,
    udp: usize,
    pub stats: NetStats,
}

const EPH_LO: u16 = 32768;
const EPH_HI: u16 = 60999;
/// The smallest retransmission timeout Linux uses.
const RTO_MIN: u64 = 200_000_000;

pub const EADDRINUSE: i32 = 98;
pub const EADDRNOTAVAIL: i32 = 99;
pub const EAFNOSUPPORT: i32 = 97;
pub const ECONNREFUSED: i32 = 111;
pub const ECONNRESET: i32 = 104;
pub const EINVAL: i32 = 22;
pub const EISCONN: i32 = 106;
pub const ENETUNREACH: i32 = 101;
pub const EDESTADDRREQ: i32 = 89;
pub const EMSGSIZE: i32 = 90;

impl Net {
    /// Fault decisions from here on come from `rng` (a branch).
    pub fn reseed(&mut self, rng: ChaCha20Rng) {
        self.rng = rng;
    }

    pub fn new(cfg: NetConfig, rng: ChaCha20Rng, start: u64) -> Net {
        Net {
            cfg,
            rng,
            start,
            socks: BTreeMap::new(),
            next_sock: 1,
            conns: BTreeMap::new(),
            next_conn: 1,
            busy: BTreeSet::new(),
            dgrams: BTreeMap::new(),
            seq: 0,
            next_port: EPH_LO,
            errors: 0,
            udp: 0,
            stats: NetStats::default(),
        }
    }

    pub fn is_local(&self, ip: IpAddr) -> bool {
        let ip = norm_ip(ip);
        ip.is_loopback()
            || ip.is_unspecified()
            || self.cfg.hosts.iter().any(|(_, h)| norm_ip(*h) == ip)
    }

    // ---- sockets ----

    pub fn socket(&mut self, proto: Proto, family: Family) -> SockId {
        if proto == Proto::Udp {
            self.udp += 1;
        }
        let id = self.next_sock;
        self.next_sock += 1;
        self.socks.insert(
            id,
            Sock {
                proto,
                family,
                local: None,
                peer: None,
                listening: false,
                closed: false,
                v6only: false,
                reuseport: false,
                conn: None,
                pending_error: None,
                connecting: false,
                opts: BTreeMap::new(),
            },
        );
        id
    }

    pub fn sock(&self, id: SockId) -> Option<&Sock> {
        self.socks.get(&id)
    }

    pub fn sock_mut(&mut self, id: SockId) -> Option<&mut Sock> {
        self.socks.get_mut(&id)
    }

    /// The socket was found closed by the guest.
    pub fn close(&mut self, id: SockId) {
        if let Some(s) = self.socks.get_mut(&id) {
            s.closed = true;
            s.listening = false;
        }
    }

    fn family_ok(s: &Sock, a: SocketAddr) -> bool {
        match s.family {
            Family::V4 => a.is_ipv4(),
            Family::V6 => a.is_ipv6() || !s.v6only,
        }
    }

    /// Two local addresses that one socket each cannot both hold.
    fn overlap(a: &Sock, aa: SocketAddr, b: &Sock, ba: SocketAddr) -> bool {
        if aa.port() != ba.port() {
            return false;
        }
        let (ia, ib) = (norm_ip(aa.ip()), norm_ip(ba.ip()));
        let covers = |s: &Sock, i: IpAddr, other: IpAddr| {
            i.is_unspecified()
                && (i.is_ipv4() == other.is_ipv4() || (s.family == Family::V6 && !s.v6only))
        };
        ia == ib || covers(a, ia, ib) || covers(b, ib, ia)
    }

    /// Another live socket holding an address that overlaps `addr`.
    pub fn conflict(&self, id: SockId, addr: SocketAddr) -> Option<SockId> {
        let me = self.socks.get(&id)?;
        self.socks.iter().find_map(|(&o, s)| {
            let l = s.local?;
            (o != id
                && !s.closed
                && s.conn.map(|c| c.1) != Some(Side::Server)
                && s.proto == me.proto
                && !(s.reuseport && me.reuseport)
                && Self::overlap(me, norm(addr), s, l))
            .then_some(o)
        })
    }

    fn free_port(&mut self, id: SockId, ip: IpAddr) -> Option<u16> {
        let span = (EPH_HI - EPH_LO + 1) as u32;
        for i in 0..span {
            let p = EPH_LO + ((self.next_port - EPH_LO) as u32 + i).rem_euclid(span) as u16;
            if self.conflict(id, SocketAddr::new(ip, p)).is_none() {
                self.next_port = if p == EPH_HI { EPH_LO } else { p + 1 };
                return Some(p);
            }
        }
        None
    }

    /// Bind `id` to `addr` (port 0: the next free ephemeral port). On
    /// `Err(Ok(other))` the address is held by `other`, which the tracer may
    /// find already closed (then: [`Net::close`] it and bind again).
    pub fn bind(
        &mut self,
        id: SockId,
        addr: SocketAddr,
    ) -> Result<SocketAddr, Result<SockId, i32>> {
        let Some(s) = self.socks.get(&id) else {
            return Err(Err(EINVAL));
        };
        if s.local.is_some() {
            return Err(Err(EINVAL));
        }
        if !Self::family_ok(s, addr) {
            return Err(Err(EAFNOSUPPORT));
        }
        if !self.is_local(addr.ip()) {
            return Err(Err(EADDRNOTAVAIL));
        }
        let ip = norm_ip(addr.ip());
        let port = if addr.port() == 0 {
            self.free_port(id, ip).ok_or(Err(EADDRINUSE))?
        } else {
            if let Some(o) = self.conflict(id, SocketAddr::new(ip, addr.port())) {
                return Err(Ok(o));
            }
            addr.port()
        };
        let local = SocketAddr::new(ip, port);
        if let Some(s) = self.socks.get_mut(&id) {
            s.local = Some(local);
        }
        Ok(local)
    }

    /// The address a socket sends from, binding it to an ephemeral port
    /// first if it is not bound (as `connect` and `sendto` do).
    pub fn autobind(&mut self, id: SockId, toward: IpAddr) -> Result<SocketAddr, i32> {
        let s = self.socks.get(&id).ok_or(EINVAL)?;
        if let Some(l) = s.local {
            if !l.ip().is_unspecified() {
                return Ok(l);
            }
            return Ok(SocketAddr::new(source_ip(norm_ip(toward)), l.port()));
        }
        let ip = if s.family == Family::V4 || norm_ip(toward).is_ipv4() {
            IpAddr::V4(Ipv4Addr::UNSPECIFIED)
        } else {
            IpAddr::V6(Ipv6Addr::UNSPECIFIED)
        };
        let l = self
            .bind(id, SocketAddr::new(ip, 0))
            .map_err(|e| e.err().unwrap_or(EADDRINUSE))?;
        Ok(SocketAddr::new(source_ip(norm_ip(toward)), l.port()))
    }

    pub fn listen(&mut self, id: SockId) -> Result<(), i32> {
        if self.socks.get(&id).is_some_and(|s| s.local.is_none()) {
            let any = match self.socks[&id].family {
                Family::V4 => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
                Family::V6 => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
            };
            self.bind(id, SocketAddr::new(any, 0))
                .map_err(|e| e.err().unwrap_or(EADDRINUSE))?;
        }
        let s = self.socks.get_mut(&id).ok_or(EINVAL)?;
        if s.proto != Proto::Tcp || s.conn.is_some() {
            return Err(EINVAL);
        }
        s.listening = true;
        Ok(())
    }

    /// Live sockets of `proto` that `dest` reaches, best match first:
    /// listeners for TCP, bound sockets for UDP.
    pub fn receivers(&self, proto: Proto, dest: SocketAddr) -> Vec<SockId> {
        let d = norm(dest);
        let mut exact = Vec::new();
        let mut wild = Vec::new();
        for (&id, s) in &self.socks {
            let Some(l) = s.local else { continue };
            if s.closed || s.proto != proto || l.port() != d.port() {
                continue;
            }
            if proto == Proto::Tcp && !s.listening {
                continue;
            }
            let li = norm_ip(l.ip());
            if li == d.ip() || (li.is_loopback() && d.ip().is_unspecified()) {
                exact.push(id);
            } else if li.is_unspecified()
                && (li.is_ipv4() == d.ip().is_ipv4() || (s.family == Family::V6 && !s.v6only))
            {
                wild.push(id);
            }
        }
        exact.extend(wild);
        exact
    }

    /// Check a destination: outside the sandbox is unreachable (and noted).
    pub fn reachable(&mut self, dest: SocketAddr) -> Result<(), i32> {
        if self.is_local(dest.ip()) {
            return Ok(());
        }
        let d = norm(dest);
        if !self.stats.external.contains(&d) {
            self.stats.external.push(d);
        }
        Err(ENETUNREACH)
    }

    // ---- TCP ----

    /// `client` connected to `listener` at `dest`; returns the connection.
    pub fn connect(
        &mut self,
        client: SockId,
        listener: SockId,
        dest: SocketAddr,
    ) -> Result<ConnId, i32> {
        let s = self.socks.get(&client).ok_or(EINVAL)?;
        if s.conn.is_some() {
            return Err(EISCONN);
        }
        if s.listening {
            return Err(EINVAL);
        }
        let from = self.autobind(client, dest.ip())?;
        let id = self.next_conn;
        self.next_conn += 1;
        let dest = norm(dest);
        let dest = if dest.ip().is_unspecified() {
            SocketAddr::new(source_ip(dest.ip()), dest.port())
        } else {
            dest
        };
        self.conns.insert(
            id,
            Conn {
                client,
                server: None,
                listener,
                client_addr: from,
                server_addr: dest,
                q: [VecDeque::new(), VecDeque::new()],
                last_at: [0, 0],
                stalled: [false, false],
                fin_sent: [false, false],
                fin_delivered: [false, false],
            },
        );
        if let Some(s) = self.socks.get_mut(&client) {
            s.conn = Some((id, Side::Client));
            s.peer = Some(dest);
            if s.local.is_some_and(|l| l.ip().is_unspecified()) {
                s.local = Some(from);
            }
        }
        self.stats.connections += 1;
        Ok(id)
    }

    /// The listener's guest accepted `conn` as socket `server`. Returns the
    /// client's address.
    pub fn accept(&mut self, conn: ConnId, server: SockId) -> Option<SocketAddr> {
        let c = self.conns.get_mut(&conn)?;
        c.server = Some(server);
        let (local, peer) = (c.server_addr, c.client_addr);
        let s = self.socks.get_mut(&server)?;
        s.local = Some(local);
        s.peer = Some(peer);
        s.conn = Some((conn, Side::Server));
        Some(peer)
    }

    /// A connection the kernel side could not set up: forget it.
    pub fn abort_conn(&mut self, id: ConnId) {
        if let Some(c) = self.conns.remove(&id) {
            if let Some(s) = self.socks.get_mut(&c.client) {
                s.conn = None;
                s.peer = None;
            }
            self.stats.connections -= 1;
        }
        self.busy.retain(|&(c, _)| c != id);
    }

    pub fn conn(&self, id: ConnId) -> Option<&Conn> {
        self.conns.get(&id)
    }

    pub fn refused(&mut self) {
        self.stats.refused += 1;
    }

    fn partitioned(&self, a: SocketAddr, b: SocketAddr, t: u64) -> Option<u64> {
        let rel = t.saturating_sub(self.start);
        self.cfg
            .partitions
            .iter()
            .filter(|p| {
                rel >= p.from
                    && rel < p.until
                    && ((p.a.matches(a) && p.b.matches(b)) || (p.a.matches(b) && p.b.matches(a)))
            })
            .map(|p| self.start + p.until)
            .max()
    }

    fn delay(&mut self) -> u64 {
        let mut d = self.cfg.latency_ns;
        if self.cfg.jitter_ns > 0 {
            d += self.rng.next_u64() % (self.cfg.jitter_ns + 1);
        }
        d
    }

    fn lost(&mut self) -> bool {
        self.cfg.loss > 0.0 && chance(&mut self.rng, self.cfg.loss)
    }

    fn endpoints(&self, conn: ConnId, from: Side) -> Option<(SocketAddr, SocketAddr)> {
        let c = self.conns.get(&conn)?;
        Some(match from {
            Side::Client => (c.client_addr, c.server_addr),
            Side::Server => (c.server_addr, c.client_addr),
        })
    }

    /// When a chunk sent now from `src` to `dst` arrives: held across a
    /// partition until it heals, retransmitted after losses.
    fn tcp_arrival(&mut self, src: SocketAddr, dst: SocketAddr, now: u64) -> u64 {
        let mut at = now + self.delay();
        let mut rto = RTO_MIN.max(2 * self.cfg.latency_ns);
        for _ in 0..6 {
            if !self.lost() {
                break;
            }
            self.stats.retransmits += 1;
            at += rto;
            rto *= 2;
        }
        let mut held = false;
        if let Some(heal) = self.partitioned(src, dst, now) {
            held = true;
            at = at.max(heal + self.cfg.latency_ns);
        }
        for _ in 0..=self.cfg.partitions.len() {
            match self.partitioned(src, dst, at) {
                Some(heal) => {
                    held = true;
                    at = heal + self.cfg.latency_ns;
                }
                None => break,
            }
        }
        if held {
            self.stats.held_by_partition += 1;
        }
        at
    }

    /// Bytes the guest of `from` wrote, taken in at virtual time `now`.
    pub fn send(&mut self, conn: ConnId, from: Side, data: Vec<u8>, now: u64) {
        self.push(conn, from, data, false, now);
    }

    /// The guest of `from` shut down writing (or closed).
    pub fn fin(&mut self, conn: ConnId, from: Side, now: u64) {
        if self
            .conns
            .get(&conn)
            .is_some_and(|c| !c.fin_sent[from as usize])
        {
            self.push(conn, from, Vec::new(), true, now);
            if let Some(c) = self.conns.get_mut(&conn) {
                c.fin_sent[from as usize] = true;
            }
        }
    }

    fn push(&mut self, conn: ConnId, from: Side, data: Vec<u8>, fin: bool, now: u64) {
        let Some((src, dst)) = self.endpoints(conn, from) else {
            return;
        };
        let at = if self.cfg.has_faults() {
            self.tcp_arrival(src, dst, now)
        } else {
            now
        };
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let at = at.max(c.last_at[from as usize]);
        c.last_at[from as usize] = at;
        let reset = !fin && self.cfg.reset > 0.0 && chance(&mut self.rng, self.cfg.reset);
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        c.q[from as usize].push_back(Chunk {
            at,
            data,
            fin,
            reset,
        });
        self.busy.insert((conn, from));
    }

    /// Directions whose head chunk is due at `now` and not stalled.
    pub fn due_streams(&self, now: u64) -> Vec<(ConnId, Side)> {
        self.busy
            .iter()
            .copied()
            .filter(|&(c, s)| {
                self.conns.get(&c).is_some_and(|x| {
                    !x.stalled[s as usize] && x.q[s as usize].front().is_some_and(|h| h.at <= now)
                })
            })
            .collect()
    }

    pub fn head(&self, conn: ConnId, from: Side, now: u64) -> Option<Head<'_>> {
        let c = self.conns.get(&conn)?;
        let h = c.q[from as usize].front()?;
        if h.at > now || c.stalled[from as usize] {
            return None;
        }
        Some(if h.reset {
            Head::Reset
        } else if h.fin {
            Head::Fin
        } else {
            Head::Data(&h.data)
        })
    }

    /// The tracer delivered `n` bytes of the head (or the FIN); `full`: the
    /// receiver took less than offered, so wait for [`Net::drained`].
    pub fn delivered(&mut self, conn: ConnId, from: Side, n: usize, full: bool) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let q = &mut c.q[from as usize];
        if let Some(h) = q.front_mut() {
            if h.fin {
                q.pop_front();
                c.fin_delivered[from as usize] = true;
            } else if n >= h.data.len() {
                q.pop_front();
            } else {
                h.data.drain(..n);
            }
        }
        c.stalled[from as usize] = full;
        if q.is_empty() {
            self.busy.remove(&(conn, from));
        }
    }

    pub fn drained(&mut self, conn: ConnId, to: Side) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.stalled[to.other() as usize] = false;
        }
    }

    pub fn is_stalled(&self, conn: ConnId, from: Side) -> bool {
        self.conns
            .get(&conn)
            .is_some_and(|c| c.stalled[from as usize])
    }

    /// The receiver of `from`'s data is gone: drop what is in flight.
    pub fn discard(&mut self, conn: ConnId, from: Side) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.q[from as usize].clear();
            c.stalled[from as usize] = false;
        }
        self.busy.remove(&(conn, from));
    }

    /// A reset arrived: both sockets report ECONNRESET once and are no
    /// longer connected; nothing more is in flight.
    pub fn reset_conn(&mut self, conn: ConnId) {
        if let Some(c) = self.conns.remove(&conn) {
            for s in [Some(c.client), c.server].into_iter().flatten() {
                if let Some(x) = self.socks.get_mut(&s) {
                    if x.pending_error.replace(ECONNRESET).is_none() {
                        self.errors += 1;
                    }
                    x.conn = None;
                    x.peer = None;
                }
            }
            self.stats.resets += 1;
        }
        self.busy.retain(|&(c, _)| c != conn);
    }

    /// Both directions finished: the connection and its sockets are gone.
    pub fn finished(&self, conn: ConnId) -> bool {
        self.conns
            .get(&conn)
            .is_some_and(|c| c.fin_delivered == [true, true] && c.q.iter().all(|q| q.is_empty()))
    }

    pub fn remove_conn(&mut self, conn: ConnId) {
        if let Some(c) = self.conns.remove(&conn) {
            self.close(c.client);
            if let Some(s) = c.server {
                self.close(s);
            }
        }
        self.busy.retain(|&(c, _)| c != conn);
    }

    // ---- UDP ----

    /// A datagram from socket `from` to `dest` at `now`: queued for its
    /// delivery time, or dropped by a fault. Returns whether it was queued.
    pub fn send_to(
        &mut self,
        from: SockId,
        dest: SocketAddr,
        data: Vec<u8>,
        now: u64,
    ) -> Result<bool, i32> {
        self.reachable(dest)?;
        if data.len() > 65507 {
            return Err(EMSGSIZE);
        }
        let src = self.autobind(from, dest.ip())?;
        self.stats.datagrams += 1;
        let at = now
            + if self.cfg.has_faults() {
                self.delay()
            } else {
                0
            };
        if self.lost() {
            self.stats.dropped_loss += 1;
            return Ok(false);
        }
        if self.partitioned(src, norm(dest), now).is_some()
            || self.partitioned(src, norm(dest), at).is_some()
        {
            self.stats.dropped_partition += 1;
            return Ok(false);
        }
        // The receiver is chosen at delivery; remember the destination.
        let to = match self.receivers(Proto::Udp, dest).first() {
            Some(&to) => to,
            None => {
                self.stats.dropped_no_receiver += 1;
                self.refused_port(from);
                return Ok(false);
            }
        };
        if let Some(p) = self.socks.get(&to).and_then(|s| s.peer) {
            if norm(p) != src {
                self.stats.dropped_no_receiver += 1;
                return Ok(false);
            }
        }
        self.seq += 1;
        self.dgrams.insert(
            (at, self.seq),
            Datagram {
                to,
                from: src,
                sender: from,
                data,
            },
        );
        Ok(true)
    }

    /// Datagrams due at `now`, in delivery order.
    pub fn take_due_datagrams(&mut self, now: u64) -> Vec<Datagram> {
        let mut out = Vec::new();
        while let Some(e) = self.dgrams.first_entry() {
            if e.key().0 > now {
                break;
            }
            out.push(e.remove());
        }
        out
    }

    pub fn dropped_no_receiver(&mut self) {
        self.stats.dropped_no_receiver += 1;
    }

    /// The receiver of a datagram from `sender` turned out closed: a
    /// connected sender learns of it (as from an ICMP port unreachable).
    /// True when this sets a new pending error.
    pub fn refused_port(&mut self, sender: SockId) -> bool {
        match self.socks.get_mut(&sender) {
            Some(s) if s.peer.is_some() && s.pending_error.is_none() => {
                s.pending_error = Some(ECONNREFUSED);
                self.errors += 1;
                true
            }
            _ => false,
        }
    }

    // ---- time ----

    /// The earliest delivery time of anything in flight (stalled
    /// directions wait for their receiver, not for time).
    pub fn next_due(&self) -> Option<u64> {
        let streams = self.busy.iter().filter_map(|&(c, s)| {
            let x = self.conns.get(&c)?;
            if x.stalled[s as usize] {
                return None;
            }
            x.q[s as usize].front().map(|h| h.at)
        });
        let d = self.dgrams.keys().next().map(|k| k.0);
        streams.chain(d).min()
    }

    /// Some socket has an error its next read or write reports.
    pub fn any_pending_error(&self) -> bool {
        self.errors > 0
    }

    /// The error a socket's next read or write reports, taken.
    pub fn take_error(&mut self, id: SockId) -> Option<i32> {
        let e = self.socks.get_mut(&id)?.pending_error.take();
        if e.is_some() {
            self.errors -= 1;
        }
        e
    }

    /// Some UDP socket is open (its writes are datagrams the world sends).
    pub fn has_udp(&self) -> bool {
        self.udp > 0
    }

    pub fn active(&self) -> bool {
        !self.socks.is_empty()
    }
}

/// True with probability `p` (53 bits of the stream).
fn chance(rng: &mut ChaCha20Rng, p: f64) -> bool {
    ((rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < p
}

/// The source address a socket bound to the unspecified address uses
/// toward `dest`: the destination itself when it is local (one machine).
fn source_ip(dest: IpAddr) -> IpAddr {
    if dest.is_unspecified() {
        if dest.is_ipv4() {
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        } else {
            IpAddr::V6(Ipv6Addr::LOCALHOST)
        }
    } else {
        dest
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_core::SeedableRng;

    fn net(cfg: NetConfig) -> Net {
        Net::new(cfg, ChaCha20Rng::seed_from_u64(1), 1000)
    }

    fn a(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn ephemeral_ports_are_sequential_and_conflicts_found() {
        let mut n = net(NetConfig::default());
        let x = n.socket(Proto::Tcp, Family::V4);
        let y = n.socket(Proto::Tcp, Family::V4);
        assert_eq!(n.bind(x, a("127.0.0.1:0")).unwrap(), a("127.0.0.1:32768"));
        assert_eq!(n.bind(y, a("0.0.0.0:32768")).unwrap_err(), Ok(x));
        n.close(x);
        assert_eq!(n.bind(y, a("0.0.0.0:32768")).unwrap(), a("0.0.0.0:32768"));
        let z = n.socket(Proto::Udp, Family::V4);
        assert_eq!(n.bind(z, a("10.1.1.1:5")).unwrap_err(), Err(EADDRNOTAVAIL));
    }

    #[test]
    fn dual_stack_listener_takes_v4() {
        let mut n = net(NetConfig::default());
        let l = n.socket(Proto::Tcp, Family::V6);
        n.bind(l, a("[::]:8000")).unwrap();
        n.listen(l).unwrap();
        assert_eq!(n.receivers(Proto::Tcp, a("127.0.0.1:8000")), vec![l]);
        n.sock_mut(l).unwrap().v6only = true;
        assert!(n.receivers(Proto::Tcp, a("127.0.0.1:8000")).is_empty());
        assert_eq!(n.reachable(a("192.0.2.1:80")), Err(ENETUNREACH));
        assert_eq!(n.stats.external, vec![a("192.0.2.1:80")]);
    }

    #[test]
    fn latency_orders_chunks_and_partition_holds_them() {
        let cfg = NetConfig {
            latency_ns: 100,
            partitions: vec![Partition {
                a: Endpoint {
                    ip: None,
                    port: Some(80),
                },
                b: Endpoint {
                    ip: None,
                    port: None,
                },
                from: 0,
                until: 5000,
            }],
            ..Default::default()
        };
        let mut n = net(cfg);
        let l = n.socket(Proto::Tcp, Family::V4);
        n.bind(l, a("127.0.0.1:80")).unwrap();
        n.listen(l).unwrap();
        let c = n.socket(Proto::Tcp, Family::V4);
        let conn = n.connect(c, l, a("127.0.0.1:80")).unwrap();
        n.send(conn, Side::Client, b"hi".to_vec(), 2000);
        assert_eq!(n.next_due(), Some(1000 + 5000 + 100));
        assert!(n.due_streams(6000).is_empty());
        assert_eq!(n.due_streams(6100), vec![(conn, Side::Client)]);
        assert_eq!(n.head(conn, Side::Client, 6100), Some(Head::Data(b"hi")));
        n.delivered(conn, Side::Client, 1, true);
        assert_eq!(n.next_due(), None, "stalled direction waits for its reader");
        n.drained(conn, Side::Server);
        assert_eq!(n.head(conn, Side::Client, 6100), Some(Head::Data(b"i")));
    }

    #[test]
    fn a_reset_leaves_one_error_per_socket() {
        let mut n = net(NetConfig::default());
        let l = n.socket(Proto::Tcp, Family::V4);
        n.bind(l, a("127.0.0.1:80")).unwrap();
        n.listen(l).unwrap();
        let c = n.socket(Proto::Tcp, Family::V4);
        let conn = n.connect(c, l, a("127.0.0.1:80")).unwrap();
        let srv = n.socket(Proto::Tcp, Family::V4);
        n.accept(conn, srv).unwrap();
        assert!(!n.any_pending_error());
        n.reset_conn(conn);
        assert!(n.any_pending_error());
        assert_eq!(n.take_error(c), Some(ECONNRESET));
        assert_eq!(n.take_error(c), None);
        assert!(n.any_pending_error());
        assert_eq!(n.take_error(srv), Some(ECONNRESET));
        assert!(!n.any_pending_error());
        assert!(!n.has_udp());
    }

    #[test]
    fn loss_is_a_function_of_the_seed() {
        let run = |seed| {
            let cfg = NetConfig {
                loss: 0.3,
                ..Default::default()
            };
            let mut n = Net::new(cfg, ChaCha20Rng::seed_from_u64(seed), 0);
            let s = n.socket(Proto::Udp, Family::V4);
            n.bind(s, a("127.0.0.1:9")).unwrap();
            let c = n.socket(Proto::Udp, Family::V4);
            (0..100)
                .map(|i| n.send_to(c, a("127.0.0.1:9"), vec![i], 0).unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(run(1), run(1));
        assert_ne!(run(1), run(2));
        let lost = run(1).iter().filter(|x| !**x).count();
        assert!((15..=45).contains(&lost), "{lost} of 100 lost at 30%");
    }
}
