//! The supervisor runs with `rdtsc` faulting, like its tracees.
//!
//! Tracees have `PR_SET_TSC(PR_TSC_SIGSEGV)`. When the CPU switches between
//! a task with TSC reads disabled and one without, the kernel rewrites CR4,
//! which in a virtual machine is a trap to the hypervisor: measured here it
//! adds ~3 µs to every intercepted syscall (two switches each). With the
//! same setting on the supervisor thread there is nothing to rewrite.
//!
//! The supervisor itself must then not execute `rdtsc`: its own vDSO time
//! functions (which read the TSC) are turned into plain syscalls first. If
//! an `rdtsc` runs anyway, a SIGSEGV handler turns TSC faulting off for the
//! supervisor and lets the instruction run again: slower, never wrong.

use std::os::unix::fs::FileExt;

/// Patch our vDSO and make TSC reads fault. False: left as it was.
pub fn enter() -> bool {
    if !patch_own_vdso() {
        return false;
    }
    install_safety_net();
    // SAFETY: a prctl on our own thread.
    unsafe { libc::prctl(libc::PR_SET_TSC, libc::PR_TSC_SIGSEGV, 0, 0, 0) == 0 }
}

/// TSC reads allowed again (the patched vDSO stays: plain syscalls).
pub fn leave() {
    // SAFETY: a prctl on our own thread.
    unsafe { libc::prctl(libc::PR_SET_TSC, libc::PR_TSC_ENABLE, 0, 0, 0) };
}

fn patch_own_vdso() -> bool {
    // SAFETY: reading our own auxiliary vector.
    let base = unsafe { libc::getauxval(libc::AT_SYSINFO_EHDR) };
    if base == 0 {
        return true; // no vDSO: time calls are syscalls already
    }
    let Ok(mem) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/proc/self/mem")
    else {
        return false;
    };
    let mut img = vec![0u8; 8192];
    let n = mem.read_at(&mut img, base).unwrap_or(0);
    if n < 4096 {
        return false;
    }
    img.truncate(n);
    let Some(funcs) = crate::vdso::functions(&img, base) else {
        return false;
    };
    let mut patches = Vec::new();
    for f in &funcs {
        // getrandom and the others do not read the TSC.
        let Some(nr) = crate::vdso::syscall_of(&f.name) else {
            continue;
        };
        let code = detrun_shim::syscall_stub(nr as u32);
        if f.size != 0 && (f.size as usize) < code.len() {
            return false;
        }
        patches.push((f.addr, code));
    }
    patches
        .iter()
        .all(|(addr, code)| mem.write_at(code, *addr).is_ok_and(|w| w == code.len()))
}

extern "C" fn on_segv(_: i32, _: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid ucontext; we read our own code at
    // the faulting instruction and only make async-signal-safe calls.
    unsafe {
        let uc = ctx.cast::<libc::ucontext_t>();
        let rip = (*uc).uc_mcontext.gregs[libc::REG_RIP as usize] as *const u8;
        let b = [*rip, *rip.add(1), *rip.add(2)];
        let tsc = b[..2] == [0x0f, 0x31] || b == [0x0f, 0x01, 0xf9];
        if tsc {
            libc::prctl(libc::PR_SET_TSC, libc::PR_TSC_ENABLE, 0, 0, 0);
        } else {
            // A real fault: let it happen as it would have.
            libc::signal(libc::SIGSEGV, libc::SIG_DFL);
        }
    }
}

fn install_safety_net() {
    // SAFETY: installing a handler that only reads our own code and calls
    // prctl/signal.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_segv as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO;
        libc::sigaction(libc::SIGSEGV, &sa, std::ptr::null_mut());
    }
}
