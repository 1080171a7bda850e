//! The deterministic view of file metadata.
//!
//! Inode and device numbers are renumbered in first-seen order. Timestamps
//! of files that existed before the run are one fixed instant (one day
//! before the virtual epoch); timestamps the kernel set during the run are
//! replaced by the virtual time at which detrun first saw that value, so a
//! file written later in the run looks newer, as on a real machine. The
//! access time is always reported equal to the modification time (atime
//! updates depend on the history of earlier runs).
//!
//! Inputs are the real numbers the tracer read; this module only maps them.

use std::collections::BTreeMap;

/// The first virtual inode number ("." of a root never looks special).
pub const FIRST_INO: u64 = 1000;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TimePolicy {
    Virtual,
    Real,
}

#[derive(Clone, Debug)]
pub struct FsView {
    pub policy: TimePolicy,
    /// Realtime (ns) at which the run started, as the host's clock read it.
    pub real_start: u64,
    /// File systems stamp with a clock up to a tick behind: a stamp from
    /// `window_lo` to `real_start` is from before the run or from its first
    /// moments. The files the run wrote then are in `touched`.
    pub window_lo: u64,
    touched: std::collections::BTreeSet<(u64, u64)>,
    /// Virtual realtime (ns) reported for files that predate the run.
    pub preexisting: u64,
    inodes: BTreeMap<(u64, u64), u64>,
    devs: BTreeMap<u64, u64>,
    seen: BTreeMap<(u64, u64, u8, u64), u64>,
}

/// Which timestamp of a file.
#[derive(Clone, Copy, Debug)]
pub enum Stamp {
    Mtime = 0,
    Ctime = 1,
    Btime = 2,
}

impl FsView {
    pub fn new(policy: TimePolicy, real_start: u64, window_lo: u64, epoch_ns: u64) -> FsView {
        FsView {
            policy,
            real_start,
            window_lo: window_lo.min(real_start),
            touched: std::collections::BTreeSet::new(),
            preexisting: epoch_ns.saturating_sub(86_400 * 1_000_000_000),
            inodes: BTreeMap::new(),
            devs: BTreeMap::new(),
            seen: BTreeMap::new(),
        }
    }

    /// The run wrote this file (while its stamps may still look older).
    pub fn touch(&mut self, dev: u64, ino: u64) {
        self.touched.insert((dev, ino));
    }

    /// Virtual device number (1, 2, ... in first-seen order).
    pub fn dev(&mut self, dev: u64) -> u64 {
        let n = self.devs.len() as u64 + 1;
        *self.devs.entry(dev).or_insert(n)
    }

    /// Virtual inode number (first-seen order, from 1000 so that "." of a
    /// root never looks special).
    pub fn ino(&mut self, dev: u64, ino: u64) -> u64 {
        let n = self.inodes.len() as u64 + FIRST_INO;
        *self.inodes.entry((dev, ino)).or_insert(n)
    }

    /// Virtual inode number when the numbering is shared with code in the
    /// tracees (their table holds the others): `next` gives a new number.
    pub fn ino_with(&mut self, dev: u64, ino: u64, next: impl FnOnce() -> u64) -> u64 {
        *self.inodes.entry((dev, ino)).or_insert_with(next)
    }

    /// Virtual device number, numbering new ones from `first` on (the
    /// tracees' table numbered the ones before).
    pub fn dev_from(&mut self, dev: u64, first: u64) -> u64 {
        let n = self.devs.len() as u64 + first;
        *self.devs.entry(dev).or_insert(n)
    }

    /// Virtual timestamp (ns since the Unix epoch) for a real one, seen at
    /// virtual realtime `now`.
    pub fn time(&mut self, dev: u64, ino: u64, which: Stamp, real: u64, now: u64) -> u64 {
        if self.policy == TimePolicy::Real {
            return real;
        }
        if real < self.window_lo || (real < self.real_start && !self.touched.contains(&(dev, ino)))
        {
            return self.preexisting;
        }
        *self
            .seen
            .entry((dev, ino, which as u8, real))
            .or_insert(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbering_and_times() {
        let mut v = FsView::new(TimePolicy::Virtual, 1_000, 900, 5_000_000_000_000_000);
        assert_eq!(v.ino(7, 123), 1000);
        assert_eq!(v.ino(7, 99), 1001);
        assert_eq!(v.ino(7, 123), 1000);
        assert_eq!(v.dev(66), 1);
        assert_eq!(v.time(7, 1, Stamp::Mtime, 10, 42), v.preexisting);
        assert_eq!(v.time(7, 1, Stamp::Mtime, 2_000, 42), 42);
        assert_eq!(
            v.time(7, 1, Stamp::Mtime, 2_000, 99),
            42,
            "same real value, same answer"
        );
        assert_eq!(
            v.time(7, 1, Stamp::Mtime, 3_000, 99),
            99,
            "a newer write is newer"
        );
        // A stamp in the start's tick: older unless the run wrote the file.
        assert_eq!(v.time(7, 2, Stamp::Mtime, 950, 60), v.preexisting);
        v.touch(7, 3);
        assert_eq!(v.time(7, 3, Stamp::Mtime, 950, 60), 60);
    }
}
