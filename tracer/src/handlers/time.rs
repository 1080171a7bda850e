//! Time: every clock is read from the virtual clock; sleeps and timers run on
//! virtual time, so when nothing else can run the clock jumps to the next
//! deadline and `sleep 60` takes milliseconds.

use super::{Out, EFAULT, EINVAL, EPERM};
use crate::ctx::Ctx;
use crate::sys::{self, Args};
use crate::task::Park;
use detrun_scheduler::clock::NS;
use detrun_scheduler::world::{ITIMER_PROF_ID, ITIMER_REAL_ID, ITIMER_VIRTUAL_ID};
use detrun_scheduler::{ClockId, SigTarget, TimerSpec, Wait};
use libc::pid_t;

const TIMER_ABSTIME: u64 = 1;

fn split(ns: u64) -> (i64, i64) {
    ((ns / NS) as i64, (ns % NS) as i64)
}

/// A guest timespec as nanoseconds; `None` if it is invalid (EINVAL).
pub fn ts_ns(sec: i64, nsec: i64) -> Option<u64> {
    if sec < 0 || !(0..1_000_000_000).contains(&nsec) {
        return None;
    }
    Some((sec as u64).saturating_mul(NS).saturating_add(nsec as u64))
}

fn tv_ns(sec: i64, usec: i64) -> Option<u64> {
    if sec < 0 || !(0..1_000_000).contains(&usec) {
        return None;
    }
    Some(
        (sec as u64)
            .saturating_mul(NS)
            .saturating_add(usec as u64 * 1000),
    )
}

/// Read a timespec argument as nanoseconds, or the errno to return.
pub fn read_ts(tid: pid_t, addr: u64) -> Result<u64, i64> {
    let (s, n) = sys::read_timespec(tid, addr).map_err(|_| EFAULT)?;
    ts_ns(s, n).ok_or(EINVAL)
}

impl Ctx {
    fn clock_now(&self, tid: pid_t, c: ClockId) -> u64 {
        let cpu = match (c, self.threads.get(&tid)) {
            (ClockId::ThreadCpu, Some(t)) => self.world.thread_cpu_ns(t.vt),
            (ClockId::ProcessCpu, Some(t)) => self.world.proc_cpu_ns(t.proc),
            _ => 0,
        };
        self.world.clock.read(c, cpu)
    }
}

fn itimer_id(which: u64) -> Option<i32> {
    match which {
        0 => Some(ITIMER_REAL_ID),
        1 => Some(ITIMER_VIRTUAL_ID),
        2 => Some(ITIMER_PROF_ID),
        _ => None,
    }
}

fn itimer_signal(id: i32) -> i32 {
    match id {
        ITIMER_VIRTUAL_ID => libc::SIGVTALRM,
        ITIMER_PROF_ID => libc::SIGPROF,
        _ => libc::SIGALRM,
    }
}

