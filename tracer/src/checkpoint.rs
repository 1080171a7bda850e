//! Checkpoints by forking, and branches from them.
//!
//! A checkpoint is taken at a scheduling point, when every guest thread is
//! in a ptrace-stop and the supervisor's state says how each continues. The
//! running set of processes is *frozen* there and becomes the checkpoint:
//! its supervisor state (the world, each thread's registers, FPU state,
//! signal mask, the kind of stop it is in and how it will resume) is copied
//! into a [`Checkpoint`]. Every later run from it, a branch or the base run
//! going on, is an *instance*: each frozen process forks a copy-on-write copy
//! by an injected `fork`, the copy recreates the other threads by injected
//! `clone` with their saved registers, descriptors that would otherwise be
//! shared with the checkpoint are made private (pipes get a new pipe with the
//! same content, copied with `tee`; files are reopened at the same offset),
//! pending signals are raised again, and the world is cloned.
//!
//! An instance is not the child of the process it copies the way the
//! original was, and its kernel PIDs differ. So instances run in *copy mode*:
//! a second seccomp filter traps the identity calls (`getpid`, `gettid`,
//! `getppid`, process groups), and [`crate::handlers::vpid`] answers them and
//! `wait4`/`waitid`/`kill` from a virtual process table, with the PIDs the
//! original run would have had. Those extra stops are invisible: they are
//! not events of the world, so a branch from a checkpoint and the same branch
//! run from scratch (`World::branch` at the same point) make the same
//! decisions.
//!
//! Not covered (the checkpoint is refused, and says why): sockets, epoll,
//! eventfd, timerfd, signalfd and other anonymous-inode descriptors, named
//! FIFOs, threads blocked in the kernel or in vfork. File *contents* are not
//! checkpointed: a branch that writes a file writes the one file.

use crate::handlers::process::ns_id;
use crate::supervisor::{Park, Post, ProcInfo, Resume, Supervisor, Tracee};
use crate::sys::{self, Regs};
use detrun_scheduler::{ProcId, Tid, World};
use libc::pid_t;
use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// Where a branch (or a checkpoint) is taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BranchAt {
    /// The first scheduling point at or after this virtual time (ns since
    /// the start).
    Time(u64),
    /// The first scheduling point after this many scheduling decisions.
    Event(u64),
}

impl BranchAt {
    pub fn reached(&self, elapsed_ns: u64, decisions: u64) -> bool {
        match *self {
            BranchAt::Time(t) => elapsed_ns >= t,
            BranchAt::Event(n) => decisions >= n,
        }
    }

    /// Parse `250ms`, `1.5s`, `time:250ms` or `event:1200`.
    pub fn parse(s: &str) -> Result<BranchAt, String> {
        if let Some(n) = s.strip_prefix("event:") {
            return n
                .trim()
                .parse()
                .map(BranchAt::Event)
                .map_err(|_| format!("`{s}`: expected event:COUNT, e.g. event:1200"));
        }
        let t = s.strip_prefix("time:").unwrap_or(s).trim();
        let (num, unit) = match t.find(|c: char| c.is_ascii_alphabetic()) {
            Some(i) => (&t[..i], &t[i..]),
            None => (t, "s"),
        };
        let mult = match unit {
            "ns" => 1.0,
            "us" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            _ => return Err(format!("`{s}`: unknown unit `{unit}` (ns, us, ms, s)")),
        };
        match num.trim().parse::<f64>() {
            Ok(v) if v >= 0.0 && v.is_finite() => Ok(BranchAt::Time((v * mult) as u64)),
            _ => Err(format!(
                "`{s}`: expected a virtual time like 250ms or event:COUNT"
            )),
        }
    }
}

/// How a descriptor of a checkpointed process is made private to an instance.
#[derive(Clone, Debug)]
enum FdKind {
    /// Shared with the checkpoint as it is (terminals, /dev/null, the
    /// outside ends of detrun's own standard streams).
    Share,
    /// One end of a pipe between guests: `pipe` indexes [`Checkpoint::pipes`].
    Pipe { pipe: usize, write: bool },
    /// A regular file or directory, reopened at `pos`.
    File { flags: i32, pos: u64 },
    /// detrun's stdout (1) or stderr (2) while branch outputs are captured.
    Capture(u8),
    /// An eventfd with its counter.
    Eventfd { count: u64, semaphore: bool },
    /// An epoll instance and its watches: (fd, events, data). Made after
    /// every other descriptor is in place, since watches name fds.
    Epoll { watches: Vec<(i32, u32, u64)> },
}

#[derive(Clone, Debug)]
struct FdSnap {
    fd: i32,
    kind: FdKind,
    cloexec: bool,
    /// File status flags of the open file description.
    flags: i32,
    /// Descriptors with the same group share one open file description.
    group: usize,
}

pub struct ThreadSnap {
    /// The frozen thread.
    pub tid: pid_t,
    pub vt: Tid,
    pub proc: ProcId,
    regs: Regs,
    xstate: Vec<u8>,
    mask: u64,
    /// Stopped at a seccomp stop (the instance is driven to the same).
    seccomp: bool,
    /// Thread-directed pending signals.
    pending: u64,
    resume: Resume,
    park: Option<Park>,
    saved: Option<Regs>,
    at_exit: bool,
    clear_tid: u64,
    wcont: Option<crate::supervisor::WriteCont>,
    io: Vec<(i32, i16)>,
    wait_mask: Option<u64>,
    parked_nr: i64,
    vtid: pid_t,
}

pub struct ProcSnap {
    info: ProcInfo,
    /// Mappings a fork would drop (MADV_DONTFORK, e.g. V8's heap) or zero
    /// (MADV_WIPEONFORK): (start, length, wipe).
    nofork: Vec<(u64, u64, bool)>,
    /// Process-directed pending signals.
    shared_pending: u64,
    fds: Vec<FdSnap>,
}

