//! Randomness, machine identity (uname, CPUs, cpuid), the rdtsc and cpuid
//! faults, scheduling calls, and the calls detrun refuses or only reports.

use super::{Out, EFAULT, EINVAL, ENOSYS};
use crate::ctx::Ctx;
use crate::sys::{self, Args, Regs};
use libc::pid_t;

/// Largest getrandom answer the kernel gives in one call.
const GETRANDOM_MAX: usize = 33_554_431;

pub fn fill_random(s: &mut Ctx, tid: pid_t, buf: u64, len: usize) -> i64 {
    let Some(p) = s.threads.get(&tid).map(|t| t.proc) else {
        return EFAULT;
    };
    let len = len.min(GETRANDOM_MAX);
    let mut chunk = [0u8; 4096];
    let mut done = 0usize;
    while done < len {
        let n = (len - done).min(chunk.len());
        s.world.fill_random(p, &mut chunk[..n]);
        if sys::write_mem(tid, buf + done as u64, &chunk[..n]).is_err() {
            return if done > 0 { done as i64 } else { EFAULT };
        }
        done += n;
    }
    done as i64
}

fn field(b: &mut [u8], i: usize, v: &str) {
    let f = &mut b[i * 65..(i + 1) * 65];
    let n = v.len().min(64);
    f[..n].copy_from_slice(&v.as_bytes()[..n]);
}

pub fn handle(s: &mut Ctx, tid: pid_t, a: &Args, mut regs: Regs) -> Out {
    use crate::handlers::nr::*;
    let x = a.a;
    match a.nr {
        SYS_getrandom => {
            if x[2] & !(GRND_NONBLOCK | GRND_RANDOM | 0x4) as u64 != 0 {
                return Out::Ret(EINVAL);
            }
            Out::Ret(fill_random(s, tid, x[0], x[1] as usize))
        }
        SYS_uname => {
            let mut b = [0u8; 65 * 6];
            field(&mut b, 0, "Linux");
            field(&mut b, 1, &s.cfg.hostname.clone());
            field(&mut b, 2, "6.1.0-detrun");
            field(
                &mut b,
                3,
                "#1 SMP PREEMPT_DYNAMIC Mon Jan  1 00:00:00 UTC 2024",
            );
            field(&mut b, 4, "x86_64");
            field(&mut b, 5, "(none)");
            match sys::write_mem(tid, x[0], &b) {
                Ok(()) => Out::Ret(0),
                Err(_) => Out::Ret(EFAULT),
            }
        }
        SYS_sched_getaffinity => {
            let len = x[1] as usize;
            let need = 8usize;
            if len < need || !len.is_multiple_of(8) {
                return Out::Ret(EINVAL);
            }
            let n = s.cfg.ncpus.clamp(1, 64);
            let mask: u64 = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
            match sys::write_mem(tid, x[2], &mask.to_ne_bytes()) {
                Ok(()) => Out::Ret(need as i64),
                Err(_) => Out::Ret(EFAULT),
            }
        }
        // The guest is pinned with its supervisor; its own wishes are noted.
        SYS_sched_setaffinity => Out::Ret(0),
        SYS_getcpu => {
            for p in [x[0], x[1]] {
                if p != 0 && sys::write_u32(tid, p, 0).is_err() {
                    return Out::Ret(EFAULT);
                }
            }
            Out::Ret(0)
        }
        SYS_sysinfo => {
            // struct sysinfo, 112 bytes.
            let mut b = [0u8; 112];
            let up = (s.world.clock.monotonic() / 1_000_000_000) as i64;
            b[0..8].copy_from_slice(&up.to_ne_bytes());
            let gib: u64 = 1 << 30;
            b[32..40].copy_from_slice(&(4 * gib).to_ne_bytes()); // totalram
            b[40..48].copy_from_slice(&(2 * gib).to_ne_bytes()); // freeram
            let procs = s.procs.iter().filter(|p| p.alive).count() as u16;
            b[80..82].copy_from_slice(&procs.to_ne_bytes());
            b[104..108].copy_from_slice(&1u32.to_ne_bytes()); // mem_unit
            match sys::write_mem(tid, x[0], &b) {
                Ok(()) => Out::Ret(0),
                Err(_) => Out::Ret(EFAULT),
            }
        }
        // rseq would publish the real CPU number into guest memory.
        SYS_rseq => Out::Ret(ENOSYS),
        SYS_sched_yield => Out::Yield(0),
        SYS_prctl => {
            // Only PR_SET_TSC traps: keep rdtsc faulting.
            s.stats
                .hazard("refused", "prctl(PR_SET_TSC) ignored: rdtsc stays virtual");
            Out::Ret(0)
        }
        SYS_arch_prctl => match x[0] {
            0x1011 => Out::Ret(1), // ARCH_GET_CPUID: "cpuid works"
            _ => {
                s.stats.hazard(
                    "refused",
                    "arch_prctl(ARCH_SET_CPUID) ignored: cpuid stays virtual",
                );
                Out::Ret(0)
            }
        },
        SYS_personality => {
            regs.rdi |= ADDR_NO_RANDOMIZE as u64;
            s.stats
                .hazard("refused", "personality() may not re-enable ASLR");
            Out::PassWith(regs)
        }
        SYS_io_uring_setup
        | SYS_io_uring_enter
        | SYS_io_uring_register
        | SYS_userfaultfd
        | SYS_perf_event_open
        | SYS_bpf
        | SYS_futex_waitv => {
            let name = crate::sysnames::name(a.nr).unwrap_or("?");
            s.stats.hazard(
                "refused",
                format!("{name} answered ENOSYS (bypasses the sandbox)"),
            );
            Out::Ret(ENOSYS)
        }
        _ => {
            // timerfd, SysV and POSIX message queues, semop: run for real.
            let name = crate::sysnames::name(a.nr).unwrap_or("?");
            if s.cfg.strict {
                s.stats.hazard(
                    "unhandled",
                    format!("{name} refused with ENOSYS (--strict)"),
                );
                return Out::Ret(ENOSYS);
            }
            s.stats.hazard(
                "unhandled",
                format!("{name} passed through (real time or may block)"),
            );
            Out::Pass
        }
    }
}

