//! Synchronization operations as scheduling points: an uncontended
//! `pthread_mutex_lock` makes no syscall, yet that is where races live.
//!
//! When a process first gets a second thread, the entries of the pthread
//! and semaphore functions (found by name in the symbol tables of every
//! mapped image: the dynamic libc, or a static binary's own copy) get an
//! `int3`. A hit is an event of the world like a trapped syscall: it ticks
//! the clock and the policy may switch threads there. The displaced first
//! instruction runs from a trampoline in a stub page (`patch.rs`) followed
//! by a jump back, so a hit costs one stop; an instruction that cannot be
//! relocated (a branch, or out of reach) is stepped over instead. The
//! table is per image: copied at fork, dropped at exec.
//!
//! Atomic read-modify-writes in the program's own code (`lock`-prefixed
//! instructions and `xchg` with memory, found by decoding its `.text`) are
//! points too, before and after: a lock-free structure or a counter bumped
//! with `__sync_fetch_and_add` synchronizes there. Their trampoline ends
//! with a second `int3` (the point after), whose continuation is the
//! instruction after the site.

use crate::backtrace::Mapping;
use crate::ctx::Ctx;
use crate::sys::{self, Regs};
use crate::task::Resume;
use libc::pid_t;
use std::collections::BTreeMap;

/// The functions whose entry is a point.
pub const FUNCS: &[&str] = &[
    "pthread_mutex_lock",
    "pthread_mutex_trylock",
    "pthread_mutex_timedlock",
    "pthread_mutex_clocklock",
    "pthread_mutex_unlock",
    "pthread_rwlock_rdlock",
    "pthread_rwlock_tryrdlock",
    "pthread_rwlock_timedrdlock",
    "pthread_rwlock_clockrdlock",
    "pthread_rwlock_wrlock",
    "pthread_rwlock_trywrlock",
    "pthread_rwlock_timedwrlock",
    "pthread_rwlock_clockwrlock",
    "pthread_rwlock_unlock",
    "pthread_cond_wait",
    "pthread_cond_timedwait",
    "pthread_cond_clockwait",
    "pthread_cond_signal",
    "pthread_cond_broadcast",
    "sem_wait",
    "sem_trywait",
    "sem_timedwait",
    "sem_clockwait",
    "sem_post",
    "pthread_barrier_wait",
    "pthread_spin_lock",
    "pthread_spin_trylock",
    "pthread_spin_unlock",
    "pthread_create",
    "pthread_join",
    "pthread_tryjoin_np",
    "pthread_timedjoin_np",
    "pthread_exit",
    "pthread_once",
];

/// What an armed address is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The entry of `FUNCS[i]`.
    Entry(u16),
    /// An atomic instruction, before it runs.
    Atomic,
    /// The point after an atomic instruction (in its trampoline): go on
    /// at this address.
    After(u64),
}

/// One armed address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Site {
    pub kind: Kind,
    /// The byte the `int3` replaced.
    pub orig: u8,
    /// The trampoline (0: step over the original instruction instead).
    pub tramp: u64,
    /// Times it was a point (atomics are disarmed after `ATOMIC_HITS`).
    pub hits: u32,
}

/// Points an atomic instruction gives before it is disarmed: a hot one
/// (a runtime's spin or reference count, Go's scheduler) would otherwise
/// cost a stop at every execution, and its first executions are where
/// its interleavings differ.
const ATOMIC_HITS: u32 = 64;

/// The armed entries of one process image.
#[derive(Clone, Debug, Default)]
pub struct Sites {
    pub armed: bool,
    pub map: BTreeMap<u64, Site>,
    /// Code of the system's images (those defining sync functions, and
    /// the dynamic loader): an instruction-level point looks for a loop
    /// in the program's code, not there.
    pub system: Vec<(u64, u64)>,
    /// Globals watched by debug registers (`datapoints`), and their
    /// generation (a thread whose own differs is given them).
    pub watch: Vec<crate::datapoints::Watch>,
    pub watch_gen: u64,
}