pub struct Checkpoint {
    pub index: usize,
    /// Virtual time and decisions where it was taken.
    pub at_ns: u64,
    pub decisions: u64,
    world: World,
    threads: Vec<ThreadSnap>,
    procs: Vec<ProcSnap>,
    vt_count: usize,
    main_proc: ProcId,
    stats: crate::summary::Stats,
    fsv: detrun_scheduler::fsview::FsView,
    /// The shared file's numbering tables (the stat code's inode table).
    shim_tables: Option<Vec<u8>>,
    dirs: BTreeMap<(u64, u64), Vec<crate::handlers::fs::Dirent>>,
    proc_files: u64,
    next_vpid: pid_t,
    /// Bytes of detrun's stdout/stderr and of the trace at the checkpoint.
    pub out_len: [u64; 2],
    pub trace_len: u64,
}

impl Checkpoint {
    /// Host PIDs of the frozen processes.
    pub fn tgids(&self) -> Vec<pid_t> {
        self.procs
            .iter()
            .filter(|p| p.info.alive)
            .map(|p| p.info.tgid)
            .collect()
    }

    pub fn thread_tids(&self) -> Vec<pid_t> {
        self.threads.iter().map(|t| t.tid).collect()
    }
}

const NT_X86_XSTATE: usize = 0x202;
const PTRACE_GETSIGMASK: libc::c_uint = 0x420a;
const PTRACE_SETSIGMASK: libc::c_uint = 0x420b;

fn get_xstate(tid: pid_t) -> Vec<u8> {
    let mut buf = vec![0u8; 16384];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: the kernel writes at most iov_len bytes into our buffer.
    let r = unsafe {
        libc::ptrace(
            libc::PTRACE_GETREGSET,
            tid,
            NT_X86_XSTATE,
            &mut iov as *mut libc::iovec,
        )
    };
    if r < 0 {
        return Vec::new();
    }
    buf.truncate(iov.iov_len);
    buf
}

fn set_xstate(tid: pid_t, x: &[u8]) {
    if x.is_empty() {
        return;
    }
    let mut iov = libc::iovec {
        iov_base: x.as_ptr() as *mut libc::c_void,
        iov_len: x.len(),
    };
    // SAFETY: the kernel reads iov_len bytes from our buffer.
    unsafe {
        libc::ptrace(
            libc::PTRACE_SETREGSET,
            tid,
            NT_X86_XSTATE,
            &mut iov as *mut libc::iovec,
        )
    };
}

fn get_sigmask(tid: pid_t) -> u64 {
    let mut m: u64 = 0;
    // SAFETY: the kernel writes 8 bytes into m.
    unsafe { libc::ptrace(PTRACE_GETSIGMASK, tid, 8usize, &mut m as *mut u64) };
    m
}

fn set_sigmask(tid: pid_t, m: u64) {
    // SAFETY: the kernel reads 8 bytes from m.
    unsafe { libc::ptrace(PTRACE_SETSIGMASK, tid, 8usize, &m as *const u64) };
}

/// Ranges of `pid` marked "do not copy" or "wipe" on fork (VmFlags dc, wf).
fn nofork_ranges(pid: pid_t) -> Vec<(u64, u64, bool)> {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/smaps")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut range = None;
    for l in s.lines() {
        if let Some(flags) = l.strip_prefix("VmFlags:") {
            let fl: Vec<&str> = flags.split_whitespace().collect();
            let (dc, wf) = (fl.contains(&"dc"), fl.contains(&"wf"));
            if let (Some((a, b)), true) = (range, dc || wf) {
                out.push((a, b - a, wf && !dc));
            }
        } else if let Some((a, rest)) = l.split_once('-') {
            let b = rest.split_whitespace().next().unwrap_or("");
            range = match (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16)) {
                (Ok(a), Ok(b)) => Some((a, b)),
                _ => range,
            };
        }
    }
    out
}

/// An eventfd's counter, from its fdinfo text.
fn eventfd_of(info: &str, fd: i32) -> Result<FdKind, String> {
    let field = |k: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(k))
            .map(|v| v.trim().to_string())
    };
    let count = field("eventfd-count:")
        .and_then(|v| u64::from_str_radix(&v, 16).ok())
        .ok_or_else(|| format!("eventfd {fd}: no count in fdinfo"))?;
    let semaphore = field("eventfd-semaphore:").is_some_and(|v| v == "1");
    Ok(FdKind::Eventfd { count, semaphore })
}

/// Same open file description? (kcmp KCMP_FILE)
fn same_file(p1: pid_t, fd1: i32, p2: pid_t, fd2: i32) -> bool {
    // SAFETY: kcmp only compares kernel objects.
    unsafe { libc::syscall(libc::SYS_kcmp, p1, p2, 0, fd1, fd2) == 0 }
}

/// The fdinfo text of `fd` in `pid`, with its offset and flags.
fn fdinfo(pid: pid_t, fd: i32) -> Option<(String, u64, i32)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}")).ok()?;
    let mut pos = 0;
    let mut flags = 0;
    for l in s.lines() {
        if let Some(v) = l.strip_prefix("pos:") {
            pos = v.trim().parse().unwrap_or(0);
        } else if let Some(v) = l.strip_prefix("flags:") {
            flags = i32::from_str_radix(v.trim(), 8).unwrap_or(0);
        }
    }
    Some((s, pos, flags))
}

fn stat_path(p: &str) -> Option<libc::stat> {
    let c = std::ffi::CString::new(p).ok()?;
    // SAFETY: stat into a local struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    (unsafe { libc::stat(c.as_ptr(), &mut st) } == 0).then_some(st)
}

fn stat_fd(fd: i32) -> Option<libc::stat> {
    // SAFETY: fstat into a local struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    (unsafe { libc::fstat(fd, &mut st) } == 0).then_some(st)
}

