//! The time fast path (see the `detrun_shim` crate): the shared clock page
//! and, at each exec, mapping it into the new image and patching the vDSO.
//!
//! If any step fails for an image, its vDSO is hidden instead
//! (`AT_SYSINFO_EHDR` becomes `AT_IGNORE`), and libc traps every time call.

use crate::ctx::Ctx;
use crate::sys;
use detrun_shim as shim;
use libc::pid_t;
use std::os::fd::AsRawFd;

/// How many calls the stubs may answer between two stops (bounds the wall
/// time a thread can spend reading the clock without the supervisor).
const CALLS_PER_STOP: u64 = 4096;

/// The supervisor's mapping of the file every tracee maps at
/// [`shim::DATA_ADDR`].
pub struct ClockPage {
    base: *mut u64,
    pub path: std::path::PathBuf,
}

impl ClockPage {
    pub fn create(dir: &std::path::Path, clock: &detrun_scheduler::Clock) -> Option<ClockPage> {
        let path = dir.join("clock");
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .ok()?;
        f.set_len(shim::FILE_SIZE as u64).ok()?;
        // SAFETY: a shared mapping of a file we just sized.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                shim::FILE_SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return None;
        }
        let page = ClockPage {
            base: p.cast(),
            path,
        };
        let code = shim::code_image();
        // SAFETY: the code part of our mapping, CODE_BYTES long.
        unsafe {
            std::ptr::copy_nonoverlapping(
                code.as_ptr(),
                p.cast::<u8>().add(shim::CODE_OFF),
                shim::CODE_BYTES,
            )
        };
        let real = clock.realtime().wrapping_sub(clock.monotonic());
        for id in 0..8 {
            let off = match id {
                0 | 5 => real,      // REALTIME, REALTIME_COARSE
                1 | 4 | 6 | 7 => 0, // MONOTONIC, _RAW, _COARSE, BOOTTIME
                _ => u64::MAX,      // CPU clocks: trapped
            };
            page.set(shim::OFFSETS + id, off);
        }
        page.set(shim::COST, clock.event_cost);
        page.set(shim::INO_NEXT, detrun_scheduler::fsview::FIRST_INO);
        Some(page)
    }

    /// Let the stat code answer (see `shim/stat.c`).
    pub fn enable_stat(&self, fsv: &detrun_scheduler::fsview::FsView, py_real: bool) {
        // Stamps from the start's tick on are the supervisor's to judge.
        self.set(shim::REAL_START, fsv.window_lo);
        self.set(shim::PREEXISTING, fsv.preexisting);
        self.set(shim::PY_REAL, py_real as u64);
        self.set(shim::STAT_ON, 1);
    }

    pub fn stat_on(&self) -> bool {
        self.get(shim::STAT_ON) != 0
    }

    /// Virtual number of device `dev` (major << 32 | minor), numbering it
    /// if new; None: the page's slots are full.
    pub fn dev(&self, dev: u64) -> Option<u64> {
        let n = self.get(shim::DEV_COUNT) as usize;
        for i in 0..n.min(shim::DEV_SLOTS) {
            if self.get(shim::DEVS + 2 * i) == dev {
                return Some(self.get(shim::DEVS + 2 * i + 1));
            }
        }
        if n >= shim::DEV_SLOTS {
            return None;
        }
        self.set(shim::DEVS + 2 * n, dev);
        self.set(shim::DEVS + 2 * n + 1, n as u64 + 1);
        self.set(shim::DEV_COUNT, n as u64 + 1);
        Some(n as u64 + 1)
    }

    /// Devices numbered in the page.
    pub fn devs(&self) -> u64 {
        self.get(shim::DEV_COUNT).min(shim::DEV_SLOTS as u64)
    }

    /// Virtual inode of (dev, ino) from the table, entering it if there is
    /// room; None: not in the table, which is full.
    pub fn ino(&self, dev: u64, ino: u64) -> Option<u64> {
        let t = shim::TABLE_OFF / 8;
        let mut i = shim::ino_slot(dev, ino);
        for _ in 0..shim::TABLE_ENTRIES {
            let e = t + 3 * i;
            if self.get(e + 2) == 0 {
                if self.get(shim::INO_COUNT) as usize >= shim::TABLE_LIMIT {
                    return None;
                }
                let v = self.next_ino();
                self.set(e, dev);
                self.set(e + 1, ino);
                self.set(e + 2, v);
                self.set(shim::INO_COUNT, self.get(shim::INO_COUNT) + 1);
                return Some(v);
            }
            if self.get(e) == dev && self.get(e + 1) == ino {
                return Some(self.get(e + 2));
            }
            i = (i + 1) % shim::TABLE_ENTRIES;
        }
        None
    }

    /// The next virtual inode number (shared with the stat code).
    pub fn next_ino(&self) -> u64 {
        let v = self.get(shim::INO_NEXT);
        self.set(shim::INO_NEXT, v + 1);
        v
    }

    /// The numbering state (data page and table), for a checkpoint.
    pub fn save_tables(&self) -> Vec<u8> {
        let mut v = vec![0u8; shim::CODE_OFF];
        // SAFETY: the data page and table, CODE_OFF bytes of our mapping.
        unsafe { std::ptr::copy_nonoverlapping(self.base.cast::<u8>(), v.as_mut_ptr(), v.len()) };
        v
    }

    /// Back to a saved numbering state (the clock slots are published
    /// before every resume anyway).
    pub fn restore_tables(&self, saved: &[u8]) {
        if saved.len() == shim::CODE_OFF {
            // SAFETY: as in `save_tables`.
            unsafe {
                std::ptr::copy_nonoverlapping(saved.as_ptr(), self.base.cast::<u8>(), saved.len())
            };
        }
    }

    fn set(&self, slot: usize, v: u64) {
        // SAFETY: slot < CODE_OFF / 8 lies in the data page or the inode
        // table; volatile because the
        // tracees write it too.
        unsafe { self.base.add(slot).write_volatile(v) }
    }

    fn get(&self, slot: usize) -> u64 {
        // SAFETY: as in `set`.
        unsafe { self.base.add(slot).read_volatile() }
    }

    /// Before a tracee runs: the clock and how far the stubs may take it.
    pub fn publish(&self, mono: u64, limit: u64) {
        self.set(shim::MONO, mono);
        self.set(shim::LIMIT, limit);
    }

    /// A time stub made its call trapped because the clock reached the
    /// limit (not because it does not answer that clock).
    pub fn at_limit(&self, clock: Option<u64>) -> bool {
        let answered =
            clock.is_none_or(|c| c <= 7 && self.get(shim::OFFSETS + c as usize) != u64::MAX);
        answered
            && self.get(shim::MONO).saturating_add(self.get(shim::COST)) >= self.get(shim::LIMIT)
    }

    /// At a stop: where the stubs took the clock, and how many time, stat
    /// and read calls they answered since the last look.
    pub fn absorb(&self) -> (u64, [u64; 3]) {
        let mut n = [0; 3];
        for (i, slot) in [shim::CALLS, shim::STAT_CALLS, shim::READ_CALLS]
            .into_iter()
            .enumerate()
        {
            n[i] = self.get(slot);
            if n[i] != 0 {
                self.set(slot, 0);
            }
        }
        (self.get(shim::MONO), n)
    }
}