impl Sites {
    pub fn in_system(&self, rip: u64) -> bool {
        self.system.iter().any(|&(a, b)| rip >= a && rip < b)
    }
}

/// Function offsets per file, parsed once per run: (file, inode) ->
/// (function index, address minus the image's first load address); and the
/// atomic instructions of program files (offset, length).
#[derive(Default)]
pub struct SymCache {
    files: BTreeMap<(String, u64), Vec<(u16, u64)>>,
    code: BTreeMap<(String, u64), Scan>,
}

/// Atomic instructions armed at most per image.
const MAX_ATOMICS: usize = 4096;

/// What a scan of a program's code found, relative to its first load page.
#[derive(Default)]
pub struct Scan {
    /// Atomic read-modify-writes: (offset, length).
    pub atomics: Vec<(u64, usize)>,
    /// Globals some instruction writes by a RIP-relative operand, in a
    /// writable segment: (offset, size of 1, 2, 4 or 8), by offset.
    pub globals: Vec<(u64, u8)>,
}

/// Scan the executable sections `.text*` of an ELF file. gcc and clang put
/// no data in `.text` on x86-64, so a linear decode finds every
/// instruction; a section that does not decode cleanly is left out.
fn file_scan(path: &str) -> Scan {
    with_elf(path, scan_of).unwrap_or_default()
}

/// Parse the ELF file at `path` and give `f` it, its bytes and the page of
/// its first loadable segment (what its addresses are relative to).
fn with_elf<T>(path: &str, f: impl Fn(&goblin::elf::Elf, &[u8], u64) -> T) -> Option<T> {
    let data = std::fs::read(path).ok()?;
    let elf = goblin::elf::Elf::parse(&data).ok()?;
    let first = elf
        .program_headers
        .iter()
        .find(|p| p.p_type == goblin::elf::program_header::PT_LOAD)?;
    let load = first.p_vaddr & !4095;
    Some(f(&elf, &data, load))
}

fn scan_of(elf: &goblin::elf::Elf, data: &[u8], load: u64) -> Scan {
    use iced_x86::{Decoder, DecoderOptions, InstructionInfoFactory, Mnemonic, OpAccess, OpKind};
    let writable: Vec<(u64, u64)> = elf
        .program_headers
        .iter()
        .filter(|h| {
            h.p_type == goblin::elf::program_header::PT_LOAD
                && h.p_flags & goblin::elf::program_header::PF_W != 0
        })
        .map(|h| (h.p_vaddr, h.p_vaddr.saturating_add(h.p_memsz)))
        .collect();
    let mut atomics = Vec::new();
    let mut globals = BTreeMap::new();
    let mut info = InstructionInfoFactory::new();
    for sh in &elf.section_headers {
        let name = elf.shdr_strtab.get_at(sh.sh_name).unwrap_or("");
        let exec = sh.sh_flags & u64::from(goblin::elf::section_header::SHF_EXECINSTR) != 0;
        if !exec
            || sh.sh_type != goblin::elf::section_header::SHT_PROGBITS
            || !name.starts_with(".text")
        {
            continue;
        }
        let (off, size) = (sh.sh_offset as usize, sh.sh_size as usize);
        let Some(code) = data.get(off..off.saturating_add(size)) else {
            continue;
        };
        let (mut found, mut written) = (Vec::new(), Vec::new());
        let mut clean = true;
        let mut d = Decoder::with_ip(64, code, sh.sh_addr, DecoderOptions::NONE);
        while d.can_decode() {
            let insn = d.decode();
            if insn.is_invalid() {
                clean = false;
                break;
            }
            let mem = (0..insn.op_count()).any(|i| insn.op_kind(i) == OpKind::Memory);
            if mem && (insn.has_lock_prefix() || insn.mnemonic() == Mnemonic::Xchg) {
                found.push((insn.ip().wrapping_sub(load), insn.len()));
            }
            if mem && insn.is_ip_rel_memory_operand() && insn.op0_kind() == OpKind::Memory {
                let target = insn.ip_rel_memory_address();
                let size = insn.memory_size().size();
                let stored = info.info(&insn).used_memory().iter().any(|m| {
                    matches!(
                        m.access(),
                        OpAccess::Write | OpAccess::ReadWrite | OpAccess::CondWrite
                    )
                });
                let in_data = writable.iter().any(|&(a, b)| target >= a && target < b);
                if stored && in_data && matches!(size, 1 | 2 | 4 | 8) {
                    written.push((target.wrapping_sub(load), size as u8));
                }
            }
        }
        if clean {
            atomics.extend(found);
            for (t, size) in written {
                let e = globals.entry(t).or_insert(size);
                *e = (*e).max(size);
            }
        }
        if atomics.len() >= MAX_ATOMICS {
            atomics.truncate(MAX_ATOMICS);
            break;
        }
    }
    Scan {
        atomics,
        globals: globals.into_iter().collect(),
    }
}

