//! futex, emulated entirely in the world: no tracee ever waits in the
//! kernel's futex code, so a wait never blocks the turn and wake order is
//! the world's FIFO order. The kernel's own wake on thread exit
//! (CLONE_CHILD_CLEARTID) is replayed by the supervisor when the thread's
//! death is reported.

use super::{Out, EAGAIN, EFAULT, EINVAL, ENOSYS};
use crate::ctx::Ctx;
use crate::sys::{self, Args};
use crate::task::Park;
use detrun_scheduler::{ClockId, FutexKey, ProcId, Wait};
use libc::pid_t;

const FUTEX_WAIT: u64 = 0;
const FUTEX_WAKE: u64 = 1;
const FUTEX_REQUEUE: u64 = 3;
const FUTEX_CMP_REQUEUE: u64 = 4;
const FUTEX_WAKE_OP: u64 = 5;
const FUTEX_WAIT_BITSET: u64 = 9;
const FUTEX_WAKE_BITSET: u64 = 10;
const FUTEX_PRIVATE: u64 = 128;
const FUTEX_CLOCK_REALTIME: u64 = 256;

/// Process-shared futexes on shared mappings are keyed by the mapping's inode.
const SHARED_SPACE: u64 = 1 << 63;

impl Ctx {
    /// The key of the futex word at `addr` in process `p`.
    pub fn futex_key(&self, p: ProcId, addr: u64, private: bool) -> FutexKey {
        let space = self.procs[p as usize].space;
        if !private {
            if let Some((inode, off)) = shared_mapping(self.procs[p as usize].tgid, addr) {
                return FutexKey {
                    space: SHARED_SPACE | inode,
                    addr: off,
                };
            }
        }
        FutexKey { space, addr }
    }
}

/// (inode, offset) of `addr` if it lies in a shared mapping.
fn shared_mapping(tgid: pid_t, addr: u64) -> Option<(u64, u64)> {
    let maps = std::fs::read_to_string(format!("/proc/{tgid}/maps")).ok()?;
    for line in maps.lines() {
        let mut it = line.split_whitespace();
        let range = it.next()?;
        let perms = it.next()?;
        let off = u64::from_str_radix(it.next()?, 16).ok()?;
        let _dev = it.next()?;
        let inode: u64 = it.next()?.parse().ok()?;
        let (lo, hi) = range.split_once('-')?;
        let lo = u64::from_str_radix(lo, 16).ok()?;
        let hi = u64::from_str_radix(hi, 16).ok()?;
        if addr >= lo && addr < hi {
            return (perms.as_bytes().get(3) == Some(&b's')).then_some((inode, off + (addr - lo)));
        }
    }
    None
}