pub fn handle(s: &mut Ctx, tid: pid_t, a: &Args) -> Out {
    use crate::handlers::nr::*;
    let Some(proc) = s.threads.get(&tid).map(|t| t.proc) else {
        return Out::Pass;
    };
    let x = a.a;
    match a.nr {
        SYS_clock_gettime => {
            let Some(c) = ClockId::from_linux(x[0] as i32 as i64) else {
                return Out::Ret(EINVAL);
            };
            let (sec, ns) = split(s.clock_now(tid, c));
            match sys::write_pair(tid, x[1], sec, ns) {
                Ok(()) => answered(s, tid, Some(x[0]), 0),
                Err(_) => Out::Ret(EFAULT),
            }
        }
        SYS_clock_getres => {
            if ClockId::from_linux(x[0] as i32 as i64).is_none() {
                return Out::Ret(EINVAL);
            }
            if x[1] != 0 && sys::write_pair(tid, x[1], 0, 1).is_err() {
                return Out::Ret(EFAULT);
            }
            Out::Ret(0)
        }
        SYS_gettimeofday => {
            let now = s.world.clock.realtime();
            if x[0] != 0
                && sys::write_pair(tid, x[0], (now / NS) as i64, ((now % NS) / 1000) as i64)
                    .is_err()
            {
                return Out::Ret(EFAULT);
            }
            if x[1] != 0 && sys::write_u64(tid, x[1], 0).is_err() {
                return Out::Ret(EFAULT);
            }
            answered(s, tid, None, 0)
        }
        SYS_time => {
            let secs = (s.world.clock.realtime() / NS) as i64;
            if x[0] != 0 && sys::write_u64(tid, x[0], secs as u64).is_err() {
                return Out::Ret(EFAULT);
            }
            answered(s, tid, None, secs)
        }
        SYS_nanosleep => match read_ts(tid, x[0]) {
            Ok(d) => sleep(s, d, x[1]),
            Err(e) => Out::Ret(e),
        },
        SYS_clock_nanosleep => {
            let Some(c) = ClockId::from_linux(x[0] as i32 as i64) else {
                return Out::Ret(EINVAL);
            };
            let d = match read_ts(tid, x[2]) {
                Ok(d) => d,
                Err(e) => return Out::Ret(e),
            };
            // clock_nanosleep returns the error number itself (positive is
            // wrapped by glibc): the raw syscall returns -errno like others.
            if x[1] & TIMER_ABSTIME != 0 {
                let now = s.clock_now(tid, c);
                let mono_deadline = match c {
                    ClockId::Realtime => s.world.clock.to_monotonic(c, d),
                    ClockId::Monotonic | ClockId::Boottime => d,
                    _ => s.world.clock.monotonic() + d.saturating_sub(now),
                };
                let dur = mono_deadline.saturating_sub(s.world.clock.monotonic());
                sleep(s, dur, 0)
            } else {
                sleep(s, d, x[3])
            }
        }
        SYS_alarm => {
            let spec = TimerSpec {
                signal: SIGALRM,
                target: SigTarget::Process,
                value: 0,
                realtime: false,
            };
            let (old, _) =
                s.world
                    .set_timer(proc, ITIMER_REAL_ID, spec, x[0] as u32 as u64 * NS, 0);
            // Rounded up to whole seconds, as the kernel does.
            Out::Ret(old.div_ceil(NS) as i64)
        }
        SYS_setitimer => {
            let Some(id) = itimer_id(x[0]) else {
                return Out::Ret(EINVAL);
            };
            let mut b = [0u8; 32];
            if x[1] != 0 && sys::read_mem(tid, x[1], &mut b).is_err() {
                return Out::Ret(EFAULT);
            }
            let f = |o: usize| i64::from_ne_bytes(b[o..o + 8].try_into().unwrap_or([0; 8]));
            let (Some(interval), Some(value)) = (tv_ns(f(0), f(8)), tv_ns(f(16), f(24))) else {
                return Out::Ret(EINVAL);
            };
            let spec = TimerSpec {
                signal: itimer_signal(id),
                target: SigTarget::Process,
                value: 0,
                realtime: false,
            };
            let (ov, oi) = s.world.set_timer(proc, id, spec, value, interval);
            if x[2] != 0 && write_itimerval(tid, x[2], oi, ov).is_err() {
                return Out::Ret(EFAULT);
            }
            Out::Ret(0)
        }
        SYS_getitimer => {
            let Some(id) = itimer_id(x[0]) else {
                return Out::Ret(EINVAL);
            };
            let (v, i) = s.world.get_timer(proc, id);
            match write_itimerval(tid, x[1], i, v) {
                Ok(()) => Out::Ret(0),
                Err(_) => Out::Ret(EFAULT),
            }
        }
        SYS_timer_create => timer_create(s, tid, proc, x),
        SYS_timer_settime => {
            let id = x[0] as i32;
            let Some(spec) = (id >= 0).then(|| s.world.timer_spec(proc, id)).flatten() else {
                return Out::Ret(EINVAL);
            };
            let mut b = [0u8; 32];
            if sys::read_mem(tid, x[2], &mut b).is_err() {
                return Out::Ret(EFAULT);
            }
            let f = |o: usize| i64::from_ne_bytes(b[o..o + 8].try_into().unwrap_or([0; 8]));
            let (Some(interval), Some(mut value)) = (ts_ns(f(0), f(8)), ts_ns(f(16), f(24))) else {
                return Out::Ret(EINVAL);
            };
            if x[1] & TIMER_ABSTIME != 0 && value != 0 {
                // Absolute on the timer's clock; realtime timers were mapped.
                let base = if spec.realtime {
                    s.world.clock.realtime()
                } else {
                    s.world.clock.monotonic()
                };
                value = value.saturating_sub(base).max(1);
            }
            let (ov, oi) = s.world.set_timer(proc, id, spec, value, interval);
            if x[3] != 0 && write_itimerspec(tid, x[3], oi, ov).is_err() {
                return Out::Ret(EFAULT);
            }
            Out::Ret(0)
        }
        SYS_timer_gettime => {
            let id = x[0] as i32;
            if id < 0 || !s.world.has_timer(proc, id) {
                return Out::Ret(EINVAL);
            }
            let (v, i) = s.world.get_timer(proc, id);
            match write_itimerspec(tid, x[1], i, v) {
                Ok(()) => Out::Ret(0),
                Err(_) => Out::Ret(EFAULT),
            }
        }
        SYS_timer_getoverrun => {
            let id = x[0] as i32;
            if id < 0 || !s.world.has_timer(proc, id) {
                return Out::Ret(EINVAL);
            }
            Out::Ret(s.world.timer_overrun(proc, id).min(i32::MAX as u64) as i64)
        }
        SYS_timer_delete => {
            let id = x[0] as i32;
            if id >= 0 && s.world.delete_timer(proc, id) {
                Out::Ret(0)
            } else {
                Out::Ret(EINVAL)
            }
        }
        SYS_times => {
            // Clock ticks at 100 Hz from virtual CPU and monotonic time.
            let cpu = s.world.proc_cpu_ns(proc) / 10_000_000;
            if x[0] != 0 {
                let mut b = [0u8; 32];
                b[..8].copy_from_slice(&cpu.to_ne_bytes());
                if sys::write_mem(tid, x[0], &b).is_err() {
                    return Out::Ret(EFAULT);
                }
            }
            Out::Ret((s.world.clock.monotonic() / 10_000_000) as i64)
        }
        SYS_getrusage => {
            let who = x[0] as i32;
            let ns = match who {
                RUSAGE_THREAD => s
                    .threads
                    .get(&tid)
                    .map_or(0, |t| s.world.thread_cpu_ns(t.vt)),
                RUSAGE_SELF => s.world.proc_cpu_ns(proc),
                RUSAGE_CHILDREN => 0,
                _ => return Out::Ret(EINVAL),
            };
            // struct rusage is 144 bytes; only ru_utime is non-zero.
            let mut b = [0u8; 144];
            b[..8].copy_from_slice(&((ns / NS) as i64).to_ne_bytes());
            b[8..16].copy_from_slice(&(((ns % NS) / 1000) as i64).to_ne_bytes());
            match sys::write_mem(tid, x[1], &b) {
                Ok(()) => Out::Ret(0),
                Err(_) => Out::Ret(EFAULT),
            }
        }
        // Setting the clock would change the host's.
        _ => {
            s.stats.hazard(
                "refused",
                format!(
                    "{} refused with EPERM",
                    crate::sysnames::name(a.nr).unwrap_or("?")
                ),
            );
            Out::Ret(EPERM)
        }
    }
}