/// The functions of [`FUNCS`] an ELF file defines, relative to the page of
/// its first loadable segment.
fn file_funcs(path: &str) -> Vec<(u16, u64)> {
    with_elf(path, |elf, _, load| funcs_of(elf, load)).unwrap_or_default()
}

fn funcs_of(elf: &goblin::elf::Elf, load: u64) -> Vec<(u16, u64)> {
    let mut v = Vec::new();
    for (tab, strs) in [(&elf.dynsyms, &elf.dynstrtab), (&elf.syms, &elf.strtab)] {
        for s in tab.iter() {
            if s.st_value == 0 || s.st_shndx == 0 || !s.is_function() {
                continue;
            }
            let Some(name) = strs.get_at(s.st_name) else {
                continue;
            };
            if let Some(i) = FUNCS.iter().position(|f| *f == name) {
                v.push((i as u16, s.st_value.wrapping_sub(load)));
            }
        }
    }
    v.sort();
    v.dedup_by_key(|x| x.1);
    v
}

fn inode(path: &str) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).map_or(0, |m| m.ino())
}

/// Address ranges [start, end).
type Ranges = Vec<(u64, u64)>;

/// The entries to arm in the mappings `maps`: (address, function); and
/// the code ranges of the images that define them (when they are shared
/// libraries) and of the dynamic loader.
fn entries(cache: &mut SymCache, maps: &[Mapping], exe: &str) -> (Vec<(u64, u16)>, Ranges) {
    let mut out = Vec::new();
    let mut system = Vec::new();
    for m in maps {
        if m.exec && m.path.contains("/ld-linux") {
            system.push((m.start, m.end));
        }
    }
    let mut seen: Vec<&str> = Vec::new();
    for m in maps {
        if !m.exec || m.path.is_empty() || m.path.starts_with('[') || seen.contains(&&*m.path) {
            continue;
        }
        seen.push(&m.path);
        if m.path.starts_with("/memfd:") || m.path.contains("(deleted)") {
            continue;
        }
        // The image starts at its lowest mapping, which maps offset 0.
        let Some(low) = maps
            .iter()
            .filter(|x| x.path == m.path)
            .min_by_key(|x| x.start)
        else {
            continue;
        };
        if low.offset != 0 {
            continue;
        }
        let key = (m.path.clone(), inode(&m.path));
        let funcs = cache
            .files
            .entry(key)
            .or_insert_with(|| file_funcs(&m.path));
        if !funcs.is_empty() && m.path != exe {
            for x in maps.iter().filter(|x| x.exec && x.path == m.path) {
                system.push((x.start, x.end));
            }
        }
        for &(f, off) in funcs.iter() {
            let addr = low.start.wrapping_add(off);
            let in_code = maps
                .iter()
                .any(|x| x.exec && x.path == m.path && addr >= x.start && addr + 16 <= x.end);
            if in_code {
                out.push((addr, f));
            }
        }
    }
    (out, system)
}

