//! Code placed inside tracees: the time fast path.
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

/// Where the data page is mapped in every tracee (the code page follows).
pub const DATA_ADDR: u64 = 0x7e00_0000_0000;
pub const CODE_ADDR: u64 = DATA_ADDR + 4096;
/// Size of the shared file: a data page and a code page.
pub const FILE_SIZE: usize = 8192;

/// Slots of the data page (u64 each).
pub const MONO: usize = 0;
pub const COST: usize = 1;
pub const LIMIT: usize = 2;
pub const CALLS: usize = 4;
/// Slots 8..16: offset from monotonic time per clock id 0..=7 (u64::MAX:
/// not answered here).
pub const OFFSETS: usize = 8;

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
    fn stubs_fit_and_carry_the_page_address() {
        let p = code_page();
        let addr = DATA_ADDR.to_le_bytes();
        let n = p.windows(8).filter(|w| *w == addr).count();
        assert_eq!(n, 3, "each stub names the data page");
        assert!(CLOCK_GETTIME.len() <= 0x80 && GETTIMEOFDAY.len() <= 0x80);
        assert_eq!(jump_to(1).len(), 13);
        assert_eq!(
            syscall_stub(309),
            vec![0xb8, 0x35, 0x01, 0, 0, 0x0f, 0x05, 0xc3]
        );
    }
}
