//! Code placed inside tracees: the time fast path and the stat fast path.
//!
//! The vDSO's time functions are replaced by stubs that answer from a page
//! shared by every tracee and the supervisor (a file mapped `MAP_SHARED` at
//! a fixed address in each image). Only one tracee thread runs at a time, so
//! the stubs advance the one virtual clock in the same order in every run:
//! a call costs the same virtual time as a trapped one (`COST`), and when the
//! clock would reach `LIMIT` (the next timer, network delivery, or a bound
//! that keeps the supervisor in touch) the stub makes the real, trapped
//! syscall instead. The supervisor writes `MONO` and `LIMIT` before it
//! resumes a thread and reads `MONO` back at every stop.
//!
//! Other vDSO functions become plain syscalls (`getcpu`, `clock_getres`) or
//! report ENOSYS (`getrandom`: glibc then uses the trapped syscall).
//!
//! The bytes below were assembled from the listing in each comment; the
//! 8-byte immediate `0x1122334455667788` is the data page's address.
//!
//! The stat fast path (`stat.c`, compiled by build.rs for its address):
//! after a few trapped calls from one `mov eax, NR; syscall` site of
//! `stat`, `lstat`, `fstat`, `newfstatat` or `statx`, the supervisor
//! replaces the `mov` with a jump to a stub of that site ([`site_stub`], in
//! a page it maps within 2 GB of it). The stub calls into the stat code,
//! which makes the call through the one syscall instruction the filter lets
//! pass and rewrites the answer from the inode table in the shared file
//! (see `stat.c`); what it cannot answer it makes trapped. The `syscall`
//! at the site stays, so a thread stopped between the two instructions
//! still resumes correctly.

include!("../layout.rs");
include!(concat!(env!("OUT_DIR"), "/stat_syms.rs"));

/// The stat fast path's machine code, built from `stat.c` for its address.
pub const STAT_CODE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/stat_code.bin"));

const PLACEHOLDER: [u8; 8] = 0x1122_3344_5566_7788u64.to_le_bytes();

/// clock_gettime(clockid, ts): answered for clock ids 0..=7 with an offset.
const CLOCK_GETTIME: &[u8] = &[
    0x89, 0xff, // mov edi, edi
    0x83, 0xff, 0x07, // cmp edi, 7
    0x77, 0x41, // ja sys
    0x49, 0xbb, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, // movabs r11, PAGE
    0x4d, 0x8b, 0x54, 0xfb, 0x40, // mov r10, [r11 + rdi*8 + 64]
    0x49, 0x83, 0xfa, 0xff, // cmp r10, -1
    0x74, 0x2c, // je sys
    0x49, 0x8b, 0x03, // mov rax, [r11]
    0x49, 0x03, 0x43, 0x08, // add rax, [r11 + 8]
    0x49, 0x3b, 0x43, 0x10, // cmp rax, [r11 + 16]
    0x73, 0x1f, // jae sys
    0x49, 0x89, 0x03, // mov [r11], rax
    0x49, 0xff, 0x43, 0x20, // inc qword [r11 + 32]
    0x4c, 0x01, 0xd0, // add rax, r10
    0x31, 0xd2, // xor edx, edx
    0x41, 0xba, 0x00, 0xca, 0x9a, 0x3b, // mov r10d, 1e9
    0x49, 0xf7, 0xf2, // div r10
    0x48, 0x89, 0x06, // mov [rsi], rax
    0x48, 0x89, 0x56, 0x08, // mov [rsi + 8], rdx
    0x31, 0xc0, // xor eax, eax
    0xc3, // ret
    0xb8, 0xe4, 0x00, 0x00, 0x00, // sys: mov eax, 228
    0x0f, 0x05, // syscall
    0xc3, // ret
];