impl Drop for ClockPage {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping.
        unsafe { libc::munmap(self.base.cast(), shim::FILE_SIZE) };
    }
}

impl Ctx {
    /// Write the clock into the shared page before resuming a tracee.
    pub fn publish_clock(&self) {
        if let Some(p) = &self.clock_page {
            let mono = self.world.clock.monotonic();
            let bound =
                mono.saturating_add(self.world.clock.event_cost.saturating_mul(CALLS_PER_STOP));
            let mut limit = bound;
            if let Some(d) = self.world.next_deadline() {
                limit = limit.min(d);
            }
            if let Some(d) = self.world.net.next_due() {
                limit = limit.min(d);
            }
            p.publish(mono, limit);
        }
    }

    /// Take in the time the stubs spent, at a stop.
    pub fn absorb_clock(&mut self) {
        if let Some(p) = &self.clock_page {
            let (mono, [calls, stats, reads]) = p.absorb();
            self.world.clock.advance_to(mono);
            self.stats.fast_time_calls += calls;
            self.stats.fast_stat_calls += stats;
            self.stats.fast_read_calls += reads;
        }
    }
}

/// Run one syscall in `tid` through the `syscall` instruction at `insn`,
/// letting it pass the seccomp filter. Registers are restored after.
pub fn inject(tid: pid_t, insn: u64, nr: i64, args: [u64; 6]) -> Option<i64> {
    crate::checkpoint::inject_raw(tid, insn, nr, args)
        .ok()
        .map(|o| o.ret)
}

