//! Patching stat call sites to the stat code in the tracee (the stat fast
//! path; see `detrun_shim` and `shim/stat.c`), and `rdtsc` sites to a stub
//! that reads the clock page (see [`after_rdtsc`]).
//!
//! At the exit stop of a trapped `stat`-family call, the site is the 7
//! bytes before the return address. From its third trap in a process
//! image, a `mov eax, NR; syscall` site gets a stub in a page near it
//! (mapped by an injected `mmap`) and its `mov` becomes a jump there. The
//! point at which a site is patched depends only on the program's own calls,
//! so runs stay alike. Not patched: processes sharing memory with another
//! (vfork), sites inside detrun's own code, and any site whose bytes are
//! not the pattern.

use crate::ctx::Ctx;
use crate::sys::{self, Regs};
use detrun_shim as shim;
use libc::pid_t;
use std::collections::BTreeMap;

/// Traps from one site before it is patched: patching costs ~80 µs (an
/// injected mmap and two writes), several traps' worth, and the loader's
/// sites are used twice in a short program and never again.
const PATCH_AT: u32 = 3;

/// Pages tried for a site's stubs, as offsets from the site's page: within
/// a rel32 jump, away from the site's own library and heap.
const NEAR: [i64; 6] = [
    -(1 << 30),
    1 << 30,
    -(3 << 29),
    3 << 29,
    -(1 << 29),
    1 << 29,
];

/// A process image's patch state (copied at fork, reset at exec).
#[derive(Clone, Debug, Default)]
pub struct Patches {
    /// Traps seen per site address, until patched.
    sites: BTreeMap<u64, u32>,
    /// Stub pages: (address, stubs used).
    pages: Vec<(u64, u64)>,
    /// Sync-op entries armed with an int3.
    pub sync: crate::syncpoints::Sites,
}

impl Patches {
    /// Is `rip` in detrun's code in this image: the shared file's code or
    /// a stub page?
    pub fn is_ours(&self, rip: u64) -> bool {
        let file = shim::DATA_ADDR..shim::DATA_ADDR + shim::FILE_SIZE as u64;
        file.contains(&rip) || self.pages.iter().any(|&(p, _)| rip >= p && rip < p + 4096)
    }
}

fn reach(a: u64, b: u64) -> bool {
    (a as i64).wrapping_sub(b as i64).unsigned_abs() < (1 << 31) - 8192
}

/// After a trapped stat call returned in `tid`: count its site, and patch
/// it at its `PATCH_AT`th trap.
pub fn after_stat(s: &mut Ctx, tid: pid_t, regs: &Regs) {
    if !s.clock_page.as_ref().is_some_and(|c| c.stat_on()) {
        return;
    }
    let Some(p) = s.threads.get(&tid).map(|t| t.proc as usize) else {
        return;
    };
    let site = regs.rip.wrapping_sub(7);
    let Some(insn) = counted(s, p, regs.rip, site) else {
        return;
    };
    let nr = regs.orig_rax as u32;
    let mut code = [0u8; 7];
    if sys::read_mem(tid, site, &mut code).is_err() || !shim::is_site(&code, nr) {
        return;
    }
    let stub = |at| {
        Some((
            shim::site_stub(at, site, nr)?,
            shim::site_jump(site, at)?.to_vec(),
        ))
    };
    if install(s, tid, p, insn, site, stub).is_some() {
        s.stats.stat_sites_patched += 1;
    }
}

/// At the fault of an `rdtsc` at `regs.rip` (PR_SET_TSC), already counted
/// as an event: from its `PATCH_AT`th fault, a site that is the whole
/// 64-bit read ([`shim::is_rdtsc_site`]) jumps to a stub that answers from
/// the clock page. True: patched, and `regs` now stand after the site as
/// its three instructions would leave them for `tsc`. Only in a process
/// with one thread, so that no other thread can be stopped inside the
/// 9 bytes that become one jump.
pub fn after_rdtsc(s: &mut Ctx, tid: pid_t, regs: &mut Regs, tsc: u64) -> bool {
    let Some(p) = s.threads.get(&tid).map(|t| t.proc as usize) else {
        return false;
    };
    let site = regs.rip;
    if s.clock_page.is_none() || !one_thread(s, p) {
        return false;
    }
    let Some(insn) = counted(s, p, site, site) else {
        return false;
    };
    let mut code = [0u8; 9];
    if sys::read_mem(tid, site, &mut code).is_err() || !shim::is_rdtsc_site(&code) {
        return false;
    }
    let stub = |at| {
        Some((
            shim::rdtsc_stub(at, site, &code)?,
            shim::rdtsc_jump(site, at)?.to_vec(),
        ))
    };
    if install(s, tid, p, insn, site, stub).is_none() {
        return false;
    }
    s.stats.rdtsc_sites_patched += 1;
    // rax = tsc, rdx = its high half in place; flags of the final or/add.
    regs.rax = tsc;
    regs.rdx = tsc & !0xffff_ffff;
    let (cf, pf, af, zf, sf, of) = (1, 1 << 2, 1 << 4, 1 << 6, 1 << 7, 1 << 11);
    regs.eflags &= !(cf | pf | af | zf | sf | of);
    if (tsc as u8).count_ones().is_multiple_of(2) {
        regs.eflags |= pf;
    }
    if tsc == 0 {
        regs.eflags |= zf;
    }
    if tsc >> 63 == 1 {
        regs.eflags |= sf;
    }
    regs.rip = site + 9;
    true
}

