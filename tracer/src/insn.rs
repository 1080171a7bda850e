//! The tracee's instructions, decoded (iced-x86): for spin probes, sync-op
//! trampolines and coverage's objects.

use crate::sys::{self, Regs};
use iced_x86::{Decoder, DecoderOptions, Instruction, OpKind, Register};
use libc::pid_t;

/// The instruction at `rip` in `tid`'s memory.
pub fn decode(tid: pid_t, rip: u64) -> Option<Instruction> {
    let mut code = [0u8; 16];
    // The last bytes of a code page may be followed by an unmapped one.
    let room = (4096 - (rip & 4095)).min(16) as usize;
    let n = if sys::read_mem(tid, rip, &mut code).is_ok() {
        16
    } else {
        sys::read_mem(tid, rip, &mut code[..room]).ok()?;
        room
    };
    let insn = Decoder::with_ip(64, &code[..n], rip, DecoderOptions::NONE).decode();
    (!insn.is_invalid()).then_some(insn)
}

/// The value of register `x` (any size) in `r`, for address computation.
pub fn reg(r: &Regs, x: Register) -> Option<u64> {
    use Register::*;
    Some(match x.full_register() {
        RAX => r.rax,
        RBX => r.rbx,
        RCX => r.rcx,
        RDX => r.rdx,
        RSI => r.rsi,
        RDI => r.rdi,
        RBP => r.rbp,
        RSP => r.rsp,
        R8 => r.r8,
        R9 => r.r9,
        R10 => r.r10,
        R11 => r.r11,
        R12 => r.r12,
        R13 => r.r13,
        R14 => r.r14,
        R15 => r.r15,
        ES | CS | SS | DS => 0,
        FS => r.fs_base,
        GS => r.gs_base,
        _ => return Option::None,
    })
    .map(|v| match x.size() {
        4 => v & 0xffff_ffff,
        2 => v & 0xffff,
        1 if x.is_gpr8() && matches!(x, AH | BH | CH | DH) => (v >> 8) & 0xff,
        1 => v & 0xff,
        _ => v,
    })
}

/// The address of the memory operand of the instruction at `at`, with the
/// registers `r` (None: it has none, or it cannot be read).
pub fn memory_target(tid: pid_t, r: &Regs, at: u64) -> Option<u64> {
    let insn = decode(tid, at)?;
    let op = (0..insn.op_count()).find(|&i| insn.op_kind(i) == OpKind::Memory)?;
    insn.virtual_address(op, 0, |x, _, _| reg(r, x))
}
