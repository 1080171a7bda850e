//! Facts read from the host for the supervisor's own use: its clocks at the
//! start, a thread's CPU time and state, CPU pinning and CPUID faulting.
//! None of them reaches the guest.

use libc::pid_t;

/// Private_Dirty of a process, from /proc/PID/smaps_rollup (KB).
pub(crate) fn private_dirty_kb(pid: pid_t) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .ok()
        .and_then(|s| {
            let l = s.lines().find(|l| l.starts_with("Private_Dirty:"))?;
            l.split_whitespace().nth(1)?.parse().ok()
        })
        .unwrap_or(0)
}

/// The host's realtime clock, read once at start (for telling files that
/// predate the run from files written during it).
static START: std::sync::OnceLock<(u64, u64)> = std::sync::OnceLock::new();

/// Note the host's time at process start (call first thing in `main`):
/// files stamped up to then predate the run.
pub fn note_start() {
    let _ = START.set(start_now());
}

pub(crate) fn start_now() -> (u64, u64) {
    (
        now_ns(libc::CLOCK_REALTIME_COARSE),
        now_ns(libc::CLOCK_REALTIME),
    )
}

/// (coarse, fine) realtime at the start. File systems stamp with the
/// coarse clock (up to a tick or more behind), or finer when a stamp was
/// just looked at (multigrain timestamps), never past the fine clock: a
/// stamp after the fine reading is the run's; one between the two readings
/// may be the run's first moments (see `FsView::touch`).
pub fn start_clocks() -> (u64, u64) {
    *START.get_or_init(start_now)
}

pub(crate) fn now_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime into a local timespec.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// CPU time a thread has used, from /proc/TID/schedstat (ns).
pub(crate) fn thread_cpu_ns(tid: pid_t) -> u64 {
    std::fs::read_to_string(format!("/proc/{tid}/schedstat"))
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

pub(crate) fn proc_state(tid: pid_t) -> Option<char> {
    let s = std::fs::read_to_string(format!("/proc/{tid}/stat")).ok()?;
    let after = s.rsplit_once(')')?.1;
    after.trim_start().chars().next()
}

pub(crate) fn pin_cpu(cpu: Option<usize>) {
    // SAFETY: querying and setting our own affinity with a local cpu_set_t.
    unsafe {
        let c = cpu.unwrap_or_else(|| {
            let c = libc::sched_getcpu();
            if c < 0 {
                0
            } else {
                c as usize
            }
        });
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(c, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Whether this CPU can make `cpuid` fault: try it on ourselves and turn
/// it straight back off (nothing runs cpuid in between).
pub(crate) fn cpuid_faulting_supported() -> bool {
    const ARCH_SET_CPUID: libc::c_ulong = 0x1012;
    // SAFETY: arch_prctl on our own thread with integer arguments.
    unsafe {
        if libc::syscall(libc::SYS_arch_prctl, ARCH_SET_CPUID, 0 as libc::c_ulong) != 0 {
            return false;
        }
        libc::syscall(libc::SYS_arch_prctl, ARCH_SET_CPUID, 1 as libc::c_ulong);
    }
    true
}

/// A value unique to this run among concurrent ones (never seen by the
/// guest: it only keeps abstract socket names apart).
pub(crate) fn run_nonce() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    t ^ ((std::process::id() as u64) << 32)
}

/// Execute the real `cpuid` instruction (in the supervisor, not a tracee).
pub fn host_cpuid(leaf: u32, sub: u32) -> [u32; 4] {
    // SAFETY: cpuid is available on every x86_64 CPU.
    let r = std::arch::x86_64::__cpuid_count(leaf, sub);
    [r.eax, r.ebx, r.ecx, r.edx]
}