/// The answer `v` of a time call. A call the time stubs made trapped at
/// their limit comes from a thread that read the clock thousands of times
/// (or up to a timer) without any other event: it is polling, so the call
/// is a yield, and the thread it waits for gets to run.
fn answered(s: &Ctx, tid: pid_t, clock: Option<u64>, v: i64) -> Out {
    let from_stub = || {
        sys::get_regs(tid)
            .is_ok_and(|r| (detrun_shim::CODE_ADDR..detrun_shim::CODE_ADDR + 4096).contains(&r.rip))
    };
    match &s.clock_page {
        Some(p) if p.at_limit(clock) && from_stub() => Out::Yield(v),
        _ => Out::Ret(v),
    }
}

/// Park the running thread for `dur` virtual nanoseconds.
fn sleep(s: &mut Ctx, dur: u64, rem: u64) -> Out {
    if dur == 0 {
        // A zero sleep is a yield (and must be one under every policy).
        return Out::Yield(0);
    }
    let deadline = s.world.clock.monotonic().saturating_add(dur);
    Out::Park(Park::Sleep { rem, deadline }, Wait::Sleep, Some(deadline))
}

fn write_itimerval(tid: pid_t, addr: u64, interval: u64, value: u64) -> std::io::Result<()> {
    let mut b = [0u8; 32];
    for (o, v) in [(0, interval), (16, value)] {
        b[o..o + 8].copy_from_slice(&((v / NS) as i64).to_ne_bytes());
        b[o + 8..o + 16].copy_from_slice(&(((v % NS) / 1000) as i64).to_ne_bytes());
    }
    sys::write_mem(tid, addr, &b)
}