/// gettimeofday(tv, tz): answered when tz is NULL and tv is not.
const GETTIMEOFDAY: &[u8] = &[
    0x48, 0x85, 0xf6, // test rsi, rsi
    0x75, 0x4a, // jnz sys
    0x48, 0x85, 0xff, // test rdi, rdi
    0x74, 0x45, // jz sys
    0x49, 0xbb, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, // movabs r11, PAGE
    0x49, 0x8b, 0x03, // mov rax, [r11]
    0x49, 0x03, 0x43, 0x08, // add rax, [r11 + 8]
    0x49, 0x3b, 0x43, 0x10, // cmp rax, [r11 + 16]
    0x73, 0x2e, // jae sys
    0x49, 0x89, 0x03, // mov [r11], rax
    0x49, 0xff, 0x43, 0x20, // inc qword [r11 + 32]
    0x49, 0x03, 0x43, 0x40, // add rax, [r11 + 64]   (realtime offset)
    0x31, 0xd2, // xor edx, edx
    0x41, 0xba, 0x00, 0xca, 0x9a, 0x3b, // mov r10d, 1e9
    0x49, 0xf7, 0xf2, // div r10
    0x48, 0x89, 0x07, // mov [rdi], rax
    0x48, 0x89, 0xd0, // mov rax, rdx
    0x31, 0xd2, // xor edx, edx
    0x41, 0xba, 0xe8, 0x03, 0x00, 0x00, // mov r10d, 1000
    0x49, 0xf7, 0xf2, // div r10
    0x48, 0x89, 0x47, 0x08, // mov [rdi + 8], rax
    0x31, 0xc0, // xor eax, eax
    0xc3, // ret
    0xb8, 0x60, 0x00, 0x00, 0x00, // sys: mov eax, 96
    0x0f, 0x05, // syscall
    0xc3, // ret
];

/// time(tloc).
const TIME: &[u8] = &[
    0x49, 0xbb, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, // movabs r11, PAGE
    0x49, 0x8b, 0x03, // mov rax, [r11]
    0x49, 0x03, 0x43, 0x08, // add rax, [r11 + 8]
    0x49, 0x3b, 0x43, 0x10, // cmp rax, [r11 + 16]
    0x73, 0x1f, // jae sys
    0x49, 0x89, 0x03, // mov [r11], rax
    0x49, 0xff, 0x43, 0x20, // inc qword [r11 + 32]
    0x49, 0x03, 0x43, 0x40, // add rax, [r11 + 64]
    0x31, 0xd2, // xor edx, edx
    0x41, 0xba, 0x00, 0xca, 0x9a, 0x3b, // mov r10d, 1e9
    0x49, 0xf7, 0xf2, // div r10
    0x48, 0x85, 0xff, // test rdi, rdi
    0x74, 0x03, // jz done
    0x48, 0x89, 0x07, // mov [rdi], rax
    0xc3, // done: ret
    0xb8, 0xc9, 0x00, 0x00, 0x00, // sys: mov eax, 201
    0x0f, 0x05, // syscall
    0xc3, // ret
];

/// Offsets of the stubs in the code page.
pub const CLOCK_GETTIME_AT: u64 = 0;
pub const GETTIMEOFDAY_AT: u64 = 0x80;
pub const TIME_AT: u64 = 0x100;

/// The code page, for a data page at [`DATA_ADDR`].
pub fn code_page() -> Vec<u8> {
    let mut page = vec![0xccu8; 4096]; // int3 between stubs
    for (at, code) in [
        (CLOCK_GETTIME_AT, CLOCK_GETTIME),
        (GETTIMEOFDAY_AT, GETTIMEOFDAY),
        (TIME_AT, TIME),
    ] {
        let mut c = code.to_vec();
        if let Some(i) = c.windows(8).position(|w| w == PLACEHOLDER) {
            c[i..i + 8].copy_from_slice(&DATA_ADDR.to_le_bytes());
        }
        page[at as usize..at as usize + c.len()].copy_from_slice(&c);
    }
    page
}

/// The time stubs' page and the stat code: the file's code part.
pub fn code_image() -> Vec<u8> {
    let mut v = code_page();
    v.resize(CODE_BYTES, 0xcc);
    v[STAT_CODE_OFF..STAT_CODE_OFF + STAT_CODE.len()].copy_from_slice(STAT_CODE);
    v
}

/// Where the stat code is entered, and the end of the syscall instruction
/// it may use without trapping (the filter allows exactly that address).
pub const STAT_ENTRY: u64 = CODE_ADDR + STAT_CODE_OFF as u64 + STAT_ENTRY_OFF;
pub const RAW_SYSCALL_END: u64 = CODE_ADDR + STAT_CODE_OFF as u64 + RAW_IP_OFF;
/// The end of the syscall instruction through which the stat code hands a
/// call it has charged to the supervisor (not an event: see `stat.c`).
pub const QUIET_SYSCALL_END: u64 = CODE_ADDR + STAT_CODE_OFF as u64 + QUIET_IP_OFF;