/// A syscall the supervisor has no handler for.
pub fn unknown(s: &mut Ctx, a: &Args) -> Out {
    let name = crate::sysnames::name(a.nr)
        .map(str::to_string)
        .unwrap_or_else(|| format!("syscall {}", a.nr));
    if s.cfg.strict {
        if s.stats.hazard(
            "unknown-syscall",
            format!("{name} refused with ENOSYS (--strict)"),
        ) {
            eprintln!("detrun: unknown syscall {name} refused (--strict)");
        }
        return Out::Ret(ENOSYS);
    }
    if s.stats
        .hazard("unknown-syscall", format!("{name} passed through"))
        && s.cfg.verbose
    {
        eprintln!("detrun: warning: syscall {name} is not virtualized; passed through");
    }
    Out::Pass
}

/// A SIGSEGV at `rdtsc`, `rdtscp` or `cpuid` (faulting on purpose): emulate
/// the instruction. Returns false for a real fault.
pub fn emulate_fault(s: &mut Ctx, tid: pid_t) -> bool {
    let Ok(si) = sys::get_siginfo(tid) else {
        return false;
    };
    if si.si_code != 0x80 {
        return false; // not SI_KERNEL: a real segfault
    }
    let Ok(mut r) = sys::get_regs(tid) else {
        return false;
    };
    let mut insn = [0u8; 3];
    if sys::read_mem(tid, r.rip, &mut insn).is_err() {
        return false;
    }
    let vt = s.threads.get(&tid).map(|t| t.vt);
    match insn {
        [0x0f, 0x31, _] | [0x0f, 0x01, 0xf9] => {
            if let Some(vt) = vt {
                s.world.tick(vt);
            }
            let tsc = s.world.clock.tsc();
            r.rax = tsc & 0xffff_ffff;
            r.rdx = tsc >> 32;
            if insn[1] == 0x31 && crate::patch::after_rdtsc(s, tid, &mut r, tsc) {
                // Patched: `r` stands after the whole site.
            } else if insn[1] == 0x01 {
                r.rcx = 0; // TSC_AUX: cpu 0
                r.rip += 3;
            } else {
                r.rip += 2;
            }
            s.stats.rdtsc += 1;
        }
        [0x0f, 0xa2, _] => {
            if let Some(vt) = vt {
                s.world.tick(vt);
            }
            let v = s.cpuid.lookup(r.rax as u32, r.rcx as u32);
            r.rax = v[0] as u64;
            r.rbx = v[1] as u64;
            r.rcx = v[2] as u64;
            r.rdx = v[3] as u64;
            r.rip += 2;
            s.stats.cpuid += 1;
        }
        _ => return false,
    }
    sys::set_regs(tid, &r).is_ok()
}