/// The first instruction at `site`, relocated to `at`, then a jump back
/// after it (or, `stop`, an int3). None when it cannot run elsewhere (a
/// branch, a call, or a relative operand out of reach).
fn trampoline(code: &[u8], site: u64, at: u64, stop: bool) -> Option<Vec<u8>> {
    use iced_x86::{BlockEncoder, BlockEncoderOptions, Code, Decoder, DecoderOptions};
    use iced_x86::{FlowControl, Instruction, InstructionBlock};
    let mut d = Decoder::with_ip(64, code, site, DecoderOptions::NONE);
    let insn = d.decode();
    if insn.is_invalid() || insn.flow_control() != FlowControl::Next {
        return None;
    }
    let next = if stop {
        Instruction::with(Code::Int3)
    } else {
        Instruction::with_branch(Code::Jmp_rel32_64, site + insn.len() as u64).ok()?
    };
    let block = [insn, next];
    let r = BlockEncoder::encode(
        64,
        InstructionBlock::new(&block, at),
        BlockEncoderOptions::NONE,
    )
    .ok()?;
    (r.code_buffer.len() as u64 <= detrun_shim::STUB_SIZE).then_some(r.code_buffer)
}

/// Arm the entries of the process of `tid` (which is at a syscall stop,
/// where calls can be injected). Once per image; not in an image whose
/// memory another process shares (vfork), as for patched sites.
pub fn arm(s: &mut Ctx, tid: pid_t) {
    let Some(p) = s.threads.get(&tid).map(|t| t.proc as usize) else {
        return;
    };
    if s.procs[p].patch.sync.armed || !s.cfg.sync_points {
        return;
    }
    s.procs[p].patch.sync.armed = true;
    let space = s.procs[p].space;
    if s.procs
        .iter()
        .enumerate()
        .any(|(i, q)| i != p && q.alive && q.space == space)
    {
        return;
    }
    let tgid = s.procs[p].tgid;
    let maps = crate::backtrace::maps(tgid);
    let exe = std::fs::read_link(format!("/proc/{tgid}/exe"))
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (found, system) = entries(&mut s.sync_syms, &maps, &exe);
    s.procs[p].patch.sync.system = system;
    for (addr, func) in found {
        arm_one(s, tid, p, addr, Kind::Entry(func));
    }
    let (atomics, globals) = program_code(&mut s.sync_syms, &maps, tgid);
    for addr in atomics {
        arm_one(s, tid, p, addr, Kind::Atomic);
    }
    crate::datapoints::choose(s, tid, p, &globals);
}

/// The atomic instructions and the written globals of the program's own
/// image, at their addresses in this process.
fn program_code(cache: &mut SymCache, maps: &[Mapping], tgid: pid_t) -> (Vec<u64>, Vec<(u64, u8)>) {
    let none = (Vec::new(), Vec::new());
    let Ok(exe) = std::fs::read_link(format!("/proc/{tgid}/exe")) else {
        return none;
    };
    let exe = exe.to_string_lossy().into_owned();
    let Some(low) = maps
        .iter()
        .filter(|m| m.path == exe)
        .min_by_key(|m| m.start)
    else {
        return none;
    };
    if low.offset != 0 {
        return none;
    }
    let key = (exe.clone(), inode(&exe));
    let scan = cache.code.entry(key).or_insert_with(|| file_scan(&exe));
    let atomics = scan
        .atomics
        .iter()
        .map(|&(off, _)| low.start.wrapping_add(off))
        .filter(|&a| {
            maps.iter()
                .any(|m| m.exec && m.path == exe && a >= m.start && a < m.end)
        })
        .collect();
    let globals = scan
        .globals
        .iter()
        .map(|&(off, size)| (low.start.wrapping_add(off), size))
        .collect();
    (atomics, globals)
}