/// Syscall injection into one stopped thread, with a scratch page.
struct Inj {
    tid: pid_t,
    insn: u64,
    scratch: u64,
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

fn run_injected(
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
        let st = Supervisor::wait_tid(tid).ok_or_else(|| format!("cannot wait for {tid}"))?;
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
    fn new(tid: pid_t, insn: u64) -> Result<Inj, String> {
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

    fn call(&self, nr: i64, args: [u64; 6]) -> Result<InjOut, String> {
        inject_raw(self.tid, self.insn, nr, args)
    }

    fn ret(&self, nr: i64, args: [u64; 6]) -> Result<i64, String> {
        self.call(nr, args).map(|o| o.ret)
    }

    /// Put `data` at offset `off` of the scratch page; returns its address.
    fn put(&self, off: usize, data: &[u8]) -> Result<u64, String> {
        let a = self.scratch + off as u64;
        sys::write_mem(self.tid, a, data).map_err(|e| format!("scratch write: {e}"))?;
        Ok(a)
    }

    fn done(self) {
        let _ = self.ret(libc::SYS_munmap, [self.scratch, SCRATCH as u64, 0, 0, 0, 0]);
    }

    /// Open `path` in the process with `flags`; `what` names it in errors.
    fn open(&self, what: &str, path: &[u8], flags: i32) -> Result<i32, String> {
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

const SCRATCH: usize = 16384;

fn check(what: &str, r: i64) -> Result<i64, String> {
    if r < 0 {
        Err(format!("{what}: errno {}", -r))
    } else {
        Ok(r)
    }
}

/// Wait for the first stop of a new tracee (its initial SIGSTOP or event stop).
fn first_stop(tid: pid_t) -> Result<(), String> {
    match Supervisor::wait_tid(tid) {
        Some(st) if libc::WIFSTOPPED(st) => Ok(()),
        Some(_) => Err(format!("new tracee {tid} died at birth")),
        None => Err(format!("cannot wait for new tracee {tid}")),
    }
}

/// Bring a fresh thread to the same kind of stop as its original: set its
/// registers and, for a seccomp stop, let it re-enter the same syscall.
fn drive(tid: pid_t, t: &ThreadSnap) -> Result<(), String> {
    set_xstate(tid, &t.xstate);
    set_sigmask(tid, t.mask);
    if t.seccomp {
        let mut r = t.regs;
        r.rip -= 2;
        r.rax = r.orig_rax;
        sys::set_regs(tid, &r).map_err(|e| format!("registers of {tid}: {e}"))?;
        sys::cont(tid, 0).map_err(|e| format!("resume {tid}: {e}"))?;
        loop {
            match sys::wait_pid(tid, 0) {
                Ok((_, st)) if libc::WIFSTOPPED(st) => {
                    if (st >> 16) & 0xffff == libc::PTRACE_EVENT_SECCOMP {
                        break;
                    }
                    // A stop on the way (none is expected): go on.
                    sys::cont(tid, 0).map_err(|e| format!("resume {tid}: {e}"))?;
                }
                Ok(_) => return Err(format!("thread {tid} died re-entering its syscall")),
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) => return Err(format!("wait {tid}: {e}")),
            }
        }
    }
    sys::set_regs(tid, &t.regs).map_err(|e| format!("registers of {tid}: {e}"))
}

/// The filter of copy mode: the identity calls trap too.
fn copy_filter() -> Result<Vec<libc::sock_filter>, String> {
    use seccompiler::{
        SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule, TargetArch,
    };
    let mut rules: std::collections::BTreeMap<i64, Vec<SeccompRule>> =
        crate::table::copy_trapped().map(|n| (n, vec![])).collect();
    // F_GETLK answers with a holder's PID.
    let getlk = [libc::F_GETLK, libc::F_OFD_GETLK]
        .iter()
        .map(|&c| {
            SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, c as u64)
                .and_then(|c| SeccompRule::new(vec![c]))
                .map_err(|e| e.to_string())
        })
        .collect::<Result<Vec<_>, String>>()?;
    rules.insert(libc::SYS_fcntl, getlk);
    let f = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Trace(1),
        TargetArch::x86_64,
    )
    .map_err(|e| e.to_string())?;
    let prog: seccompiler::BpfProgram = f
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())?;
    Ok(prog
        .iter()
        .map(|i| libc::sock_filter {
            code: i.code,
            jt: i.jt,
            jf: i.jf,
            k: i.k,
        })
        .collect())
}

impl Supervisor {
    /// Why a checkpoint cannot be taken now (None: it can).
    pub fn checkpoint_blocker(&self) -> Option<String> {
        if !self.namespaces {
            return Some("checkpoints need the PID namespace".into());
        }
        // (Stops of threads not in the set yet, `early`, do not matter: at
        // a scheduling point every clone event has been taken.)
        if self.running.is_some() || !self.held_normally() {
            return Some("a thread is between stops".into());
        }
        if self.kernel_waiters() {
            return Some("a thread is blocked in the kernel".into());
        }
        for t in self.threads.values() {
            if matches!(t.park, Some(Park::Vfork) | Some(Park::Kernel)) {
                return Some("a vfork parent is waiting for its child".into());
            }
            if !matches!(t.post, Post::None) || t.pending_clone.is_some() {
                return Some("a thread is inside a syscall".into());
            }
        }
        if self.world.net.active() {
            return Some("the guest uses sockets (not checkpointed)".into());
        }
        None
    }

