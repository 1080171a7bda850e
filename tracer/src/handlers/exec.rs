//! The exec stop: the new image gets a deterministic start.
//!
//! At PTRACE_EVENT_EXEC the supervisor finishes the execve (to its exit
//! stop), then rewrites the auxiliary vector on the new stack: the vDSO is
//! patched to answer time calls from the shared clock page (`vdso.rs`), or
//! where that fails `AT_SYSINFO_EHDR` becomes `AT_IGNORE` so libc makes real
//! (trapped) time syscalls; the 16 `AT_RANDOM` bytes come from the seed. CPUID
//! faulting, which execve resets, is re-armed by injecting
//! `arch_prctl(ARCH_SET_CPUID, 0)` through a `syscall` instruction found in
//! the vDSO. `rdtsc` faulting survives exec by itself.

use crate::ctx::Ctx;
use crate::sys::{self};
use libc::pid_t;

const AT_NULL: u64 = 0;
const AT_IGNORE: u64 = 1;
const AT_RANDOM: u64 = 25;
const AT_SYSINFO_EHDR: u64 = 33;
const ARCH_SET_CPUID: u64 = 0x1012;

pub const NO_CPUID_FAULTING: &str = "this CPU has no CPUID faulting: cpuid answers are the host's (same on this machine, may differ on another)";

pub fn on_exec(s: &mut Ctx, tid: pid_t) {
    let former = sys::event_msg(tid).map(|m| m as pid_t).unwrap_or(tid);
    if former != tid {
        // execve from a non-leader thread: it takes over the leader's tid and
        // the old leader vanishes without a death report.
        if let Some(old) = s.threads.remove(&tid) {
            s.world.exit_thread(old.vt);
        }
        if let Some(mut t) = s.threads.remove(&former) {
            t.tid = tid;
            s.vt_tid[t.vt as usize] = tid;
            s.threads.insert(tid, t);
        }
        if s.turn.running == Some(former) {
            s.turn.running = Some(tid);
        }
    }
    let Some(t) = s.threads.get_mut(&tid) else {
        let _ = sys::cont(tid, 0);
        return;
    };
    t.wcont = None;
    t.pending_clone = None;
    t.clear_tid = 0;
    let p = t.proc;
    // Every other thread of the process is gone (de_thread killed them).
    for &vt in s.world.threads_of(p).to_vec().iter() {
        let other = s.vt_tid[vt as usize];
        if other != tid && s.world.is_alive(vt) {
            s.world.exit_thread(vt);
            s.threads.remove(&other);
        }
    }
    s.world.exec_process(p);
    let space = s.new_space();
    s.procs[p as usize].space = space;
    s.procs[p as usize].group_exit = false;
    // A new image: nothing of it is patched yet, and the shim is not in it.
    s.procs[p as usize].patch = Default::default();
    s.procs[p as usize].shim_mapped = false;

    if finish_syscall(tid).is_ok() {
        fix_auxv(s, tid, p);
        rearm_cpuid(s, tid);
    }
    s.release_vfork_parent(p);
    s.continue_running(tid);
}