/// Arm one address: its int3, and the trampoline (an atomic needs one).
fn arm_one(s: &mut Ctx, tid: pid_t, p: usize, addr: u64, kind: Kind) {
    if s.procs[p].patch.sync.map.contains_key(&addr) || s.procs[p].patch.is_ours(addr) {
        return;
    }
    let mut code = [0u8; 16];
    if sys::read_mem(tid, addr, &mut code).is_err() || code[0] == 0xCC {
        return;
    }
    let atomic = kind == Kind::Atomic;
    let tramp =
        crate::patch::place(s, tid, p, addr, |at| trampoline(&code, addr, at, atomic)).unwrap_or(0);
    let len = iced_x86::Decoder::with_ip(64, &code, addr, iced_x86::DecoderOptions::NONE)
        .decode()
        .len() as u64;
    if atomic && tramp == 0 {
        return;
    }
    if sys::write_code(tid, &[(addr, &[0xCC])]).is_err() {
        return;
    }
    let sites = &mut s.procs[p].patch.sync.map;
    sites.insert(
        addr,
        Site {
            kind,
            orig: code[0],
            tramp,
            hits: 0,
        },
    );
    if atomic {
        // The trampoline's int3 after the relocated instruction: the
        // trampoline's bytes are the instruction's length or a little more
        // (a relocated displacement keeps its size), so find it.
        if let Some(relocated) = crate::insn::decode(tid, tramp) {
            sites.insert(
                tramp + relocated.len() as u64,
                Site {
                    kind: Kind::After(addr + len),
                    orig: 0xCC,
                    tramp: 0,
                    hits: 0,
                },
            );
        }
    }
    s.stats.sync_sites += 1;
}

/// The armed entry whose `int3` `tid` just executed (its `rip` is one
/// past it), if that is what the SIGTRAP was.
pub fn hit(s: &Ctx, tid: pid_t, regs: &Regs) -> Option<(u64, Site)> {
    let p = s.threads.get(&tid)?.proc as usize;
    let site = regs.rip.wrapping_sub(1);
    s.procs[p].patch.sync.map.get(&site).map(|x| (site, *x))
}

/// Is `addr` an armed entry in the process of `tid`?
pub fn is_site(s: &Ctx, tid: pid_t, addr: u64) -> bool {
    s.threads
        .get(&tid)
        .is_some_and(|t| s.procs[t.proc as usize].patch.sync.map.contains_key(&addr))
}

/// `tid` stopped at the armed entry `site`: move it past the `int3`, then
/// it is a scheduling point.
pub fn on_hit(s: &mut Ctx, tid: pid_t, mut regs: Regs, site: u64, x: Site) {
    if x.kind == Kind::Atomic {
        disarm_if_hot(s, tid, site);
    }
    if let Kind::After(cont) = x.kind {
        regs.rip = cont;
        if sys::set_regs(tid, &regs).is_err() {
            return;
        }
    } else if x.tramp != 0 {
        regs.rip = x.tramp;
        if sys::set_regs(tid, &regs).is_err() {
            return;
        }
    } else if !step_over(s, tid, regs, site, x.orig) {
        return;
    }
    s.stats.sync_points += 1;
    if s.coverage.is_some() {
        cover(s, tid, &regs, x);
    }
    let Some(t) = s.threads.get_mut(&tid) else {
        return;
    };
    if let Kind::Entry(f) = x.kind {
        t.last_sync = Some((FUNCS[f as usize], regs.rdi));
    }
    match x.kind {
        Kind::Entry(f) => point(s, tid, FUNCS[f as usize], regs.rdi, false),
        Kind::Atomic => point(s, tid, "atomic", site, false),
        Kind::After(_) => point(s, tid, "atomic-done", site, false),
    }
}