    /// Freeze the running set of processes as a checkpoint.
    pub fn take_checkpoint(&mut self, index: usize) -> Result<Checkpoint, String> {
        if let Some(why) = self.checkpoint_blocker() {
            return Err(why);
        }
        // Descriptors first: an unsupported one refuses the checkpoint
        // before anything changes.
        let mut fds = Vec::new();
        let mut pipes: Vec<(u64, u64)> = Vec::new();
        let mut groups: Vec<(pid_t, i32)> = Vec::new();
        let stdio = [stat_fd(1), stat_fd(2)];
        for p in &self.procs {
            if !p.alive {
                fds.push(Vec::new());
                continue;
            }
            fds.push(self.scan_fds(p.tgid, &mut pipes, &mut groups, &stdio)?);
        }
        self.check_locks(&fds)?;
        let mut threads = Vec::new();
        for t in self.threads.values() {
            let regs = sys::get_regs(t.tid).map_err(|e| format!("registers of {}: {e}", t.tid))?;
            let st = sys::sig_state(t.tid).unwrap_or_default();
            let io =
                t.io.iter()
                    .filter_map(|(f, ev)| {
                        let tg = self.procs[t.proc as usize].tgid;
                        guest_fd_of(tg, f).map(|n| (n, *ev))
                    })
                    .collect();
            threads.push(ThreadSnap {
                tid: t.tid,
                vt: t.vt,
                proc: t.proc,
                regs,
                xstate: get_xstate(t.tid),
                mask: get_sigmask(t.tid),
                seccomp: sys::syscall_op(t.tid) == Some(3),
                pending: st.pending,
                resume: t.resume,
                park: t.park,
                saved: t.saved,
                at_exit: t.at_exit,
                clear_tid: t.clear_tid,
                wcont: t.wcont,
                io,
                wait_mask: t.wait_mask,
                parked_nr: t.parked_nr,
                vtid: t.vtid,
            });
        }
        threads.sort_by_key(|t| t.vt);
        let procs = self
            .procs
            .iter()
            .zip(fds)
            .map(|(p, fds)| ProcSnap {
                nofork: if p.alive {
                    nofork_ranges(p.tgid)
                } else {
                    Vec::new()
                },
                shared_pending: if p.alive {
                    sys::sig_state(p.tgid).map_or(0, |s| s.shared)
                } else {
                    0
                },
                info: p.clone(),
                fds,
            })
            .collect();
        if let Some(t) = self.trace.as_mut() {
            let _ = t.flush();
        }
        let ck = Checkpoint {
            index,
            at_ns: self.world.clock.elapsed(),
            decisions: self.world.decisions,
            world: self.world.clone(),
            threads,
            procs,
            vt_count: self.vt_tid.len(),
            main_proc: self.main_proc,
            stats: self.stats.clone(),
            fsv: self.fsv.clone(),
            shim_tables: self.clock_page.as_ref().map(|p| p.save_tables()),
            dirs: self.dirs.clone(),
            proc_files: self.proc_files,
            next_vpid: self.next_vpid,
            out_len: [
                stat_fd(1).map_or(0, |s| s.st_size as u64),
                stat_fd(2).map_or(0, |s| s.st_size as u64),
            ],
            trace_len: self
                .cfg
                .trace
                .as_ref()
                .and_then(|p| std::fs::metadata(p).ok())
                .map_or(0, |m| m.len()),
        };
        // The frozen set is the checkpoint's now; the supervisor forgets it.
        self.threads.clear();
        for p in &mut self.procs {
            p.pidfd = -1;
        }
        Ok(ck)
    }

    /// An epoll instance's watches, if a copy can rebuild it exactly.
    fn epoll_of(&self, tgid: pid_t, efd: i32, info: &str) -> Result<FdKind, String> {
        let mut watches = Vec::new();
        for l in info.lines().filter(|l| l.starts_with("tfd:")) {
            let w: Vec<&str> = l.split_whitespace().collect();
            let field = |k: &str| w.iter().position(|x| *x == k).and_then(|i| w.get(i + 1));
            let tfd: i32 = field("tfd:").and_then(|v| v.parse().ok()).unwrap_or(-1);
            let events = field("events:").and_then(|v| u32::from_str_radix(v, 16).ok());
            let data = field("data:").and_then(|v| u64::from_str_radix(v, 16).ok());
            let (Some(events), Some(data)) = (events, data) else {
                return Err(format!("epoll fd {efd}: unreadable watch `{l}`"));
            };
            // The watch must still name the file its fd number holds.
            let slot = [efd as u32, tfd as u32, 0u32];
            // SAFETY: kcmp reads the three-word slot.
            let same =
                unsafe { libc::syscall(libc::SYS_kcmp, tgid, tgid, 7, tfd, slot.as_ptr()) == 0 };
            if !same {
                return Err(format!("epoll fd {efd} watches a closed fd {tfd}"));
            }
            let link = std::fs::read_link(format!("/proc/{tgid}/fd/{tfd}")).unwrap_or_default();
            if link.to_string_lossy() == "anon_inode:[eventpoll]" {
                return Err(format!("epoll fd {efd} watches another epoll"));
            }
            // A ready edge-triggered watch may or may not have reported
            // its edge: wait for a point where it is not ready.
            if events & libc::EPOLLET as u32 != 0 {
                let pidfd = self
                    .procs
                    .iter()
                    .find(|p| p.tgid == tgid)
                    .map_or(-1, |p| p.pidfd);
                if let Ok(f) = sys::pidfd_getfd(pidfd, tfd) {
                    let ev = (events & 0x2007) as i16; // IN, PRI, OUT, RDHUP
                    if crate::handlers::io::ready(&f, ev) {
                        return Err("an edge-triggered epoll watch is ready".into());
                    }
                }
            }
            watches.push((tfd, events, data));
        }
        Ok(FdKind::Epoll { watches })
    }

    /// File locks belong to the frozen process (POSIX) or to a description
    /// the copy does not share (flock, OFD): refuse rather than lose them.
    fn check_locks(&self, fds: &[Vec<FdSnap>]) -> Result<(), String> {
        let Ok(locks) = std::fs::read_to_string("/proc/locks") else {
            return Ok(());
        };
        let mut inodes = Vec::new();
        for (p, list) in self.procs.iter().zip(fds) {
            for f in list {
                if matches!(f.kind, FdKind::File { .. }) {
                    if let Some(st) = stat_path(&format!("/proc/{}/fd/{}", p.tgid, f.fd)) {
                        inodes.push(st.st_ino);
                    }
                }
            }
        }
        for l in locks.lines() {
            let w: Vec<&str> = l.split_whitespace().collect();
            // "1: POSIX ADVISORY WRITE PID MAJ:MIN:INODE START END"
            let (Some(pid), Some(ino)) = (w.get(4), w.get(5)) else {
                continue;
            };
            let pid: pid_t = pid.parse().unwrap_or(-1);
            let ino: u64 = ino
                .rsplit(':')
                .next()
                .and_then(|i| i.parse().ok())
                .unwrap_or(0);
            let ours = self.procs.iter().any(|p| p.alive && p.tgid == pid);
            if ours || (pid <= 0 && inodes.contains(&ino)) {
                return Err(format!(
                    "a guest holds a file lock ({}, not checkpointed)",
                    w[1]
                ));
            }
        }
        Ok(())
    }

