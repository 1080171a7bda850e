//! The run's view of files: virtual inode numbers and stamps (the world's
//! `FsView`), sorted directory listings, generated /proc files, and the
//! start's clock tick.

use crate::ctx::Ctx;
use crate::host::now_ns;
use detrun_scheduler::fsview::FsView;
use std::collections::BTreeMap;

/// The per-run view of files: virtual inodes and stamps, sorted listings.
pub struct FileView {
    /// Virtual inode numbers and timestamps.
    pub fsv: FsView,
    /// Sorted listings of directories being read, by (dev, ino).
    pub dirs: BTreeMap<(u64, u64), Vec<crate::files::Dirent>>,
    /// Generated /proc files so far (for unique names).
    pub proc_files: u64,
    /// The start's tick is over (see `world_start_open`).
    pub start_closed: std::cell::Cell<bool>,
}

/// One directory entry as read from the kernel.
#[derive(Clone, Debug)]
pub struct Dirent {
    pub ino: u64,
    pub typ: u8,
    pub name: Vec<u8>,
}

impl Ctx {
    /// Is the coarse clock still at or before the start's fine reading?
    /// Once past, it stays past (checked until then only).
    pub fn world_start_open(&self) -> bool {
        if self.files.start_closed.get() {
            return false;
        }
        let open = now_ns(libc::CLOCK_REALTIME_COARSE) < self.files.fsv.real_start;
        if !open {
            self.files.start_closed.set(true);
        }
        open
    }
}