/// A point between syscalls (`what` on `obj`: a sync op, an atomic, a
/// watched global): an event of the world like a trapped syscall, where
/// the policy may switch threads (`data`: an access of a watched global).
pub fn point(s: &mut Ctx, tid: pid_t, what: &str, obj: u64, data: bool) {
    let Some(vt) = s.threads.get(&tid).map(|t| t.vt) else {
        return;
    };
    let expired = if data {
        s.world.tick_data(vt)
    } else {
        s.world.tick(vt)
    };
    let t = s.world.clock.elapsed();
    if let Some(tr) = s.trace.as_mut() {
        tr.sync_point(t, vt, what, obj);
    }
    if expired {
        s.yield_running(tid, Resume::Cont(0));
    } else {
        s.continue_running(tid);
    }
}

/// The coverage event of a point (`coverage.rs`): a sync op's object is
/// its first argument and its site the return address; an atomic's
/// object is the memory it changes (its relocated copy in the trampoline
/// names the same address). Calls with no object are not events.
fn cover(s: &mut Ctx, tid: pid_t, regs: &Regs, x: Site) {
    let (op, obj, site) = match x.kind {
        Kind::Entry(f) => {
            let name = FUNCS[f as usize];
            if !OBJECT_FUNCS.iter().any(|p| name.starts_with(p)) {
                return;
            }
            let Ok(ret) = sys::read_u64(tid, regs.rsp) else {
                return;
            };
            (u64::from(f), regs.rdi, ret)
        }
        Kind::Atomic => {
            let Some(obj) = crate::insn::memory_target(tid, regs, x.tramp) else {
                return;
            };
            (FUNCS.len() as u64, obj, regs.rip.wrapping_sub(1))
        }
        Kind::After(_) => return,
    };
    let Some(t) = s.threads.get(&tid) else {
        return;
    };
    let (space, vt) = (s.procs[t.proc as usize].space, t.vt);
    if let Some(c) = s.coverage.as_mut() {
        c.event(space, obj, vt, op, site);
    }
}

/// Prefixes of the functions whose first argument is a synchronization
/// object.
const OBJECT_FUNCS: &[&str] = &[
    "pthread_mutex_",
    "pthread_rwlock_",
    "pthread_cond_",
    "sem_",
    "pthread_barrier_",
    "pthread_spin_",
    "pthread_once",
];

/// Count a point of the atomic at `site`; at its `ATOMIC_HITS`th, put
/// the original byte back (this execution still goes through the
/// trampoline, as does any thread already in it).
fn disarm_if_hot(s: &mut Ctx, tid: pid_t, site: u64) {
    let Some(p) = s.threads.get(&tid).map(|t| t.proc as usize) else {
        return;
    };
    let Some(x) = s.procs[p].patch.sync.map.get_mut(&site) else {
        return;
    };
    x.hits += 1;
    if x.hits >= ATOMIC_HITS {
        let orig = x.orig;
        if sys::write_code(tid, &[(site, &[orig])]).is_ok() {
            s.procs[p].patch.sync.map.remove(&site);
        }
    }
}

/// Run the original instruction at `site` by one step with the byte put
/// back. False when the thread did not simply step (it died, or a signal
/// came: that stop went to the loop).
fn step_over(s: &mut Ctx, tid: pid_t, mut regs: Regs, site: u64, orig: u8) -> bool {
    regs.rip = site;
    if sys::set_regs(tid, &regs).is_err() || sys::write_code(tid, &[(site, &[orig])]).is_err() {
        return false;
    }
    let ok = s.step(tid).is_ok();
    let st = if ok { s.wait_stop(tid) } else { None };
    let _ = sys::write_code(tid, &[(site, &[0xCC])]);
    match st {
        Some(st)
            if libc::WIFSTOPPED(st) && libc::WSTOPSIG(st) == libc::SIGTRAP && st >> 16 == 0 =>
        {
            true
        }
        Some(st) => {
            (s.hooks.on_stop)(s, tid, st);
            false
        }
        None => false,
    }
}