    fn scan_fds(
        &self,
        tgid: pid_t,
        pipes: &mut Vec<(u64, u64)>,
        groups: &mut Vec<(pid_t, i32)>,
        stdio: &[Option<libc::stat>; 2],
    ) -> Result<Vec<FdSnap>, String> {
        let dir = format!("/proc/{tgid}/fd");
        let mut nums: Vec<i32> = std::fs::read_dir(&dir)
            .map_err(|e| format!("{dir}: {e}"))?
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect();
        nums.sort_unstable();
        let mut out = Vec::new();
        for fd in nums {
            let path = format!("/proc/{tgid}/fd/{fd}");
            let link = std::fs::read_link(&path)
                .map(|l| l.to_string_lossy().into_owned())
                .unwrap_or_default();
            let Some((info, pos, flags)) = fdinfo(tgid, fd) else {
                continue; // closed meanwhile
            };
            let st = stat_path(&path);
            let same_as = |s: &Option<libc::stat>| matches!((s, &st), (Some(a), Some(b)) if a.st_dev == b.st_dev && a.st_ino == b.st_ino);
            let std_stream = if same_as(&stdio[0]) {
                Some(1u8)
            } else if same_as(&stdio[1]) {
                Some(2u8)
            } else {
                None
            };
            let kind = if let Some(n) = std_stream {
                if self.cfg.capture_branches {
                    FdKind::Capture(n)
                } else {
                    FdKind::Share
                }
            } else if link.starts_with("pipe:") {
                let st = st.ok_or_else(|| format!("fd {fd} of {tgid}: cannot stat the pipe"))?;
                let key = (st.st_dev, st.st_ino);
                let i = match pipes.iter().position(|&k| k == key) {
                    Some(i) => i,
                    None => {
                        pipes.push(key);
                        pipes.len() - 1
                    }
                };
                FdKind::Pipe {
                    pipe: i,
                    write: flags & libc::O_ACCMODE == libc::O_WRONLY,
                }
            } else if link.starts_with("socket:") {
                return Err(format!("fd {fd} is a socket (not checkpointed)"));
            } else if link == "anon_inode:[eventfd]" {
                eventfd_of(&info, fd)?
            } else if link == "anon_inode:[eventpoll]" {
                self.epoll_of(tgid, fd, &info)?
            } else if link.starts_with("anon_inode:") {
                return Err(format!("fd {fd} is {link} (not checkpointed)"));
            } else {
                match st.map(|s| s.st_mode & libc::S_IFMT) {
                    Some(libc::S_IFREG) | Some(libc::S_IFDIR) => FdKind::File { flags, pos },
                    Some(libc::S_IFCHR) | Some(libc::S_IFBLK) => FdKind::Share,
                    Some(libc::S_IFIFO) => {
                        return Err(format!("fd {fd} is a named FIFO (not checkpointed)"))
                    }
                    _ => return Err(format!("fd {fd} ({link}) is not checkpointed")),
                }
            };
            let group = match groups.iter().position(|&(p, f)| same_file(p, f, tgid, fd)) {
                Some(g) => g,
                None => {
                    groups.push((tgid, fd));
                    groups.len() - 1
                }
            };
            out.push(FdSnap {
                fd,
                kind,
                cloexec: flags & libc::O_CLOEXEC != 0,
                flags,
                group,
            });
        }
        Ok(out)
    }

