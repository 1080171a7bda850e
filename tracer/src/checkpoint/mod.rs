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

use crate::sys::ns_id;
pub mod branch;
mod fds;
mod inject;

use fds::{copy_prefix, guest_fd_of, stat_fd, FdSnap};
use inject::{check, first_stop, Inj};
pub use inject::{inject_raw, InjOut};

use crate::ctx::Ctx;
use crate::sys::{self, Regs};
use crate::task::{Park, Post, ProcInfo, Resume, Tracee};
use detrun_scheduler::{ProcId, Tid, World};
use libc::pid_t;
use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
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
    wcont: Option<crate::task::WriteCont>,
    io: Vec<(i32, i16)>,
    wait_mask: Option<u64>,
    parked_nr: i64,
    last_sync: Option<(&'static str, u64)>,
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
    dirs: BTreeMap<(u64, u64), Vec<crate::files::Dirent>>,
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

const SCRATCH: usize = 16384;

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

impl Ctx {
    /// Why a checkpoint cannot be taken now (None: it can).
    pub fn checkpoint_blocker(&self) -> Option<String> {
        if !self.host.namespaces {
            return Some("checkpoints need the PID namespace".into());
        }
        // (Stops of threads not in the set yet, `early`, do not matter: at
        // a scheduling point every clone event has been taken.)
        if self.turn.running.is_some() || !self.held_normally() {
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
                last_sync: t.last_sync,
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
            main_proc: self.turn.main_proc,
            stats: self.stats.clone(),
            fsv: self.files.fsv.clone(),
            shim_tables: self.clock_page.as_ref().map(|p| p.save_tables()),
            dirs: self.files.dirs.clone(),
            proc_files: self.files.proc_files,
            next_vpid: self.copy.next_vpid,
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
        self.files.fsv = ck.fsv.clone();
        if let (Some(p), Some(t)) = (&self.clock_page, &ck.shim_tables) {
            p.restore_tables(t);
        }
        self.files.dirs = ck.dirs.clone();
        self.files.proc_files = ck.proc_files;
        self.copy.next_vpid = ck.next_vpid;
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
        for &tid in &tids {
            // A fork has no debug registers set; the thread holding the turn
            // goes on without a new one, so every copy gets its watches now.
            crate::datapoints::sync_thread(self, tid);
        }
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
        last_sync: t.last_sync,
        // A fork's threads have no debug registers set: set at their turn.
        watch_gen: 0,
        restart: None,
        vtid: t.vtid,
        nstid,
    }
}
