//! File system metadata: `stat` and friends report virtual inode, device
//! and time values (see `detrun_scheduler::fsview`), and `getdents64`
//! lists every directory sorted by name. The supervisor reads the directory
//! itself through a fresh description of it and keeps the position in the
//! guest's own description (its file offset is the index of the next entry),
//! so `rewinddir`, `seekdir`/`telldir` and fork-shared descriptors behave.

use super::{Out, EFAULT, EINVAL};
use crate::ctx::Ctx;
use crate::files::Dirent;
use crate::sys::{self, Args, Regs};
use crate::task::Post;
use detrun_scheduler::fsview::Stamp;
use libc::pid_t;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

pub fn handle(s: &mut Ctx, tid: pid_t, a: &Args, regs: Regs) -> Out {
    use crate::handlers::nr::*;
    let x = a.a;
    match a.nr {
        SYS_stat | SYS_lstat | SYS_fstat => Out::Exit(
            regs,
            Post::Stat {
                buf: x[1],
                statx: false,
                path: if a.nr == SYS_fstat { 0 } else { x[0] },
            },
        ),
        SYS_newfstatat => Out::Exit(
            regs,
            Post::Stat {
                buf: x[2],
                statx: false,
                path: x[1],
            },
        ),
        SYS_statx => Out::Exit(
            regs,
            Post::Stat {
                buf: x[4],
                statx: true,
                path: x[1],
            },
        ),
        SYS_getdents64 => getdents(s, tid, x[0] as i32, x[1], x[2]),
        _ => Out::Pass,
    }
}

fn rd(b: &[u8], o: usize) -> u64 {
    u64::from_ne_bytes(b[o..o + 8].try_into().unwrap_or([0; 8]))
}

fn wr(b: &mut [u8], o: usize, v: u64) {
    b[o..o + 8].copy_from_slice(&v.to_ne_bytes());
}

/// A Python source that predates the run keeps its real times: CPython's
/// bytecode cache (`__pycache__/*.pyc`) records the source's real mtime and
/// is recompiled on every import when the two differ.
fn keeps_real_times(s: &Ctx, tid: pid_t, path: u64, real_mtime: u64) -> bool {
    if path == 0 || real_mtime >= s.files.fsv.real_start || !s.cfg.py_real_times {
        return false;
    }
    sys::read_cstr(tid, path, 4096).is_ok_and(|p| p.ends_with(b".py"))
}

/// A stat call the stat code charged and handed over, without an event
/// (no tick, no scheduling point, not in the trace). The stat code made
/// the call already and it succeeded: its answer is in the buffer, so the
/// repeat is skipped and the answer rewritten here, in one stop. False:
/// not a stat call.
pub fn quiet(s: &mut Ctx, tid: pid_t, regs: &Regs) -> bool {
    let a = Args::from_regs(regs);
    let Out::Exit(_, Post::Stat { buf, statx, path }) = handle(s, tid, &a, *regs) else {
        return false;
    };
    let mut r = *regs;
    r.orig_rax = u64::MAX;
    r.rax = 0;
    if sys::set_regs(tid, &r).is_err() {
        return false;
    }
    stat_exit(s, tid, r, buf, statx, path);
    true
}

/// Is the host's coarse clock (file stamps) still within the start's
/// tick, so that what the run writes may look older than the run?
pub fn start_window_open(s: &Ctx) -> bool {
    s.files.fsv.policy == detrun_scheduler::fsview::TimePolicy::Virtual && s.world_start_open()
}

/// The file behind the guest's `fd` was written by the run.
pub fn touch_fd(s: &mut Ctx, tid: pid_t, fd: i32) {
    if let Some(f) = s.steal(tid, fd) {
        // SAFETY: fstat into a local struct.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(f.as_raw_fd(), &mut st) } == 0 {
            s.files.fsv.touch(dev_key(st.st_dev), st.st_ino);
        }
    }
}

/// A `st_dev` as one number, major << 32 | minor: the form `statx` gives,
/// so that both calls number a file alike.
pub fn dev_key(st_dev: u64) -> u64 {
    ((libc::major(st_dev) as u64) << 32) | libc::minor(st_dev) as u64
}