pub fn handle(s: &mut Ctx, tid: pid_t, a: &Args) -> Out {
    let Some(proc) = s.threads.get(&tid).map(|t| t.proc) else {
        return Out::Pass;
    };
    let [uaddr, op, val, timeout, uaddr2, val3] = a.a;
    let private = op & FUTEX_PRIVATE != 0;
    let cmd = op & !(FUTEX_PRIVATE | FUTEX_CLOCK_REALTIME);
    let val = val as u32;
    let key = s.futex_key(proc, uaddr, private);
    match cmd {
        FUTEX_WAIT | FUTEX_WAIT_BITSET => {
            let bitset = if cmd == FUTEX_WAIT {
                u32::MAX
            } else {
                val3 as u32
            };
            if bitset == 0 {
                return Out::Ret(EINVAL);
            }
            let Ok(cur) = sys::read_u32(tid, uaddr) else {
                return Out::Ret(EFAULT);
            };
            if cur != val {
                return Out::Ret(EAGAIN);
            }
            let deadline = if timeout == 0 {
                None
            } else {
                let t = match super::time::read_ts(tid, timeout) {
                    Ok(t) => t,
                    Err(e) => return Out::Ret(e),
                };
                Some(if cmd == FUTEX_WAIT {
                    s.world.clock.monotonic().saturating_add(t)
                } else if op & FUTEX_CLOCK_REALTIME != 0 {
                    s.world.clock.to_monotonic(ClockId::Realtime, t)
                } else {
                    t
                })
            };
            Out::Park(Park::Futex, Wait::Futex { key, bitset }, deadline)
        }
        FUTEX_WAKE | FUTEX_WAKE_BITSET => {
            let bitset = if cmd == FUTEX_WAKE {
                u32::MAX
            } else {
                val3 as u32
            };
            if bitset == 0 {
                return Out::Ret(EINVAL);
            }
            Out::Ret(s.world.futex_wake(key, val, bitset) as i64)
        }
        FUTEX_REQUEUE | FUTEX_CMP_REQUEUE => {
            if cmd == FUTEX_CMP_REQUEUE {
                let Ok(cur) = sys::read_u32(tid, uaddr) else {
                    return Out::Ret(EFAULT);
                };
                if cur != val3 as u32 {
                    return Out::Ret(EAGAIN);
                }
            }
            let key2 = s.futex_key(proc, uaddr2, private);
            let nmove = (timeout as u32).min(i32::MAX as u32);
            let (w, m) = s.world.futex_requeue(key, key2, val, nmove);
            Out::Ret(if cmd == FUTEX_CMP_REQUEUE {
                (w + m) as i64
            } else {
                w as i64
            })
        }
        FUTEX_WAKE_OP => {
            let key2 = s.futex_key(proc, uaddr2, private);
            let Ok(old) = sys::read_u32(tid, uaddr2) else {
                return Out::Ret(EFAULT);
            };
            let encoded = val3 as u32;
            let Some((new, cond)) = wake_op(encoded, old) else {
                return Out::Ret(ENOSYS);
            };
            if sys::write_u32(tid, uaddr2, new).is_err() {
                return Out::Ret(EFAULT);
            }
            let mut n = s.world.futex_wake(key, val, u32::MAX);
            if cond {
                n += s.world.futex_wake(key2, timeout as u32, u32::MAX);
            }
            Out::Ret(n as i64)
        }
        _ => {
            s.stats.hazard(
                "unsupported",
                format!("futex op {cmd} (PI futexes) answered ENOSYS"),
            );
            Out::Ret(ENOSYS)
        }
    }
}

/// FUTEX_WAKE_OP: returns (new value of *uaddr2, whether to wake uaddr2).
fn wake_op(enc: u32, old: u32) -> Option<(u32, bool)> {
    let op = (enc >> 28) & 0xf;
    let cmp = (enc >> 24) & 0xf;
    let mut oparg = (enc >> 12) & 0xfff;
    let cmparg = enc & 0xfff;
    if op & 8 != 0 {
        oparg = 1u32.checked_shl(oparg)?;
    }
    // Sign-extend the 12-bit fields as the kernel does.
    let sx = |v: u32| ((v << 20) as i32 >> 20) as u32;
    let oparg = if op & 8 != 0 { oparg } else { sx(oparg) };
    let new = match op & 7 {
        0 => oparg,
        1 => old.wrapping_add(oparg),
        2 => old | oparg,
        3 => old & !oparg,
        4 => old ^ oparg,
        _ => return None,
    };
    let (o, c) = (old as i32, sx(cmparg) as i32);
    let cond = match cmp {
        0 => o == c,
        1 => o != c,
        2 => o < c,
        3 => o <= c,
        4 => o > c,
        5 => o >= c,
        _ => return None,
    };
    Some((new, cond))
}

#[cfg(test)]
mod tests {
    #[test]
    fn wake_op_decodes_glibc_encoding() {
        // FUTEX_OP(FUTEX_OP_SET, 0, FUTEX_OP_CMP_GT, 1), as glibc uses.
        let enc = (4 << 24) | 1; // op SET, oparg 0, cmp GT, cmparg 1
        assert_eq!(super::wake_op(enc, 2), Some((0, true)));
        assert_eq!(super::wake_op(enc, 1), Some((0, false)));
        // ADD 1, CMP_EQ 0
        let enc = (1 << 28) | (1 << 12); // op ADD, oparg 1, cmp EQ, cmparg 0
        assert_eq!(super::wake_op(enc, 0), Some((1, true)));
    }
}