/// Map the clock page into the image that just exec'd in `tid` and patch
/// its vDSO at `vdso`. False: the vDSO must be hidden instead.
pub fn install(s: &mut Ctx, tid: pid_t, vdso: u64, insn: u64) -> bool {
    let Some(path) = s.clock_page.as_ref().map(|p| p.path.clone()) else {
        return false;
    };
    let Ok(regs) = sys::get_regs(tid) else {
        return false;
    };
    // The path, below the red zone of the fresh stack.
    use std::os::unix::ffi::OsStrExt;
    let mut name = path.as_os_str().as_bytes().to_vec();
    name.push(0);
    if name.len() > 1024 {
        return false;
    }
    let at = (regs.rsp - 256 - name.len() as u64) & !15;
    if sys::write_mem(tid, at, &name).is_err() {
        return false;
    }
    let Some(fd) = inject(
        tid,
        insn,
        libc::SYS_openat,
        [
            libc::AT_FDCWD as u64,
            at,
            (libc::O_RDWR | libc::O_CLOEXEC) as u64,
            0,
            0,
            0,
        ],
    )
    .filter(|&fd| fd >= 0) else {
        return false;
    };
    let map = |addr: u64, len: usize, prot: i32, off: usize| {
        inject(
            tid,
            insn,
            libc::SYS_mmap,
            [
                addr,
                len as u64,
                prot as u64,
                (libc::MAP_SHARED | libc::MAP_FIXED_NOREPLACE) as u64,
                fd as u64,
                off as u64,
            ],
        ) == Some(addr as i64)
    };
    // The data page and the inode table; the code.
    let ok = map(
        shim::DATA_ADDR,
        shim::CODE_OFF,
        libc::PROT_READ | libc::PROT_WRITE,
        0,
    ) && map(
        shim::CODE_ADDR,
        shim::CODE_BYTES,
        libc::PROT_READ | libc::PROT_EXEC,
        shim::CODE_OFF,
    );
    inject(tid, insn, libc::SYS_close, [fd as u64, 0, 0, 0, 0, 0]);
    ok && patch(tid, vdso)
}

/// A function of a vDSO image as loaded: its name without `__vdso_`, its
/// address and size (0: unknown).
pub struct VdsoFn {
    pub name: String,
    pub addr: u64,
    pub size: u64,
}

/// The functions of the vDSO image `img` loaded at `base`, one per address.
pub fn functions(img: &[u8], base: u64) -> Option<Vec<VdsoFn>> {
    let elf = goblin::elf::Elf::parse(img).ok()?;
    // Symbol values are link addresses; the image is loaded at `base`.
    let link = elf
        .program_headers
        .iter()
        .find(|p| p.p_type == goblin::elf::program_header::PT_LOAD)
        .map_or(0, |p| p.p_vaddr);
    let mut out: Vec<VdsoFn> = Vec::new();
    for sym in elf.dynsyms.iter() {
        if sym.st_type() != goblin::elf::sym::STT_FUNC || sym.st_value == 0 {
            continue;
        }
        let Some(name) = elf.dynstrtab.get_at(sym.st_name) else {
            continue;
        };
        let addr = (base + sym.st_value).checked_sub(link)?;
        if !out.iter().any(|f| f.addr == addr) {
            out.push(VdsoFn {
                name: name.trim_start_matches("__vdso_").to_string(),
                addr,
                size: sym.st_size,
            });
        }
    }
    Some(out)
}

/// The syscall a vDSO function stands for, for those that read the TSC or
/// the CPU (the others, getrandom for one, have no such syscall twin here).
pub fn syscall_of(name: &str) -> Option<i64> {
    Some(match name {
        "clock_gettime" => libc::SYS_clock_gettime,
        "gettimeofday" => libc::SYS_gettimeofday,
        "time" => libc::SYS_time,
        "clock_getres" => libc::SYS_clock_getres,
        "getcpu" => libc::SYS_getcpu,
        _ => return None,
    })
}

/// Point every function of the vDSO at `base` at a stub.
fn patch(tid: pid_t, base: u64) -> bool {
    let mut img = vec![0u8; 8192];
    if sys::read_mem(tid, base, &mut img[..4096]).is_err() {
        return false;
    }
    if sys::read_mem(tid, base + 4096, &mut img[4096..]).is_err() {
        img.truncate(4096);
    }
    let Some(funcs) = functions(&img, base) else {
        return false;
    };
    let mut patches: Vec<(u64, Vec<u8>)> = Vec::new();
    for f in &funcs {
        let stub = match f.name.as_str() {
            "clock_gettime" => Some(shim::CLOCK_GETTIME_AT),
            "gettimeofday" => Some(shim::GETTIMEOFDAY_AT),
            "time" => Some(shim::TIME_AT),
            _ => None,
        };
        let jump = stub.map(|at| shim::jump_to(shim::CODE_ADDR + at));
        // A jump that does not fit in the function becomes the syscall.
        let code = match (jump, syscall_of(&f.name)) {
            (Some(j), _) if f.size as usize >= j.len() => j,
            (_, Some(nr)) => shim::syscall_stub(nr as u32),
            _ => shim::ENOSYS_STUB.to_vec(),
        };
        if f.size != 0 && (f.size as usize) < code.len() {
            return false;
        }
        patches.push((f.addr, code));
    }
    if patches.is_empty() {
        return false;
    }
    // A failure leaves the vDSO half patched: the caller hides it.
    let pieces: Vec<(u64, &[u8])> = patches.iter().map(|(a, c)| (*a, c.as_slice())).collect();
    sys::write_code(tid, &pieces).is_ok()
}
