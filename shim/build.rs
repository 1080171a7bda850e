//! Compiles `stat.c` (the stat fast path) into position-dependent machine
//! code for its address in every tracee, and hands the bytes and the
//! offsets of its entry points to the crate.

use std::path::PathBuf;
use std::process::Command;

#[allow(dead_code)]
mod layout {
    include!("layout.rs");
}
use layout::*;

fn main() {
    println!("cargo:rerun-if-changed=stat.c");
    println!("cargo:rerun-if-changed=layout.rs");
    println!("cargo:rerun-if-env-changed=CC");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let at = CODE_ADDR + STAT_CODE_OFF as u64;
    let script = out.join("stat.ld");
    std::fs::write(
        &script,
        format!(
            "ENTRY(shim_stat_entry)\nSECTIONS {{\n . = {at:#x};\n .text : {{ *(.text.entry) *(.text .text.*) *(.rodata .rodata.*) }}\n /DISCARD/ : {{ *(.eh_frame*) *(.comment) *(.note*) }}\n}}\n"
        ),
    )
    .expect("write the linker script");
    let elf_path = out.join("stat.elf");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let mut cmd = Command::new(&cc);
    cmd.args([
        "-O2",
        "-std=gnu11",
        "-Wall",
        "-Werror",
        "-ffreestanding",
        "-fno-builtin",
        "-fno-tree-loop-distribute-patterns",
        "-nostdlib",
        "-static",
        "-fno-pic",
        "-fno-pie",
        "-no-pie",
        "-mgeneral-regs-only",
        "-mno-red-zone",
        "-fno-stack-protector",
        "-fcf-protection=none",
        "-fno-asynchronous-unwind-tables",
        "-fno-jump-tables",
        "-Wl,--build-id=none",
        "-Wl,-z,noexecstack",
    ]);
    cmd.arg(format!("-Wl,-T,{}", script.display()));
    for (name, v) in [
        ("DATA_ADDR", DATA_ADDR),
        ("TABLE_OFF", TABLE_OFF as u64),
        ("TABLE_BITS", TABLE_BITS as u64),
        ("TABLE_LIMIT", TABLE_LIMIT as u64),
        ("MONO", MONO as u64),
        ("COST", COST as u64),
        ("LIMIT", LIMIT as u64),
        ("INO_NEXT", INO_NEXT as u64),
        ("INO_COUNT", INO_COUNT as u64),
        ("STAT_ON", STAT_ON as u64),
        ("REAL_START", REAL_START as u64),
        ("PREEXISTING", PREEXISTING as u64),
        ("PY_REAL", PY_REAL as u64),
        ("STAT_CALLS", STAT_CALLS as u64),
        ("READ_CALLS", READ_CALLS as u64),
        ("DEV_COUNT", DEV_COUNT as u64),
        ("DEVS", DEVS as u64),
        ("DEV_SLOTS", DEV_SLOTS as u64),
    ] {
        cmd.arg(format!("-D{name}={v:#x}UL"));
    }
    cmd.arg("stat.c").arg("-o").arg(&elf_path);
    let st = cmd
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler `{cc}` for shim/stat.c: {e}"));
    assert!(st.success(), "compiling shim/stat.c failed");
    let bytes = std::fs::read(&elf_path).expect("read stat.elf");
    let elf = goblin::elf::Elf::parse(&bytes).expect("parse stat.elf");
    let mut text: Option<(u64, Vec<u8>)> = None;
    for sh in &elf.section_headers {
        let name = elf.shdr_strtab.get_at(sh.sh_name).unwrap_or("");
        let alloc = sh.sh_flags & u64::from(goblin::elf::section_header::SHF_ALLOC) != 0;
        if !alloc || sh.sh_size == 0 {
            continue;
        }
        // Everything must be code or constants inside `.text`: no data,
        // no relocations left for a loader that does not exist.
        assert_eq!(name, ".text", "stat.c produced a section {name}");
        let off = sh.sh_offset as usize;
        text = Some((sh.sh_addr, bytes[off..off + sh.sh_size as usize].to_vec()));
    }
    let (addr, code) = text.expect("stat.c has no code");
    assert_eq!(addr, at, "code linked at the wrong address");
    assert!(
        code.len() <= STAT_CODE_MAX,
        "stat code is {} bytes",
        code.len()
    );
    let sym = |want: &str| {
        elf.syms
            .iter()
            .find(|s| elf.strtab.get_at(s.st_name) == Some(want))
            .map(|s| s.st_value - at)
            .unwrap_or_else(|| panic!("no symbol {want} in stat.elf"))
    };
    std::fs::write(out.join("stat_code.bin"), &code).expect("write the code");
    std::fs::write(
        out.join("stat_syms.rs"),
        format!(
            "/// Offsets in the stat code of its entry, of the end of its allowed syscall\n/// and of the end of its quiet trapped one.\npub const STAT_ENTRY_OFF: u64 = {};\npub const RAW_IP_OFF: u64 = {};\npub const QUIET_IP_OFF: u64 = {};\n",
            sym("shim_stat_entry"),
            sym("shim_raw_ip"),
            sym("shim_quiet_ip")
        ),
    )
    .expect("write the symbols");
}