/// The inode table's home slot for a (device, inode) key; `stat.c` has the
/// same function.
pub fn ino_slot(dev: u64, ino: u64) -> usize {
    ((dev.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ ino.wrapping_mul(0xC2B2_AE3D_27D4_EB4F))
        >> (64 - TABLE_BITS)) as usize
}

/// Bytes of one site stub (a slot of a stub page).
pub const STUB_SIZE: u64 = 64;

/// A site stub at `at` for the site at `site` (`mov eax, nr; syscall`,
/// 7 bytes): skip the red zone, call the stat code with `eax = nr`, come
/// back after the site's `syscall`. None: out of a rel32 jump's reach.
pub fn site_stub(at: u64, site: u64, nr: u32) -> Option<Vec<u8>> {
    let mut set = vec![0xb8]; // mov eax, nr
    set.extend_from_slice(&nr.to_le_bytes());
    call_stub(at, &set, &[], site + 7)
}

/// glibc's `read` (the single- and multi-threaded paths alike): `xor eax,
/// eax; syscall; cmp rax, -4096`, 10 bytes, the `syscall` ending at +4.
pub const READ_SITE: [u8; 10] = [0x31, 0xc0, 0x0f, 0x05, 0x48, 0x3d, 0x00, 0xf0, 0xff, 0xff];

/// A stub for a [`READ_SITE`] at `site`: the call made by the stat code,
/// then the site's own `cmp`, back after it.
pub fn read_stub(at: u64, site: u64) -> Option<Vec<u8>> {
    call_stub(at, &READ_SITE[..2], &READ_SITE[4..], site + 10)
}

/// The 10 bytes that replace a read site: `jmp stub` and a 5-byte nop.
pub fn read_jump(site: u64, stub: u64) -> Option<[u8; 10]> {
    let j = site_jump(site, stub)?;
    Some([j[0], j[1], j[2], j[3], j[4], 0x0f, 0x1f, 0x44, 0x00, 0x00])
}

/// Skip the red zone, `set` (the number into eax), call the stat code,
/// `after`, jump to `back`.
fn call_stub(at: u64, set: &[u8], after: &[u8], back: u64) -> Option<Vec<u8>> {
    let mut v = vec![0x48, 0x8d, 0x64, 0x24, 0x80]; // lea rsp, [rsp-128]
    v.extend_from_slice(set);
    v.extend_from_slice(&[0x49, 0xbb]); // movabs r11, STAT_ENTRY
    v.extend_from_slice(&STAT_ENTRY.to_le_bytes());
    v.extend_from_slice(&[0x41, 0xff, 0xd3]); // call r11
    v.extend_from_slice(&[0x48, 0x8d, 0xa4, 0x24, 0x80, 0, 0, 0]); // lea rsp, [rsp+128]
    v.extend_from_slice(after);
    let next = at + v.len() as u64 + 5;
    let rel = i32::try_from(back as i64 - next as i64).ok()?;
    v.push(0xe9); // jmp back
    v.extend_from_slice(&rel.to_le_bytes());
    Some(v)
}

/// The 5 bytes that replace the site's `mov eax, nr`: `jmp stub`.
pub fn site_jump(site: u64, stub: u64) -> Option<[u8; 5]> {
    let rel = i32::try_from(stub as i64 - (site + 5) as i64).ok()?;
    let r = rel.to_le_bytes();
    Some([0xe9, r[0], r[1], r[2], r[3]])
}

/// Is `code` (the 7 bytes before a syscall's return address) a
/// `mov eax, nr; syscall` site for `nr`?
pub fn is_site(code: &[u8; 7], nr: u32) -> bool {
    code[0] == 0xb8 && code[1..5] == nr.to_le_bytes() && code[5..7] == [0x0f, 0x05]
}

/// Is `code`, at a faulting `rdtsc`, the usual 64-bit read: `rdtsc;
/// shl rdx, 32; or rax, rdx` (or `add rax, rdx`, Go's), 9 bytes?
pub fn is_rdtsc_site(code: &[u8; 9]) -> bool {
    code[..6] == [0x0f, 0x31, 0x48, 0xc1, 0xe2, 0x20]
        && (code[6..] == [0x48, 0x09, 0xd0] || code[6..] == [0x48, 0x01, 0xd0])
}

