//! Files of the virtual machine: generated at start and bind-mounted
//! read-only over the host's in the guest's private mount namespace, so the
//! guest's `sysconf(_SC_NPROCESSORS_*)` and friends agree with its virtual
//! CPU count. Without a mount namespace the host's files show through (and
//! the summary says PIDs were not virtualized either).

use crate::config::RunConfig;
use std::path::{Path, PathBuf};

/// (file name in the generated directory, path it is mounted over).
pub const FILES: &[(&str, &str)] = &[
    ("cpu-online", "/sys/devices/system/cpu/online"),
    ("cpu-possible", "/sys/devices/system/cpu/possible"),
    ("cpu-present", "/sys/devices/system/cpu/present"),
];

/// A temporary directory removed when dropped.
pub struct FilesDir(PathBuf);

impl FilesDir {
    pub fn create(cfg: &RunConfig) -> std::io::Result<FilesDir> {
        let base = std::env::temp_dir().join(format!("detrun-{}", std::process::id()));
        std::fs::create_dir_all(&base)?;
        let dir = FilesDir(base);
        let n = cfg.ncpus.max(1);
        let range = if n == 1 {
            "0\n".to_string()
        } else {
            format!("0-{}\n", n - 1)
        };
        for name in ["cpu-online", "cpu-possible", "cpu-present"] {
            std::fs::write(dir.0.join(name), &range)?;
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
