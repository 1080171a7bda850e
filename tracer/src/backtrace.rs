//! Symbolized user-space backtraces of a stopped tracee, for `analyze`.
//!
//! Guests are usually built without frame pointers, so the stack is
//! scanned: the instruction pointer, then every word above the stack
//! pointer that points just after a `call` instruction in an executable
//! mapping. Addresses are symbolized from the ELF symbol tables (goblin) of
//! the mapped files. Like any stack scan it can show stale frames; it never
//! fails the run.

use crate::sys;
use libc::pid_t;
use std::collections::BTreeMap;

pub(crate) struct Mapping {
    pub start: u64,
    pub end: u64,
    pub exec: bool,
    pub offset: u64,
    pub path: String,
}

pub(crate) fn maps(pid: pid_t) -> Vec<Mapping> {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
        return Vec::new();
    };
    let mut v = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 5 {
            continue;
        }
        let Some((a, b)) = f[0].split_once('-') else {
            continue;
        };
        let (Ok(start), Ok(end)) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16)) else {
            continue;
        };
        v.push(Mapping {
            start,
            end,
            exec: f[1].contains('x'),
            offset: u64::from_str_radix(f[2], 16).unwrap_or(0),
            path: f.get(5).map(|s| s.to_string()).unwrap_or_default(),
        });
    }
    v
}

/// (is ET_DYN, function symbols sorted by address).
type Syms = (bool, Vec<(u64, u64, String)>);

fn load_syms(path: &str) -> Option<Syms> {
    let data = std::fs::read(path).ok()?;
    let elf = goblin::elf::Elf::parse(&data).ok()?;
    let mut v = Vec::new();
    for (tab, strs) in [(&elf.syms, &elf.strtab), (&elf.dynsyms, &elf.dynstrtab)] {
        for s in tab.iter() {
            if s.st_value != 0 && s.is_function() {
                if let Some(name) = strs.get_at(s.st_name) {
                    v.push((s.st_value, s.st_size, name.to_string()));
                }
            }
        }
    }
    v.sort();
    Some((elf.header.e_type == goblin::elf::header::ET_DYN, v))
}

/// Symbolize one address.
fn symbolize(addr: u64, maps: &[Mapping], cache: &mut BTreeMap<String, Option<Syms>>) -> String {
    let Some(m) = maps.iter().find(|m| addr >= m.start && addr < m.end) else {
        return format!("{addr:#x}");
    };
    if m.path.is_empty() || m.path.starts_with('[') {
        return format!(
            "{addr:#x} {}",
            if m.path.is_empty() { "?" } else { &m.path }
        );
    }
    let base = maps
        .iter()
        .filter(|x| x.path == m.path && x.offset == 0)
        .map(|x| x.start)
        .min()
        .unwrap_or(m.start - m.offset);
    let syms = cache
        .entry(m.path.clone())
        .or_insert_with(|| load_syms(&m.path));
    let short = m.path.rsplit('/').next().unwrap_or(&m.path);
    let Some((dyn_, list)) = syms else {
        return format!("{addr:#x} ({short})");
    };
    let vaddr = if *dyn_ { addr - base } else { addr };
    let idx = list.partition_point(|s| s.0 <= vaddr);
    if idx > 0 {
        let (start, size, name) = &list[idx - 1];
        if *size == 0 || vaddr < start + size.max(&1) + 0x1000 {
            return format!("{addr:#x} {name}+{:#x} ({short})", vaddr - start);
        }
    }
    format!("{addr:#x} ({short})")
}

fn after_call(pid: pid_t, ret: u64) -> bool {
    let mut b = [0u8; 7];
    if ret < 7 || sys::read_mem(pid, ret - 7, &mut b).is_err() {
        return false;
    }
    b[2] == 0xe8
        || (b[5] == 0xff && (b[6] & 0x38) == 0x10)
        || (b[4] == 0xff && (b[5] & 0x38) == 0x10)
        || (b[1] == 0xff && (b[2] & 0x38) == 0x10)
}

/// Up to `max` symbolized frames of thread `tid` (in process `tgid`).
pub fn backtrace(tid: pid_t, tgid: pid_t, max: usize) -> Vec<String> {
    let Ok(r) = sys::get_regs(tid) else {
        return Vec::new();
    };
    let maps = maps(tgid);
    let mut cache = BTreeMap::new();
    let mut out = vec![symbolize(r.rip, &maps, &mut cache)];
    let mut sp = r.rsp;
    let mut buf = [0u8; 4096];
    let mut scanned = 0;
    while out.len() < max && scanned < 64 * 1024 {
        let len = (4096 - (sp as usize & 4095)).min(buf.len());
        if sys::read_mem(tid, sp, &mut buf[..len]).is_err() {
            break;
        }
        for w in buf[..len].chunks_exact(8) {
            let v = u64::from_ne_bytes(w.try_into().unwrap_or([0; 8]));
            if maps.iter().any(|m| m.exec && v >= m.start && v < m.end) && after_call(tid, v) {
                out.push(symbolize(v, &maps, &mut cache));
                if out.len() >= max {
                    break;
                }
            }
        }
        sp += len as u64;
        scanned += len;
    }
    out
}