fn write_itimerspec(tid: pid_t, addr: u64, interval: u64, value: u64) -> std::io::Result<()> {
    let mut b = [0u8; 32];
    for (o, v) in [(0, interval), (16, value)] {
        b[o..o + 8].copy_from_slice(&((v / NS) as i64).to_ne_bytes());
        b[o + 8..o + 16].copy_from_slice(&((v % NS) as i64).to_ne_bytes());
    }
    sys::write_mem(tid, addr, &b)
}

const SIGEV_SIGNAL: i32 = 0;
const SIGEV_NONE: i32 = 1;
const SIGEV_THREAD_ID: i32 = 4;

fn timer_create(s: &mut Ctx, tid: pid_t, proc: detrun_scheduler::ProcId, x: [u64; 6]) -> Out {
    if ClockId::from_linux(x[0] as i32 as i64).is_none() {
        return Out::Ret(EINVAL);
    }
    let realtime = ClockId::from_linux(x[0] as i32 as i64) == Some(ClockId::Realtime);
    let mut spec = TimerSpec {
        signal: libc::SIGALRM,
        target: SigTarget::Process,
        value: 0,
        realtime,
    };
    let mut value_is_id = true;
    if x[1] != 0 {
        // struct sigevent: sigev_value (8), sigev_signo (4), sigev_notify (4), _tid (4)
        let mut b = [0u8; 24];
        if sys::read_mem(tid, x[1], &mut b).is_err() {
            return Out::Ret(EFAULT);
        }
        let value = u64::from_ne_bytes(b[0..8].try_into().unwrap_or([0; 8]));
        let signo = i32::from_ne_bytes(b[8..12].try_into().unwrap_or([0; 4]));
        let notify = i32::from_ne_bytes(b[12..16].try_into().unwrap_or([0; 4]));
        let ttid = i32::from_ne_bytes(b[16..20].try_into().unwrap_or([0; 4]));
        value_is_id = false;
        spec.value = value;
        match notify {
            SIGEV_NONE => spec.signal = 0,
            SIGEV_SIGNAL => spec.signal = signo,
            SIGEV_THREAD_ID => {
                spec.signal = signo;
                let target = s
                    .threads
                    .values()
                    .find(|t| super::process::ns_tid(t.tid) == Some(ttid) && t.proc == proc)
                    .map(|t| t.vt);
                match target {
                    Some(vt) => spec.target = SigTarget::Thread(vt),
                    None => return Out::Ret(EINVAL),
                }
            }
            _ => return Out::Ret(EINVAL),
        }
        if spec.signal != 0 && !(1..=64).contains(&spec.signal) {
            return Out::Ret(EINVAL);
        }
    }
    let id = s.world.create_timer(proc, spec);
    if value_is_id {
        spec.value = id as u64;
        s.world.set_timer(proc, id, spec, 0, 0);
    }
    if sys::write_u32(tid, x[2], id as u32).is_err() {
        s.world.delete_timer(proc, id);
        return Out::Ret(EFAULT);
    }
    Out::Ret(0)
}
