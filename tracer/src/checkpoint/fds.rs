//! A checkpoint's descriptors: what each is (pipe, file, eventfd, epoll,
//! shared), and how an instance gets its own copy of each.

use super::inject::{check, Inj};
use super::Checkpoint;
use crate::ctx::Ctx;
use crate::sys;
use crate::task::ProcInfo;
use libc::pid_t;
use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// How a descriptor of a checkpointed process is made private to an instance.
#[derive(Clone, Debug)]
pub(super) enum FdKind {
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
pub(super) struct FdSnap {
    pub(super) fd: i32,
    pub(super) kind: FdKind,
    pub(super) cloexec: bool,
    /// File status flags of the open file description.
    pub(super) flags: i32,
    /// Descriptors with the same group share one open file description.
    pub(super) group: usize,
}

/// An eventfd's counter, from its fdinfo text.
pub(super) fn eventfd_of(info: &str, fd: i32) -> Result<FdKind, String> {
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
pub(super) fn same_file(p1: pid_t, fd1: i32, p2: pid_t, fd2: i32) -> bool {
    // SAFETY: kcmp only compares kernel objects.
    unsafe { libc::syscall(libc::SYS_kcmp, p1, p2, 0, fd1, fd2) == 0 }
}

/// The fdinfo text of `fd` in `pid`, with its offset and flags.
pub(super) fn fdinfo(pid: pid_t, fd: i32) -> Option<(String, u64, i32)> {
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

pub(super) fn stat_path(p: &str) -> Option<libc::stat> {
    let c = std::ffi::CString::new(p).ok()?;
    // SAFETY: stat into a local struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    (unsafe { libc::stat(c.as_ptr(), &mut st) } == 0).then_some(st)
}

pub(super) fn stat_fd(fd: i32) -> Option<libc::stat> {
    // SAFETY: fstat into a local struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    (unsafe { libc::fstat(fd, &mut st) } == 0).then_some(st)
}

/// The open file description `fd` of copy `key.1` (namespace PID `nspid`),
/// as a new descriptor of the copy `inj` works in (`pidfd_getfd`).
pub(super) fn fetch(
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

pub(super) fn guest_fd_of(tgid: pid_t, f: &OwnedFd) -> Option<i32> {
    let me = std::process::id() as pid_t;
    let dir = std::fs::read_dir(format!("/proc/{tgid}/fd")).ok()?;
    let mut nums: Vec<i32> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    nums.sort_unstable();
    nums.into_iter()
        .find(|&n| same_file(me, f.as_raw_fd(), tgid, n))
}

/// Copy the first `len` bytes of `src` into a new file `dst`.
pub(super) fn copy_prefix(src: &Path, dst: &Path, len: u64) -> std::io::Result<()> {
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
pub(super) fn copy_pipe(from: &OwnedFd, to: &OwnedFd) -> Result<(), String> {
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

impl Ctx {
    /// An epoll instance's watches, if a copy can rebuild it exactly.
    pub(super) fn epoll_of(&self, tgid: pid_t, efd: i32, info: &str) -> Result<FdKind, String> {
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
                    if crate::sys::ready(&f, ev) {
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
    pub(super) fn check_locks(&self, fds: &[Vec<FdSnap>]) -> Result<(), String> {
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

    pub(super) fn scan_fds(
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

    pub(super) fn private_fds(
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
    pub(super) fn make_pipe(
        &self,
        ck: &Checkpoint,
        inj: &Inj,
        pipe: usize,
    ) -> Result<(i32, i32), String> {
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
}