/// Virtual device number, shared with the stat code in the tracees.
fn vdev(s: &mut Ctx, dev: u64) -> u64 {
    match &s.clock_page {
        Some(p) => match p.dev(dev) {
            Some(v) => v,
            None => {
                let first = p.devs() + 1;
                s.files.fsv.dev_from(dev, first)
            }
        },
        None => s.files.fsv.dev(dev),
    }
}

/// Virtual inode number, shared with the stat code in the tracees (its
/// table first; what does not fit there, here).
pub fn vino(s: &mut Ctx, dev: u64, ino: u64) -> u64 {
    match &s.clock_page {
        Some(p) => match p.ino(dev, ino) {
            Some(v) => v,
            None => s.files.fsv.ino_with(dev, ino, || p.next_ino()),
        },
        None => s.files.fsv.ino(dev, ino),
    }
}

fn ts32(b: &[u8], o: usize) -> u64 {
    rd(b, o).saturating_mul(1_000_000_000)
        + u32::from_ne_bytes(b[o + 8..o + 12].try_into().unwrap_or([0; 4])) as u64
}

fn ts64(b: &[u8], o: usize) -> u64 {
    rd(b, o).saturating_mul(1_000_000_000) + rd(b, o + 8)
}

/// Exit stop of a stat call: rewrite the answer the kernel wrote (the
/// stat code in `shim/stat.c` does the same inside the tracee).
pub fn stat_exit(s: &mut Ctx, tid: pid_t, regs: Regs, buf: u64, statx: bool, path: u64) {
    if regs.rax == 0 && buf != 0 {
        let now = s.world.clock.realtime();
        if statx {
            let mut b = [0u8; 160];
            if sys::read_mem(tid, buf, &mut b).is_ok() {
                let dev = ((u32::from_ne_bytes(b[136..140].try_into().unwrap_or([0; 4])) as u64)
                    << 32)
                    | u32::from_ne_bytes(b[140..144].try_into().unwrap_or([0; 4])) as u64;
                let ino = rd(&b, 32);
                let vdev = vdev(s, dev);
                let vino = vino(s, dev, ino);
                wr(&mut b, 32, vino);
                b[136..140].copy_from_slice(&0u32.to_ne_bytes());
                b[140..144].copy_from_slice(&(vdev as u32).to_ne_bytes());
                wr(&mut b, 144, 0); // mount id
                let real = keeps_real_times(s, tid, path, ts32(&b, 112));
                let mut t = |st: Stamp, o: usize| {
                    let r = ts32(&b, o);
                    if real {
                        r
                    } else {
                        s.files.fsv.time(dev, ino, st, r, now)
                    }
                };
                let m = t(Stamp::Mtime, 112);
                let c = t(Stamp::Ctime, 96);
                let bt = t(Stamp::Btime, 80);
                for (o, v) in [(64, m), (80, bt), (96, c), (112, m)] {
                    wr(&mut b, o, v / 1_000_000_000);
                    b[o + 8..o + 12].copy_from_slice(&((v % 1_000_000_000) as u32).to_ne_bytes());
                }
                let _ = sys::write_mem(tid, buf, &b);
            }
        } else {
            let mut b = [0u8; 144];
            if sys::read_mem(tid, buf, &mut b).is_ok() {
                let (dev, ino) = (dev_key(rd(&b, 0)), rd(&b, 8));
                let vdev = vdev(s, dev);
                let vino = vino(s, dev, ino);
                wr(&mut b, 0, vdev);
                wr(&mut b, 8, vino);
                let real = keeps_real_times(s, tid, path, ts64(&b, 88));
                let (m, c) = if real {
                    (ts64(&b, 88), ts64(&b, 104))
                } else {
                    (
                        s.files.fsv.time(dev, ino, Stamp::Mtime, ts64(&b, 88), now),
                        s.files.fsv.time(dev, ino, Stamp::Ctime, ts64(&b, 104), now),
                    )
                };
                for (o, v) in [(72, m), (88, m), (104, c)] {
                    wr(&mut b, o, v / 1_000_000_000);
                    wr(&mut b, o + 8, v % 1_000_000_000);
                }
                let _ = sys::write_mem(tid, buf, &b);
            }
        }
    }
    crate::patch::after_stat(s, tid, &regs);
    s.continue_running(tid);
}