    /// Make a running copy of checkpoint `ck`: fork every frozen process,
    /// recreate its threads and private descriptors, and install the
    /// supervisor state. `capture`: files for the copy's stdout/stderr.
    pub fn instantiate(
        &mut self,
        ck: &Checkpoint,
        capture: Option<[PathBuf; 2]>,
        trace: Option<&Path>,
    ) -> Result<(), String> {
        let filter = copy_filter()?;
        self.reset_set(ck.world.clone(), ck.main_proc, ck.stats.clone());
        self.fsv = ck.fsv.clone();
        if let (Some(p), Some(t)) = (&self.clock_page, &ck.shim_tables) {
            p.restore_tables(t);
        }
        self.dirs = ck.dirs.clone();
        self.proc_files = ck.proc_files;
        self.next_vpid = ck.next_vpid;
        // Dead threads map to a PID that cannot exist.
        let mut vt_tid = vec![i32::MAX; ck.vt_count];
        let mut procs: Vec<ProcInfo> = Vec::new();
        let mut threads: BTreeMap<pid_t, Tracee> = BTreeMap::new();
        // Per process: the copy's lead thread and its injector.
        let mut lead: Vec<Option<Inj>> = Vec::new();
        for (pi, p) in ck.procs.iter().enumerate() {
            let mut info = p.info.clone();
            if !p.info.alive {
                procs.push(info);
                lead.push(None);
                continue;
            }
            let ths: Vec<&ThreadSnap> = ck
                .threads
                .iter()
                .filter(|t| t.proc as usize == pi)
                .collect();
            let Some(first) = ths.first() else {
                info.alive = false;
                procs.push(info);
                lead.push(None);
                continue;
            };
            let insn = p.info.syscall_insn;
            if insn == 0 {
                return Err("no syscall instruction known for injection".into());
            }
            // Mappings the program keeps out of its forks are copied too,
            // then marked again in both.
            let advise = |tid: pid_t, copy: bool| -> Result<(), String> {
                for &(a, len, wipe) in &p.nofork {
                    let adv = match (copy, wipe) {
                        (true, false) => libc::MADV_DOFORK,
                        (true, true) => libc::MADV_KEEPONFORK,
                        (false, false) => libc::MADV_DONTFORK,
                        (false, true) => libc::MADV_WIPEONFORK,
                    };
                    let r =
                        inject_raw(tid, insn, libc::SYS_madvise, [a, len, adv as u64, 0, 0, 0])?;
                    check("madvise", r.ret)?;
                }
                Ok(())
            };
            advise(first.tid, true)?;
            // No scratch page in the frozen process: the copy would inherit it.
            let forked = inject_raw(first.tid, insn, libc::SYS_fork, [0; 6]);
            advise(first.tid, false)?;
            let child = forked?
                .child
                .ok_or("fork of a checkpointed process failed")?;
            first_stop(child)?;
            advise(child, false)?;
            let inj = Inj::new(child, insn)?;
            if !p.info.copy_filter {
                install_filter(&inj, &filter)?;
                info.copy_filter = true;
            }
            info.tgid = child;
            info.pidfd = sys::pidfd_open(child).unwrap_or(-1);
            info.nspid = ns_id(child);
            info.notify_kernel = false;
            // The other threads, created by the lead in the copy.
            for t in &ths[1..] {
                let flags = (libc::CLONE_VM
                    | libc::CLONE_FS
                    | libc::CLONE_FILES
                    | libc::CLONE_SIGHAND
                    | libc::CLONE_THREAD
                    | libc::CLONE_SYSVSEM) as u64
                    | if t.clear_tid != 0 {
                        libc::CLONE_CHILD_CLEARTID as u64
                    } else {
                        0
                    };
                let o = inj.call(libc::SYS_clone, [flags, 0, 0, t.clear_tid, 0, 0])?;
                let nt = o.child.ok_or("clone of a checkpointed thread failed")?;
                first_stop(nt)?;
                drive(nt, t)?;
                vt_tid[t.vt as usize] = nt;
                threads.insert(nt, tracee_from(nt, t, ns_id(nt)));
            }
            procs.push(info);
            lead.push(Some(inj));
        }
        // Descriptors, across processes (pipes connect them).
        let r = self.private_fds(ck, &procs, &lead, capture.as_ref());
        for (pi, inj) in lead.into_iter().enumerate() {
            let Some(inj) = inj else { continue };
            let tid = inj.tid;
            inj.done();
            if r.is_err() {
                continue;
            }
            let t = ck
                .threads
                .iter()
                .find(|t| t.proc as usize == pi)
                .ok_or("lost a thread")?;
            drive(tid, t)?;
            vt_tid[t.vt as usize] = tid;
            threads.insert(tid, tracee_from(tid, t, procs[pi].nspid));
        }
        r?;
        // Pending signals, as the frozen set had them.
        for t in &ck.threads {
            let nt = vt_tid[t.vt as usize];
            let tg = procs[t.proc as usize].tgid;
            for s in sigs(t.pending) {
                let _ = sys::tgkill(tg, nt, s);
            }
        }
        for (pi, p) in ck.procs.iter().enumerate() {
            if procs[pi].alive {
                for s in sigs(p.shared_pending) {
                    // SAFETY: signalling our own tracee.
                    unsafe { libc::kill(procs[pi].tgid, s) };
                }
            }
        }
        self.threads = threads;
        self.vt_tid = vt_tid;
        self.procs = procs;
        let tids: Vec<pid_t> = self.threads.keys().copied().collect();
        for tid in tids {
            let want = self
                .threads
                .get_mut(&tid)
                .map(|t| std::mem::take(&mut t.io_restore))
                .unwrap_or_default();
            let io: Vec<(OwnedFd, i16)> = want
                .iter()
                .filter_map(|&(fd, ev)| self.steal(tid, fd).map(|f| (f, ev)))
                .collect();
            if let Some(t) = self.threads.get_mut(&tid) {
                t.io = io;
            }
        }
        if let Some(path) = trace {
            if let Some(base) = self.cfg.trace.as_ref() {
                copy_prefix(base, path, ck.trace_len).map_err(|e| format!("trace: {e}"))?;
            }
            self.trace = Some(crate::trace::Trace::append(path).map_err(|e| e.to_string())?);
        }
        Ok(())
    }

