// The shared file's layout, used by build.rs (for stat.c) and by the crate.
// File: the data page, the inode table (both mapped read-write), then the
// code (read-execute): the time stubs' page and the stat code.

/// Where the file is mapped in every tracee.
pub const DATA_ADDR: u64 = 0x7e00_0000_0000;

/// Slots of the data page (u64 each).
pub const MONO: usize = 0;
pub const COST: usize = 1;
pub const LIMIT: usize = 2;
pub const CALLS: usize = 4;
/// The next virtual inode number, and entries in the inode table.
pub const INO_NEXT: usize = 5;
pub const INO_COUNT: usize = 6;
/// Slots 8..16: offset from monotonic time per clock id 0..=7 (u64::MAX:
/// not answered here).
pub const OFFSETS: usize = 8;
/// The stat fast path: on, the real time (ns) from which stamps may be
/// the run's, the time of files that predate it, whether Python sources
/// keep real times, calls answered.
pub const STAT_ON: usize = 16;
pub const REAL_START: usize = 17;
pub const PREEXISTING: usize = 18;
pub const PY_REAL: usize = 19;
pub const STAT_CALLS: usize = 20;
/// read(2) calls the stat code answered (regular files).
pub const READ_CALLS: usize = 22;
/// Numbered devices: count, then (real device, virtual number) pairs.
pub const DEV_COUNT: usize = 21;
pub const DEVS: usize = 24;
pub const DEV_SLOTS: usize = 8;

/// The inode table: 2^TABLE_BITS entries of (device, inode, virtual inode),
/// open addressing; filled to TABLE_LIMIT at most.
pub const TABLE_BITS: u32 = 14;
pub const TABLE_OFF: usize = 4096;
pub const TABLE_ENTRIES: usize = 1 << TABLE_BITS;
pub const TABLE_LIMIT: usize = TABLE_ENTRIES / 2;
pub const TABLE_BYTES: usize = TABLE_ENTRIES * 24;

pub const CODE_OFF: usize = TABLE_OFF + TABLE_BYTES;
pub const CODE_ADDR: u64 = DATA_ADDR + CODE_OFF as u64;
/// The stat code, after the time stubs' page.
pub const STAT_CODE_OFF: usize = 4096;
pub const STAT_CODE_MAX: usize = 8192;
pub const CODE_BYTES: usize = STAT_CODE_OFF + STAT_CODE_MAX;
pub const FILE_SIZE: usize = CODE_OFF + CODE_BYTES;