/// At the seccomp stop of a read that will run as it is (a regular file,
/// not fds 0-2): from its site's `PATCH_AT`th trap, a [`shim::READ_SITE`]
/// jumps to a stub that has the stat code make such reads. Some: patched;
/// the registers that send the thread back to the site's start, this call
/// skipped (the stub makes it). One-thread processes only: a thread
/// stopped after the site's `syscall` would return into the jump.
pub fn at_read(s: &mut Ctx, tid: pid_t, regs: &Regs) -> Option<Regs> {
    if !s.clock_page.as_ref().is_some_and(|c| c.stat_on()) {
        return None;
    }
    let p = s.threads.get(&tid).map(|t| t.proc as usize)?;
    if !one_thread(s, p) {
        return None;
    }
    let site = regs.rip.wrapping_sub(4);
    let insn = counted(s, p, regs.rip, site)?;
    let mut code = [0u8; 10];
    if sys::read_mem(tid, site, &mut code).is_err() || code != shim::READ_SITE {
        return None;
    }
    install(s, tid, p, insn, site, |at| {
        Some((
            shim::read_stub(at, site)?,
            shim::read_jump(site, at)?.to_vec(),
        ))
    })?;
    s.stats.read_sites_patched += 1;
    let mut r = *regs;
    r.orig_rax = u64::MAX;
    r.rip = site;
    Some(r)
}

/// Process `p` has one live thread.
fn one_thread(s: &Ctx, p: usize) -> bool {
    s.world
        .threads_of(p as detrun_scheduler::ProcId)
        .iter()
        .filter(|&&v| s.world.is_alive(v))
        .count()
        == 1
}

/// Count a trap from `rip` at `site` in process `p`. At the site's
/// `PATCH_AT`th trap, the syscall instruction to inject through, if the
/// image may be patched: the shim is mapped, `rip` is not detrun's own
/// code, and no other process shares the memory (vfork).
fn counted(s: &mut Ctx, p: usize, rip: u64, site: u64) -> Option<u64> {
    let pi = &s.procs[p];
    let insn = pi.syscall_insn;
    if pi.patch.is_ours(rip) || !pi.shim_mapped || insn == 0 {
        return None;
    }
    let space = pi.space;
    if s.procs
        .iter()
        .enumerate()
        .any(|(i, q)| i != p && q.alive && q.space == space)
    {
        return None;
    }
    let n = s.procs[p].patch.sites.entry(site).or_insert(0);
    *n += 1;
    (*n == PATCH_AT).then_some(insn)
}

/// Patch `site` in process `p`: `code(at)` gives the stub for a slot at
/// `at` and the bytes that replace the site. The stub is written first, so
/// the jump is only written once it leads somewhere.
fn install(
    s: &mut Ctx,
    tid: pid_t,
    p: usize,
    insn: u64,
    site: u64,
    code: impl Fn(u64) -> Option<(Vec<u8>, Vec<u8>)>,
) -> Option<()> {
    let at = stub_slot(s, tid, p, insn, site)?;
    let (stub, jump) = code(at)?;
    sys::write_code(tid, &[(at, &stub), (site, &jump)]).ok()?;
    count_slot(s, p, at);
    Some(())
}

/// Write the stub `code(at)` to a free slot near `site` in process `p`
/// and return its address (a trampoline; nothing jumps there yet).
pub(crate) fn place(
    s: &mut Ctx,
    tid: pid_t,
    p: usize,
    site: u64,
    code: impl Fn(u64) -> Option<Vec<u8>>,
) -> Option<u64> {
    let insn = s.procs[p].syscall_insn;
    if !s.procs[p].shim_mapped || insn == 0 {
        return None;
    }
    let at = stub_slot(s, tid, p, insn, site)?;
    let stub = code(at)?;
    sys::write_code(tid, &[(at, &stub)]).ok()?;
    count_slot(s, p, at);
    Some(at)
}

fn count_slot(s: &mut Ctx, p: usize, at: u64) {
    if let Some(pg) = s.procs[p]
        .patch
        .pages
        .iter_mut()
        .find(|(a, _)| at >= *a && at < *a + 4096)
    {
        pg.1 += 1;
    }
}

/// A free stub slot within reach of `site`, mapping a new page if needed.
fn stub_slot(s: &mut Ctx, tid: pid_t, p: usize, insn: u64, site: u64) -> Option<u64> {
    let per_page = 4096 / shim::STUB_SIZE;
    if let Some(&(a, used)) = s.procs[p]
        .patch
        .pages
        .iter()
        .find(|&&(a, used)| used < per_page && reach(a, site))
    {
        return Some(a + used * shim::STUB_SIZE);
    }
    let base = site & !4095;
    for off in NEAR {
        let at = (base as i64).wrapping_add(off);
        if !(0x1_0000..0x7fff_fff0_0000).contains(&at) {
            continue;
        }
        let at = at as u64;
        let r = crate::vdso::inject(
            tid,
            insn,
            libc::SYS_mmap,
            [
                at,
                4096,
                (libc::PROT_READ | libc::PROT_EXEC) as u64,
                (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE) as u64,
                u64::MAX,
                0,
            ],
        );
        match r {
            Some(a) if a as u64 == at => {
                s.procs[p].patch.pages.push((at, 0));
                return Some(at);
            }
            Some(a) if a > 0 => {
                // An old kernel took the address as a hint: not ours to keep.
                crate::vdso::inject(tid, insn, libc::SYS_munmap, [a as u64, 4096, 0, 0, 0, 0]);
            }
            Some(_) => {}
            None => return None,
        }
    }
    None
}