    fn private_fds(
        &self,
        ck: &Checkpoint,
        procs: &[ProcInfo],
        lead: &[Option<Inj>],
        capture: Option<&[PathBuf; 2]>,
    ) -> Result<(), String> {
        // For each group (one open file description): the process holding
        // the new description and its temporary fd there.
        let mut made: BTreeMap<usize, (usize, i32)> = BTreeMap::new();
        // For each pipe: the (read, write) temporary fds in the donor.
        let mut newpipe: BTreeMap<usize, (usize, i32, i32)> = BTreeMap::new();
        // Temporary fds to close at the end, per process.
        let mut temps: Vec<Vec<i32>> = vec![Vec::new(); procs.len()];
        // Prefixes of captured output, copied once.
        if let Some(c) = capture {
            for (i, path) in c.iter().enumerate() {
                let src = format!("/proc/self/fd/{}", i + 1);
                copy_prefix(Path::new(&src), path, ck.out_len[i])
                    .map_err(|e| format!("capture file {}: {e}", path.display()))?;
            }
        }
        // pidfd of each donor, opened in a target that needs it: (target, donor) -> fd.
        let mut pidfds: BTreeMap<(usize, usize), i32> = BTreeMap::new();
        // Epoll instances last: their watches name the other descriptors.
        for epolls in [false, true] {
            for (pi, p) in ck.procs.iter().enumerate() {
                let Some(inj) = lead[pi].as_ref() else {
                    continue;
                };
                for f in &p.fds {
                    if matches!(f.kind, FdKind::Share)
                        || (matches!(f.kind, FdKind::Capture(_)) && capture.is_none())
                        || matches!(f.kind, FdKind::Epoll { .. }) != epolls
                    {
                        continue;
                    }
                    let fresh = if let Some(&(donor, tmp)) = made.get(&f.group) {
                        if donor == pi {
                            tmp
                        } else {
                            fetch(
                                inj,
                                &mut pidfds,
                                &mut temps[pi],
                                (pi, donor),
                                procs[donor].nspid,
                                tmp,
                            )?
                        }
                    } else {
                        let tmp = match &f.kind {
                            FdKind::Pipe { pipe, write } => {
                                let (d, r, w) = match newpipe.get(pipe) {
                                    Some(&x) => x,
                                    None => {
                                        let (r, w) = self.make_pipe(ck, inj, *pipe)?;
                                        newpipe.insert(*pipe, (pi, r, w));
                                        temps[pi].push(r);
                                        temps[pi].push(w);
                                        (pi, r, w)
                                    }
                                };
                                let end = if *write { w } else { r };
                                if d == pi {
                                    end
                                } else {
                                    // The pipe lives in another process.
                                    fetch(
                                        inj,
                                        &mut pidfds,
                                        &mut temps[pi],
                                        (pi, d),
                                        procs[d].nspid,
                                        end,
                                    )?
                                }
                            }
                            FdKind::File { flags, pos } => {
                                let path = format!("/proc/self/fd/{}", f.fd);
                                let keep = libc::O_ACCMODE
                                    | libc::O_APPEND
                                    | libc::O_NONBLOCK
                                    | libc::O_DIRECTORY
                                    | libc::O_NOATIME
                                    | libc::O_PATH
                                    | libc::O_DIRECT;
                                let fl = (flags & keep) | libc::O_CLOEXEC;
                                let x = inj.open("reopen", path.as_bytes(), fl)?;
                                if flags & libc::O_PATH == 0 {
                                    inj.ret(libc::SYS_lseek, [x as u64, *pos, 0, 0, 0, 0])?;
                                }
                                temps[pi].push(x);
                                x
                            }
                            FdKind::Capture(n) => {
                                let path = capture
                                    .map(|c| c[*n as usize - 1].clone())
                                    .ok_or("captured output without capture files")?;
                                let fl = libc::O_WRONLY | libc::O_APPEND | libc::O_CLOEXEC;
                                let x = inj.open(
                                    "open capture file",
                                    path.as_os_str().as_encoded_bytes(),
                                    fl,
                                )?;
                                temps[pi].push(x);
                                x
                            }
                            FdKind::Share => continue,
                            FdKind::Eventfd { count, semaphore } => {
                                let fl = (f.flags & libc::O_NONBLOCK)
                                    | libc::O_CLOEXEC
                                    | if *semaphore { libc::EFD_SEMAPHORE } else { 0 };
                                let x = check(
                                    "eventfd2",
                                    inj.ret(libc::SYS_eventfd2, [0, fl as u64, 0, 0, 0, 0])?,
                                )? as i32;
                                temps[pi].push(x);
                                if *count > 0 {
                                    let a = inj.put(0, &count.to_ne_bytes())?;
                                    check(
                                        "eventfd write",
                                        inj.ret(libc::SYS_write, [x as u64, a, 8, 0, 0, 0])?,
                                    )?;
                                }
                                x
                            }
                            FdKind::Epoll { watches } => {
                                let x = check(
                                    "epoll_create1",
                                    inj.ret(
                                        libc::SYS_epoll_create1,
                                        [libc::EPOLL_CLOEXEC as u64, 0, 0, 0, 0, 0],
                                    )?,
                                )? as i32;
                                temps[pi].push(x);
                                for &(tfd, events, data) in watches {
                                    let mut ev = [0u8; 12];
                                    ev[0..4].copy_from_slice(&events.to_ne_bytes());
                                    ev[4..12].copy_from_slice(&data.to_ne_bytes());
                                    let a = inj.put(0, &ev)?;
                                    check(
                                        "epoll_ctl",
                                        inj.ret(
                                            libc::SYS_epoll_ctl,
                                            [
                                                x as u64,
                                                libc::EPOLL_CTL_ADD as u64,
                                                tfd as u64,
                                                a,
                                                0,
                                                0,
                                            ],
                                        )?,
                                    )?;
                                }
                                x
                            }
                        };
                        if matches!(f.kind, FdKind::Pipe { .. }) {
                            // O_NONBLOCK and the like belong to the description.
                            let st = f.flags
                                & (libc::O_NONBLOCK
                                    | libc::O_APPEND
                                    | libc::O_DIRECT
                                    | libc::O_ASYNC);
                            check(
                                "fcntl",
                                inj.ret(
                                    libc::SYS_fcntl,
                                    [tmp as u64, libc::F_SETFL as u64, st as u64, 0, 0, 0],
                                )?,
                            )?;
                        }
                        made.insert(f.group, (pi, tmp));
                        tmp
                    };
                    let fl = if f.cloexec { libc::O_CLOEXEC } else { 0 };
                    check(
                        "dup3",
                        inj.ret(
                            libc::SYS_dup3,
                            [fresh as u64, f.fd as u64, fl as u64, 0, 0, 0],
                        )?,
                    )?;
                }
            }
        }
        for (pi, ts) in temps.iter().enumerate() {
            let Some(inj) = lead[pi].as_ref() else {
                continue;
            };
            for &fd in ts {
                inj.ret(libc::SYS_close, [fd as u64, 0, 0, 0, 0, 0])?;
            }
        }
        Ok(())
    }

    /// A new pipe in the copy `inj` works in, with the content of the
    /// frozen pipe `pipe`. Returns its (read, write) fds there.
    fn make_pipe(&self, ck: &Checkpoint, inj: &Inj, pipe: usize) -> Result<(i32, i32), String> {
        check(
            "pipe2",
            inj.ret(
                libc::SYS_pipe2,
                [inj.scratch, libc::O_CLOEXEC as u64, 0, 0, 0, 0],
            )?,
        )?;
        let mut b = [0u8; 8];
        sys::read_mem(inj.tid, inj.scratch, &mut b).map_err(|e| e.to_string())?;
        let r = i32::from_ne_bytes(b[0..4].try_into().unwrap_or([0; 4]));
        let w = i32::from_ne_bytes(b[4..8].try_into().unwrap_or([0; 4]));
        // The frozen pipe's content, if any process can still read it.
        let reader = ck.procs.iter().find_map(|p| {
            let f = p
                .fds
                .iter()
                .find(|f| matches!(f.kind, FdKind::Pipe { pipe: q, write: false } if q == pipe))?;
            p.info.alive.then_some((p.info.tgid, f.fd))
        });
        if let Some((ktg, kfd)) = reader {
            let kp = sys::pidfd_open(ktg).map_err(|e| format!("pidfd of {ktg}: {e}"))?;
            // SAFETY: kp is our own new descriptor.
            let kp = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(kp) };
            let kr = sys::pidfd_getfd(kp.as_raw_fd(), kfd).map_err(|e| e.to_string())?;
            let np = sys::pidfd_open(inj.tid).map_err(|e| e.to_string())?;
            // SAFETY: np is our own new descriptor.
            let np = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(np) };
            let nw = sys::pidfd_getfd(np.as_raw_fd(), w).map_err(|e| e.to_string())?;
            copy_pipe(&kr, &nw)?;
        }
        Ok((r, w))
    }

    /// Kill the frozen processes of a checkpoint and collect them.
    pub fn release_checkpoint(&mut self, ck: Checkpoint) {
        for tg in ck.tgids() {
            // SAFETY: signalling our own tracees.
            unsafe { libc::kill(tg, libc::SIGKILL) };
        }
        // Leaders last: a leader's death is reported after its threads'.
        let leaders = ck.tgids();
        let mut tids = ck.thread_tids();
        tids.sort_by_key(|t| leaders.contains(t));
        for tid in tids {
            loop {
                match sys::wait_pid(tid, 0) {
                    Ok((_, st)) if libc::WIFEXITED(st) || libc::WIFSIGNALED(st) => break,
                    Ok(_) => {
                        let _ = sys::cont(tid, 0);
                    }
                    Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                    Err(_) => break,
                }
            }
        }
        for p in &ck.procs {
            if p.info.pidfd >= 0 {
                // SAFETY: the checkpoint owned this pidfd.
                unsafe { libc::close(p.info.pidfd) };
            }
        }
    }
}