/// A stub at `at` for the rdtsc site `code` at `site`: the virtual TSC
/// (2 GHz, twice the monotonic nanoseconds) from the clock page, charged
/// like a time call, through rdx alone (rdtsc's own output: no stack, no
/// red zone); when the clock would reach LIMIT, the real `rdtsc`, which
/// faults and is answered by the supervisor. Either way the site's own
/// `shl`/`or` finish, so registers and flags are what the site would give.
/// None: out of a rel32 jump's reach.
pub fn rdtsc_stub(at: u64, site: u64, code: &[u8; 9]) -> Option<Vec<u8>> {
    let mut v = vec![0x48, 0xba]; // movabs rdx, PAGE
    v.extend_from_slice(&DATA_ADDR.to_le_bytes());
    v.extend_from_slice(&[
        0x48, 0x8b, 0x02, // mov rax, [rdx]          (MONO)
        0x48, 0x03, 0x42, 0x08, // add rax, [rdx + 8]   (COST)
        0x48, 0x3b, 0x42, 0x10, // cmp rax, [rdx + 16]  (LIMIT)
        0x73, 0x1f, // jae slow
        0x48, 0x89, 0x02, // mov [rdx], rax
        0x48, 0xff, 0x42, 0x20, // inc qword [rdx + 32] (CALLS)
        0x48, 0x01, 0xc0, // add rax, rax            (2 GHz)
        0x48, 0x89, 0xc2, // mov rdx, rax
        0x48, 0xc1, 0xea, 0x20, // shr rdx, 32
        0x89, 0xc0, // mov eax, eax
    ]);
    let tail = v.len();
    v.extend_from_slice(&code[2..]); // tail: the site's shl; or/add
    let next = at + v.len() as u64 + 5;
    let rel = i32::try_from((site + 9) as i64 - next as i64).ok()?;
    v.push(0xe9); // jmp site+9
    v.extend_from_slice(&rel.to_le_bytes());
    v.extend_from_slice(&[0x0f, 0x31]); // slow: rdtsc (traps)
    let back = tail as i64 - (v.len() + 2) as i64;
    v.extend_from_slice(&[0xeb, back as i8 as u8]); // jmp tail
    Some(v)
}

/// The 9 bytes that replace an rdtsc site: `jmp stub` and a 4-byte nop.
pub fn rdtsc_jump(site: u64, stub: u64) -> Option<[u8; 9]> {
    let j = site_jump(site, stub)?;
    Some([j[0], j[1], j[2], j[3], j[4], 0x0f, 0x1f, 0x40, 0x00])
}

/// `movabs r11, target; jmp r11` (13 bytes): a vDSO entry to a stub.
pub fn jump_to(target: u64) -> Vec<u8> {
    let mut v = vec![0x49, 0xbb];
    v.extend_from_slice(&target.to_le_bytes());
    v.extend_from_slice(&[0x41, 0xff, 0xe3]);
    v
}

/// `mov eax, nr; syscall; ret` (8 bytes): a vDSO entry made a syscall.
pub fn syscall_stub(nr: u32) -> Vec<u8> {
    let mut v = vec![0xb8];
    v.extend_from_slice(&nr.to_le_bytes());
    v.extend_from_slice(&[0x0f, 0x05, 0xc3]);
    v
}