/// Run the thread to the exit stop of the syscall it is in.
fn finish_syscall(tid: pid_t) -> std::io::Result<()> {
    sys::syscall(tid, 0)?;
    loop {
        match sys::wait_pid(tid, 0) {
            Ok((_, st)) if libc::WIFSTOPPED(st) && libc::WSTOPSIG(st) == libc::SIGTRAP | 0x80 => {
                return Ok(())
            }
            Ok((_, st)) if libc::WIFSTOPPED(st) => {
                // Anything else (a signal): try again.
                sys::syscall(tid, 0)?;
            }
            Ok(_) => return Err(std::io::Error::other("died during exec")),
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Reads words of a tracee's memory a page at a time (the initial stack is
/// walked word by word; one syscall per word cost ~0.1 ms per exec).
struct PageReader {
    tid: pid_t,
    /// The page in `buf`, once read.
    page: Option<u64>,
    buf: [u8; 4096],
}

impl PageReader {
    fn new(tid: pid_t) -> PageReader {
        PageReader {
            tid,
            page: None,
            buf: [0; 4096],
        }
    }

    fn u64_at(&mut self, a: u64) -> std::io::Result<u64> {
        let page = a & !4095;
        let off = (a - page) as usize;
        if off > 4096 - 8 {
            return sys::read_u64(self.tid, a);
        }
        if self.page != Some(page) {
            self.page = None;
            sys::read_mem(self.tid, page, &mut self.buf)?;
            self.page = Some(page);
        }
        Ok(u64::from_ne_bytes(
            self.buf[off..off + 8].try_into().unwrap_or([0; 8]),
        ))
    }
}

/// Walk argc, argv, envp to the auxiliary vector and rewrite it.
fn fix_auxv(s: &mut Ctx, tid: pid_t, p: detrun_scheduler::ProcId) {
    let Ok(regs) = sys::get_regs(tid) else { return };
    let mut m = PageReader::new(tid);
    let mut a = regs.rsp;
    let Ok(argc) = m.u64_at(a) else {
        return;
    };
    a += 8 * (argc + 2); // argc, argv..., NULL
                         // envp until NULL
    for _ in 0..1_000_000 {
        match m.u64_at(a) {
            Ok(0) => break,
            Ok(_) => a += 8,
            Err(_) => return,
        }
    }
    a += 8;
    let mut vdso: Option<(u64, u64)> = None; // (auxv slot, vDSO base)
    for _ in 0..64 {
        let (Ok(typ), Ok(val)) = (m.u64_at(a), m.u64_at(a + 8)) else {
            return;
        };
        match typ {
            AT_NULL => break,
            AT_SYSINFO_EHDR => {
                if s.host.vdso_syscall.is_none() {
                    s.host.vdso_syscall = find_syscall_insn(tid, val).map(|i| i - val);
                }
                // The vDSO is where this image has it.
                s.procs[p as usize].syscall_insn = s.host.vdso_syscall.map_or(0, |o| val + o);
                vdso = Some((a, val));
            }
            AT_RANDOM => {
                let bytes = s.world.at_random(p);
                let _ = sys::write_mem(tid, val, &bytes);
            }
            _ => {}
        }
        a += 16;
    }
    if let Some((slot, base)) = vdso {
        // Answer time calls in the tracee, or hide the vDSO so they trap.
        let fast = match s.procs[p as usize].syscall_insn {
            0 => false,
            insn => crate::vdso::install(s, tid, base, insn),
        };
        s.procs[p as usize].shim_mapped = fast;
        if !fast {
            let _ = sys::write_u64(tid, slot, AT_IGNORE);
        }
    }
}

/// Address of a `syscall` instruction (0f 05) inside the vDSO image.
fn find_syscall_insn(tid: pid_t, base: u64) -> Option<u64> {
    let mut img = vec![0u8; 8192];
    sys::read_mem(tid, base, &mut img[..4096]).ok()?;
    if sys::read_mem(tid, base + 4096, &mut img[4096..]).is_err() {
        img.truncate(4096);
    }
    img.windows(2)
        .position(|w| w == [0x0f, 0x05])
        .map(|o| base + o as u64)
}

/// Inject `arch_prctl(ARCH_SET_CPUID, 0)` at a syscall-exit stop.
fn rearm_cpuid(s: &mut Ctx, tid: pid_t) {
    if !s.host.cpuid_faulting {
        return;
    }
    let insn = s
        .threads
        .get(&tid)
        .map_or(0, |t| s.procs[t.proc as usize].syscall_insn);
    if insn == 0 {
        s.stats.hazard(
            "cpuid",
            "no syscall instruction found to re-arm CPUID faulting",
        );
        return;
    }
    let r = crate::vdso::inject(
        tid,
        insn,
        libc::SYS_arch_prctl,
        [ARCH_SET_CPUID, 0, 0, 0, 0, 0],
    );
    if r.is_some_and(|rax| rax != 0) {
        // ENODEV: the CPU has no CPUID faulting (e.g. AMD). Do not try again.
        s.host.cpuid_faulting = false;
        s.stats.note("cpuid", NO_CPUID_FAULTING);
    }
}