/// The open file description `fd` of copy `key.1` (namespace PID `nspid`),
/// as a new descriptor of the copy `inj` works in (`pidfd_getfd`).
fn fetch(
    inj: &Inj,
    pidfds: &mut BTreeMap<(usize, usize), i32>,
    temps: &mut Vec<i32>,
    key: (usize, usize),
    nspid: pid_t,
    fd: i32,
) -> Result<i32, String> {
    let pfd = match pidfds.get(&key) {
        Some(&x) => x,
        None => {
            let x = check(
                "pidfd_open",
                inj.ret(libc::SYS_pidfd_open, [nspid as u64, 0, 0, 0, 0, 0])?,
            )? as i32;
            pidfds.insert(key, x);
            temps.push(x);
            x
        }
    };
    let x = check(
        "pidfd_getfd",
        inj.ret(libc::SYS_pidfd_getfd, [pfd as u64, fd as u64, 0, 0, 0, 0])?,
    )? as i32;
    temps.push(x);
    Ok(x)
}

fn install_filter(inj: &Inj, filter: &[libc::sock_filter]) -> Result<(), String> {
    let mut bytes = Vec::with_capacity(filter.len() * 8);
    for i in filter {
        bytes.extend_from_slice(&i.code.to_ne_bytes());
        bytes.push(i.jt);
        bytes.push(i.jf);
        bytes.extend_from_slice(&i.k.to_ne_bytes());
    }
    if bytes.len() + 64 > SCRATCH {
        return Err("copy-mode filter too large".into());
    }
    let prog = inj.put(64, &bytes)?;
    let mut fprog = [0u8; 16];
    fprog[0..2].copy_from_slice(&(filter.len() as u16).to_ne_bytes());
    fprog[8..16].copy_from_slice(&prog.to_ne_bytes());
    let fp = inj.put(0, &fprog)?;
    check("seccomp", inj.ret(libc::SYS_seccomp, [1, 0, fp, 0, 0, 0])?)?;
    Ok(())
}

fn guest_fd_of(tgid: pid_t, f: &OwnedFd) -> Option<i32> {
    let me = std::process::id() as pid_t;
    let dir = std::fs::read_dir(format!("/proc/{tgid}/fd")).ok()?;
    let mut nums: Vec<i32> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    nums.sort_unstable();
    nums.into_iter()
        .find(|&n| same_file(me, f.as_raw_fd(), tgid, n))
}

fn sigs(set: u64) -> impl Iterator<Item = i32> {
    (1..=64).filter(move |s| set & (1u64 << (s - 1)) != 0)
}

fn tracee_from(tid: pid_t, t: &ThreadSnap, nstid: pid_t) -> Tracee {
    Tracee {
        tid,
        vt: t.vt,
        proc: t.proc,
        resume: t.resume,
        park: t.park,
        saved: t.saved,
        at_exit: t.at_exit,
        post: Post::None,
        pending_clone: None,
        settid: (0, 0),
        clear_tid: t.clear_tid,
        wcont: t.wcont,
        io: Vec::new(),
        io_restore: t.io.clone(),
        again: false,
        wait_mask: t.wait_mask,
        parked_nr: t.parked_nr,
        vtid: t.vtid,
        nstid,
    }
}

/// Copy the first `len` bytes of `src` into a new file `dst`.
fn copy_prefix(src: &Path, dst: &Path, len: u64) -> std::io::Result<()> {
    use std::io::{Read, Write};
    let mut out = std::fs::File::create(dst)?;
    if len == 0 {
        return Ok(());
    }
    let mut f = std::fs::File::open(src)?;
    let mut left = len;
    let mut buf = vec![0u8; 65536];
    while left > 0 {
        let n = f.read(&mut buf[..left.min(65536) as usize])?;
        if n == 0 {
            break;
        }
        out.write_all(&buf[..n])?;
        left -= n as u64;
    }
    Ok(())
}

/// Duplicate the bytes waiting in pipe `from` into pipe `to`, leaving
/// `from` as it is.
fn copy_pipe(from: &OwnedFd, to: &OwnedFd) -> Result<(), String> {
    // SAFETY: fcntl and tee on our own descriptors.
    unsafe {
        let sz = libc::fcntl(from.as_raw_fd(), libc::F_GETPIPE_SZ);
        if sz > 0 {
            libc::fcntl(to.as_raw_fd(), libc::F_SETPIPE_SZ, sz);
        }
        let mut n: libc::c_int = 0;
        libc::ioctl(from.as_raw_fd(), libc::FIONREAD, &mut n);
        if n <= 0 {
            return Ok(());
        }
        let r = libc::tee(
            from.as_raw_fd(),
            to.as_raw_fd(),
            n as usize,
            libc::SPLICE_F_NONBLOCK,
        );
        if r != n as isize {
            return Err(format!("tee copied {r} of {n} bytes of a pipe"));
        }
    }
    Ok(())
}