/// `mov rax, -ENOSYS; ret` (8 bytes).
pub const ENOSYS_STUB: &[u8] = &[0x48, 0xc7, 0xc0, 0xda, 0xff, 0xff, 0xff, 0xc3];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn site_stub_returns_after_the_site() {
        let site = 0x7fff_f7e0_1000u64;
        let at = site - (1 << 30);
        let s = site_stub(at, site, 332).expect("in reach");
        assert!(s.len() as u64 <= STUB_SIZE);
        let rel = i32::from_le_bytes(s[s.len() - 4..].try_into().unwrap());
        assert_eq!((at + s.len() as u64) as i64 + rel as i64, (site + 7) as i64);
        let j = site_jump(site, at).expect("in reach");
        let rel = i32::from_le_bytes(j[1..].try_into().unwrap());
        assert_eq!((site + 5) as i64 + rel as i64, at as i64);
        assert!(
            site_stub(site - (3 << 30), site, 332).is_none(),
            "3 GB is out of reach"
        );
        assert!(is_site(&[0xb8, 0x4c, 1, 0, 0, 0x0f, 0x05], 332));
        assert!(!is_site(&[0xb8, 0x4c, 1, 0, 0, 0x0f, 0x05], 262));
        assert!(ino_slot(1, 2) < TABLE_ENTRIES && ino_slot(u64::MAX, u64::MAX) < TABLE_ENTRIES);
    }

    #[test]
    fn read_stub_fits_and_comes_back() {
        let site = 0x7fff_f7e0_1000u64;
        let at = site + (1 << 30);
        let s = read_stub(at, site).expect("in reach");
        assert!(s.len() as u64 <= STUB_SIZE);
        assert_eq!(s[5..7], [0x31, 0xc0], "eax = 0 (read)");
        assert_eq!(
            s[s.len() - 11..s.len() - 5],
            READ_SITE[4..],
            "the site's cmp"
        );
        let rel = i32::from_le_bytes(s[s.len() - 4..].try_into().unwrap());
        assert_eq!(
            (at + s.len() as u64) as i64 + rel as i64,
            (site + 10) as i64
        );
        assert_eq!(
            read_jump(site, at).expect("in reach")[5..],
            [0x0f, 0x1f, 0x44, 0, 0]
        );
    }

    #[test]
    fn rdtsc_stub_fits_and_comes_back() {
        let or = [0x0f, 0x31, 0x48, 0xc1, 0xe2, 0x20, 0x48, 0x09, 0xd0];
        let add = [0x0f, 0x31, 0x48, 0xc1, 0xe2, 0x20, 0x48, 0x01, 0xd0];
        assert!(is_rdtsc_site(&or) && is_rdtsc_site(&add));
        assert!(!is_rdtsc_site(&[
            0x0f, 0x31, 0x48, 0xc1, 0xe2, 0x20, 0x48, 0x89, 0xd0
        ]));
        let site = 0x7fff_f7e0_1000u64;
        let at = site - (1 << 30);
        let s = rdtsc_stub(at, site, &or).expect("in reach");
        assert!(s.len() as u64 <= STUB_SIZE, "{} bytes", s.len());
        assert_eq!(s[2..10], DATA_ADDR.to_le_bytes());
        // jae lands on the slow path's rdtsc; its jmp lands on the tail.
        let jae = s.iter().position(|&b| b == 0x73).expect("jae");
        let slow = jae + 2 + s[jae + 1] as usize;
        assert_eq!(s[slow..slow + 2], [0x0f, 0x31]);
        let tail = (slow + 4) as i64 + s[slow + 3] as i8 as i64;
        assert_eq!(s[tail as usize..tail as usize + 7], or[2..]);
        let rel = i32::from_le_bytes(s[slow - 4..slow].try_into().unwrap());
        assert_eq!((at + slow as u64) as i64 + rel as i64, (site + 9) as i64);
        let j = rdtsc_jump(site, at).expect("in reach");
        assert_eq!(j[5..], [0x0f, 0x1f, 0x40, 0x00]);
    }

    #[test]
    fn stubs_fit_and_carry_the_page_address() {
        let p = code_page();
        let addr = DATA_ADDR.to_le_bytes();
        let n = p.windows(8).filter(|w| *w == addr).count();
        assert_eq!(n, 3, "each stub names the data page");
        assert!(STAT_CODE.len() > 100 && STAT_CODE.len() <= STAT_CODE_MAX);
        assert!(RAW_IP_OFF > STAT_ENTRY_OFF && RAW_IP_OFF < STAT_CODE.len() as u64);
        // The allowed instruction is a syscall, and the entry is first.
        let raw = RAW_IP_OFF as usize;
        assert_eq!(STAT_CODE[raw - 2..raw], [0x0f, 0x05]);
        let quiet = QUIET_IP_OFF as usize;
        assert_eq!(STAT_CODE[quiet - 2..quiet], [0x0f, 0x05]);
        assert_eq!(STAT_ENTRY_OFF, 0);
        assert_eq!(FILE_SIZE % 4096, 0);
        assert_eq!(CODE_OFF % 4096, 0);
        assert!(CLOCK_GETTIME.len() <= 0x80 && GETTIMEOFDAY.len() <= 0x80);
        assert_eq!(jump_to(1).len(), 13);
        assert_eq!(
            syscall_stub(309),
            vec![0xb8, 0x35, 0x01, 0, 0, 0x0f, 0x05, 0xc3]
        );
    }
}
