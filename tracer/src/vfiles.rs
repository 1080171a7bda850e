//! Files of the virtual machine: generated at start and bind-mounted over
//! the host's in the guest's private mount namespace, so the guest's
//! `sysconf(_SC_NPROCESSORS_*)`, `nproc`, `free`, `uptime` and
//! `/proc/sys/kernel/random/{uuid,boot_id}` are functions of the seed and
//! agree with the virtual CPU count. These files are static: `uuid` reads
//! the same value all run long and `/proc/uptime` does not advance. Without a mount namespace the host's files show through (and
//! the summary says PIDs were not virtualized either).

use crate::config::RunConfig;
use std::path::{Path, PathBuf};

/// (file name in the generated directory, path it is mounted over).
pub const FILES: &[(&str, &str)] = &[
    ("cpu-online", "/sys/devices/system/cpu/online"),
    ("cpu-possible", "/sys/devices/system/cpu/possible"),
    ("cpu-present", "/sys/devices/system/cpu/present"),
    ("boot_id", "/proc/sys/kernel/random/boot_id"),
    ("uuid", "/proc/sys/kernel/random/uuid"),
    ("uptime", "/proc/uptime"),
    ("loadavg", "/proc/loadavg"),
    ("meminfo", "/proc/meminfo"),
    ("cpuinfo", "/proc/cpuinfo"),
    ("stat", "/proc/stat"),
    ("hosts", "/etc/hosts"),
];

/// A version-4 UUID from 16 seeded bytes.
fn uuid(b: [u8; 16]) -> String {
    let mut b = b;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}\n",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// The generated contents, by file name.
pub fn contents(cfg: &RunConfig) -> Vec<(&'static str, String)> {
    use detrun_scheduler::{Purpose, Streams};
    use rand_core::RngCore;
    let n = cfg.ncpus.max(1);
    let range = if n == 1 {
        "0\n".to_string()
    } else {
        format!("0-{}\n", n - 1)
    };
    let streams = Streams::new(cfg.seed);
    let id = |i: u64| {
        let mut b = [0u8; 16];
        streams.stream(Purpose::Ident, i).fill_bytes(&mut b);
        uuid(b)
    };
    let mut cpuinfo = String::new();
    for i in 0..n {
        cpuinfo.push_str(&format!(
            "processor\t: {i}\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 158\n\
             model name\t: detrun virtual CPU @ 2.00GHz\nstepping\t: 10\ncpu MHz\t\t: 2000.000\n\
             cache size\t: 32768 KB\nphysical id\t: 0\nsiblings\t: {n}\ncore id\t\t: {i}\n\
             cpu cores\t: {n}\nflags\t\t: fpu tsc cx8 cmov sse sse2 sse3 ssse3 sse4_1 sse4_2 popcnt avx avx2\n\
             bogomips\t: 4000.00\n\n"
        ));
    }
    let mut stat = String::from("cpu  0 0 0 0 0 0 0 0 0 0\n");
    for i in 0..n {
        stat.push_str(&format!("cpu{i} 0 0 0 0 0 0 0 0 0 0\n"));
    }
    let boot = cfg.epoch_secs.saturating_sub(100);
    stat.push_str(&format!(
        "intr 0\nctxt 0\nbtime {boot}\nprocesses 1\nprocs_running 1\nprocs_blocked 0\n"
    ));
    let meminfo =
        "MemTotal:        4194304 kB\nMemFree:         2097152 kB\nMemAvailable:    3145728 kB\n\
Buffers:               0 kB\nCached:           524288 kB\nSwapCached:            0 kB\n\
Active:           524288 kB\nInactive:         524288 kB\nShmem:                 0 kB\n\
SReclaimable:          0 kB\nSwapTotal:             0 kB\nSwapFree:              0 kB\n"
            .to_string();
    let mut hosts = format!(
        "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t{}\n",
        cfg.hostname
    );
    for (name, ip) in &cfg.net.hosts {
        hosts.push_str(&format!("{ip}\t{name}\n"));
    }
    let mut files = vec![
        ("cpu-online", range.clone()),
        ("cpu-possible", range.clone()),
        ("cpu-present", range),
        ("boot_id", id(0)),
        ("uuid", id(1)),
        ("uptime", "100.00 400.00\n".into()),
        ("loadavg", "0.00 0.00 0.00 1/64 2\n".into()),
        ("meminfo", meminfo),
        ("cpuinfo", cpuinfo),
        ("stat", stat),
    ];
    // The virtual network's names (the host's /etc/hosts shows through
    // with --net=host).
    if !cfg.net_host {
        files.push(("hosts", hosts));
    }
    files
}

/// A directory we may write to and map executable files from.
fn usable(dir: &std::ffi::CStr) -> bool {
    // SAFETY: statvfs and access on a C string, into a local struct.
    unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        libc::statvfs(dir.as_ptr(), &mut st) == 0
            && st.f_flag & libc::ST_NOEXEC == 0
            && st.f_flag & libc::ST_RDONLY == 0
            && libc::access(dir.as_ptr(), libc::W_OK) == 0
    }
}

/// A temporary directory removed when dropped.
pub struct FilesDir(PathBuf);

impl FilesDir {
    pub fn create(cfg: &RunConfig) -> std::io::Result<FilesDir> {
        // tmpfs when there is one: creating and removing these files on a
        // disk file system costs ~1 ms of a run's start. Not a noexec one:
        // the clock page's code is mapped executable from here.
        let shm = std::path::Path::new("/dev/shm");
        let root = if shm.is_dir() && usable(c"/dev/shm") {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        let base = root.join(format!("detrun-{}", std::process::id()));
        std::fs::create_dir_all(&base)?;
        let dir = FilesDir(base);
        for (name, text) in contents(cfg) {
            std::fs::write(dir.0.join(name), text)?;
        }
        Ok(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for FilesDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