/// Read a whole directory through a new description of it, sorted by name.
fn read_dir(dirfd: &OwnedFd) -> Option<Vec<Dirent>> {
    // SAFETY: openat on an owned directory descriptor; we own the result.
    let fd = unsafe {
        libc::openat(
            dirfd.as_raw_fd(),
            c".".as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return None;
    }
    // SAFETY: fd is fresh and ours.
    let own = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        // SAFETY: getdents64 into our buffer.
        let n = unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                own.as_raw_fd(),
                buf.as_mut_ptr(),
                buf.len(),
            )
        };
        if n < 0 {
            return None;
        }
        if n == 0 {
            break;
        }
        let mut o = 0usize;
        while o + 19 <= n as usize {
            let ino = rd(&buf, o);
            let reclen = u16::from_ne_bytes([buf[o + 16], buf[o + 17]]) as usize;
            let typ = buf[o + 18];
            let name_area = &buf[o + 19..(o + reclen).min(n as usize)];
            let len = name_area
                .iter()
                .position(|&c| c == 0)
                .unwrap_or(name_area.len());
            out.push(Dirent {
                ino,
                typ,
                name: name_area[..len].to_vec(),
            });
            if reclen == 0 {
                break;
            }
            o += reclen;
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Some(out)
}

fn getdents(s: &mut Ctx, tid: pid_t, fd: i32, buf: u64, count: u64) -> Out {
    let Some(f) = s.steal(tid, fd) else {
        return Out::Pass;
    };
    // SAFETY: fstat into a local struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(f.as_raw_fd(), &mut st) } != 0
        || st.st_mode & libc::S_IFMT != libc::S_IFDIR
    {
        return Out::Pass; // the kernel answers EBADF/ENOTDIR
    }
    let key = (st.st_dev, st.st_ino);
    // SAFETY: reading the shared offset.
    let pos = unsafe { libc::lseek(f.as_raw_fd(), 0, libc::SEEK_CUR) };
    let pos = if pos < 0 { 0 } else { pos as usize };
    if pos == 0 || !s.files.dirs.contains_key(&key) {
        match read_dir(&f) {
            Some(list) => {
                s.files.dirs.insert(key, list);
            }
            None => return Out::Pass,
        }
    }
    let Some(list) = s.files.dirs.get(&key) else {
        return Out::Pass;
    };
    let cap = count.min(1 << 20) as usize;
    let mut out = Vec::with_capacity(cap.min(64 * 1024));
    let mut i = pos;
    let entries: Vec<Dirent> = list.iter().skip(pos).take(cap / 24 + 1).cloned().collect();
    for e in entries {
        let reclen = (19 + e.name.len() + 1).div_ceil(8) * 8;
        if out.len() + reclen > cap {
            break;
        }
        let vino = vino(s, dev_key(st.st_dev), e.ino);
        let start = out.len();
        out.resize(start + reclen, 0);
        wr(&mut out, start, vino);
        wr(&mut out, start + 8, (i + 1) as u64);
        out[start + 16..start + 18].copy_from_slice(&(reclen as u16).to_ne_bytes());
        out[start + 18] = e.typ;
        out[start + 19..start + 19 + e.name.len()].copy_from_slice(&e.name);
        i += 1;
    }
    if out.is_empty() && i < list_len(s, key) {
        return Out::Ret(EINVAL); // buffer too small for one entry
    }
    if sys::write_mem(tid, buf, &out).is_err() {
        return Out::Ret(EFAULT);
    }
    // SAFETY: moving the shared offset to the next entry's index.
    unsafe { libc::lseek(f.as_raw_fd(), i as i64, libc::SEEK_SET) };
    Out::Ret(out.len() as i64)
}

fn list_len(s: &Ctx, key: (u64, u64)) -> usize {
    s.files.dirs.get(&key).map_or(0, |l| l.len())
}
