//! The seccomp filter installed in the guest before exec, built from the
//! syscall table (`table.rs`).
//!
//! It is an allow-list: the calls the table allows run at native speed
//! because their results are deterministic given deterministic inputs
//! (memory management, file I/O on regular files, identity queries answered
//! by namespaces...). Everything else traps to the supervisor, which either
//! virtualizes it or, for a syscall it does not know, reports it by name
//! (fail closed). The argument rules of `Action::Args` calls are here.

use crate::table::{Action, TABLE};
use seccompiler::{
    sock_filter, BpfProgram, SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op,
    SeccompCondition as Cond, SeccompFilter, SeccompRule, TargetArch,
};
use std::collections::BTreeMap;

const ARCH_GET_CPUID: u64 = 0x1011;
const ARCH_SET_CPUID: u64 = 0x1012;
const PR_SET_TSC: u64 = 26;
const ADDR_NO_RANDOMIZE: u64 = 0x0040000;

fn cond(arg: u8, len: Len, op: Op, v: u64) -> Cond {
    Cond::new(arg, len, op, v).expect("static filter condition")
}

fn rule(c: Vec<Cond>) -> SeccompRule {
    SeccompRule::new(c).expect("static filter rule")
}

const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JA: u16 = 0x05;
const BPF_JEQ_K: u16 = 0x15;
const BPF_JGT_K: u16 = 0x25;
const BPF_JGE_K: u16 = 0x35;
const BPF_RET_K: u16 = 0x06;
const RET_ALLOW: u32 = 0x7fff_0000;
const RET_KILL_PROCESS: u32 = 0x8000_0000;
const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;

fn insn(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

/// Sorted numbers as maximal runs `[lo, hi]`.
fn runs(nrs: &[u32]) -> Vec<(u32, u32)> {
    let mut out: Vec<(u32, u32)> = Vec::new();
    for &n in nrs {
        match out.last_mut() {
            Some((_, hi)) if *hi + 1 == n => *hi = n,
            _ => out.push((n, n)),
        }
    }
    out
}

/// A binary search over `runs` (nr already loaded): `ret ALLOW` inside a
/// run, otherwise a jump to the end of the emitted code. seccompiler emits a
/// linear chain (~1000 instructions for this list), which the kernel walks
/// for every trapped call and emulates for every syscall number when the
/// filter is attached (1.2 ms here); the tree is a few dozen steps.
fn search(runs: &[(u32, u32)], out: &mut Vec<sock_filter>, misses: &mut Vec<usize>) {
    if runs.len() == 1 {
        let (lo, hi) = runs[0];
        out.push(insn(BPF_JGE_K, lo, 0, 2)); // nr < lo: miss
        out.push(insn(BPF_JGT_K, hi, 1, 0)); // nr > hi: miss
        out.push(insn(BPF_RET_K, RET_ALLOW, 0, 0));
        misses.push(out.len());
        out.push(insn(BPF_JA, 0, 0, 0));
        return;
    }
    let mid = runs.len() / 2;
    // nr >= the right half's first: jump over the left half (a long jump,
    // so no subtree is limited to the 255 steps of a conditional jump).
    out.push(insn(BPF_JGE_K, runs[mid].0, 0, 1));
    let ja = out.len();
    out.push(insn(BPF_JA, 0, 0, 0));
    search(&runs[..mid], out, misses);
    out[ja].k = (out.len() - ja - 1) as u32;
    search(&runs[mid..], out, misses);
}

/// The allow-list as a search tree in front of `rest` (seccompiler's
/// program for the calls with argument conditions and the default action),
/// and any call made from the instruction ending at `ip` allowed.
fn with_tree(allowed: &[u32], ip: Option<u64>, rest: BpfProgram) -> BpfProgram {
    let mut out = vec![
        insn(BPF_LD_W_ABS, 4, 0, 0), // arch
        insn(BPF_JEQ_K, AUDIT_ARCH_X86_64, 1, 0),
        insn(BPF_RET_K, RET_KILL_PROCESS, 0, 0),
        insn(BPF_LD_W_ABS, 0, 0, 0), // nr
    ];
    let mut misses = Vec::new();
    let r = runs(allowed);
    if !r.is_empty() {
        search(&r, &mut out, &mut misses);
    }
    let end = out.len();
    for m in misses {
        out[m].k = (end - m - 1) as u32;
    }
    if let Some(ip) = ip {
        // seccomp_data.instruction_pointer: low word at 8, high at 12.
        out.extend([
            insn(BPF_LD_W_ABS, 8, 0, 0),
            insn(BPF_JEQ_K, ip as u32, 0, 3),
            insn(BPF_LD_W_ABS, 12, 0, 0),
            insn(BPF_JEQ_K, (ip >> 32) as u32, 0, 1),
            insn(BPF_RET_K, RET_ALLOW, 0, 0),
        ]);
    }
    out.extend(rest);
    out
}

/// Build the BPF program. Built once in the supervisor, before fork.
/// `allow_ip`: the end of the stat code's syscall instruction, whose calls
/// pass (the stat fast path).
/// `join_net`: every socket creation traps (`Action::JoinNet`), so that threads
/// join a network namespace made after they started.
pub fn build(
    fs_virtual: bool,
    net_virtual: bool,
    join_net: bool,
    allow_ip: Option<u64>,
) -> Result<BpfProgram, String> {
    build_with(fs_virtual, net_virtual, join_net, true, allow_ip)
}

fn build_with(
    fs_virtual: bool,
    net_virtual: bool,
    join_net: bool,
    tree: bool,
    allow_ip: Option<u64>,
) -> Result<BpfProgram, String> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    if join_net {
        // unshare: a new user namespace loses the right to join ours.
        rules.insert(
            libc::SYS_unshare,
            vec![rule(vec![cond(
                0,
                Len::Dword,
                Op::MaskedEq(libc::CLONE_NEWUSER as u64),
                0,
            )])],
        );
    } else {
        // socket: local domains run as they are; AF_INET/AF_INET6 trap so
        // that the use of the host's network is reported.
        rules.insert(
            libc::SYS_socket,
            vec![rule(vec![
                cond(0, Len::Dword, Op::Ne, libc::AF_INET as u64),
                cond(0, Len::Dword, Op::Ne, libc::AF_INET6 as u64),
            ])],
        );
    }
    // fcntl: everything but the blocking lock commands.
    rules.insert(
        libc::SYS_fcntl,
        vec![rule(vec![
            cond(1, Len::Dword, Op::Ne, libc::F_SETLKW as u64),
            cond(1, Len::Dword, Op::Ne, libc::F_OFD_SETLKW as u64),
        ])],
    );
    // arch_prctl: everything but CPUID faulting control; re-arming it (our
    // own injection at exec) is allowed.
    rules.insert(
        libc::SYS_arch_prctl,
        vec![
            rule(vec![
                cond(0, Len::Dword, Op::Ne, ARCH_GET_CPUID),
                cond(0, Len::Dword, Op::Ne, ARCH_SET_CPUID),
            ]),
            rule(vec![
                cond(0, Len::Dword, Op::Eq, ARCH_SET_CPUID),
                cond(1, Len::Qword, Op::Eq, 0),
            ]),
        ],
    );
    // prctl: everything but turning TSC trapping off.
    rules.insert(
        libc::SYS_prctl,
        vec![rule(vec![cond(0, Len::Dword, Op::Ne, PR_SET_TSC)])],
    );
    // personality: only settings that keep ASLR off (or a query).
    rules.insert(
        libc::SYS_personality,
        vec![
            rule(vec![cond(
                0,
                Len::Dword,
                Op::MaskedEq(ADDR_NO_RANDOMIZE),
                ADDR_NO_RANDOMIZE,
            )]),
            rule(vec![cond(0, Len::Dword, Op::Eq, 0xffff_ffff)]),
        ],
    );
    let mut allowed: Vec<u32> = Vec::new();
    for x in TABLE {
        let traps = match x.action {
            Action::Allow => false,
            Action::Meta => fs_virtual,
            Action::SockMeta => net_virtual,
            Action::JoinNet => join_net,
            // Without a rule in this configuration: every call traps.
            Action::Args(_) | Action::Trap => true,
        };
        if rules.contains_key(&x.nr) {
            continue;
        }
        if traps {
            continue;
        }
        if tree {
            allowed.push(x.nr as u32);
        } else {
            rules.insert(x.nr, vec![]);
        }
    }
    allowed.sort_unstable();
    allowed.dedup();
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Trace(0),
        SeccompAction::Allow,
        TargetArch::x86_64,
    )
    .map_err(|e| e.to_string())?;
    let rest = BpfProgram::try_from(filter).map_err(|e| e.to_string())?;
    Ok(with_tree(&allowed, allow_ip, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The classic-BPF subset both programs use, over one seccomp_data.
    fn run(p: &[sock_filter], data: &[u32; 16]) -> (u32, usize) {
        let (mut pc, mut a) = (0usize, 0u32);
        for steps in 1.. {
            let i = &p[pc];
            let k = i.k;
            let jump = |c: bool| if c { i.jt as usize } else { i.jf as usize };
            pc += 1;
            match i.code {
                0x20 => a = data[k as usize / 4],
                0x54 => a &= k,
                BPF_JA => pc += k as usize,
                BPF_JEQ_K => pc += jump(a == k),
                BPF_JGT_K => pc += jump(a > k),
                BPF_JGE_K => pc += jump(a >= k),
                0x45 => pc += jump(a & k != 0),
                BPF_RET_K => return (k, steps),
                c => panic!("opcode {c:#x}"),
            }
        }
        unreachable!()
    }

    #[test]
    fn filter_builds() {
        let p = build(true, true, true, None).expect("filter");
        assert!(p.len() > 50 && p.len() < 4096, "{} instructions", p.len());
    }

    /// The tree answers like seccompiler's own linear program: every
    /// syscall number (and x32 and foreign-arch ones), with arguments that
    /// hit each conditional rule both ways.
    #[test]
    fn tree_matches_linear_program() {
        for (fs, net, join) in [
            (true, true, true),
            (true, true, false),
            (false, false, false),
            (true, false, false),
        ] {
            let tree = build_with(fs, net, join, true, None).expect("tree");
            let linear = build_with(fs, net, join, false, None).expect("linear");
            let (mut allowed, mut longest) = (0, 0);
            for nr in (0..=500u32).chain([0x4000_0000, 0x4000_0001, u32::MAX]) {
                for arch in [AUDIT_ARCH_X86_64, 0x4000_0003] {
                    for a0 in [0u32, 1, 2, 10, 26, 0x1012, 0x40, 0x1002_0000, 0xffff_ffff] {
                        let mut d = [0u32; 16];
                        d[0] = nr;
                        d[1] = arch;
                        d[4] = a0;
                        d[6] = a0;
                        let ((t, n), (l, _)) = (run(&tree, &d), run(&linear, &d));
                        assert_eq!(t, l, "nr {nr} arch {arch:#x} arg {a0}");
                        longest = longest.max(n);
                        allowed += (t == RET_ALLOW) as u32;
                    }
                }
            }
            assert!(allowed > 1000, "the allow-list allows");
            // A trapped call walks the tree and the few conditional rules.
            assert!(longest < 80, "{longest} steps (linear: {})", linear.len());
        }
    }

    /// With a late network namespace, every socket creation and the
    /// privilege drops trap; without, local sockets run.
    #[test]
    fn join_net_traps_socket_creation_and_privilege_drops() {
        let verdict = |p: &[sock_filter], nr: i64, a0: u32| {
            let mut d = [0u32; 16];
            d[0] = nr as u32;
            d[1] = AUDIT_ARCH_X86_64;
            d[4] = a0;
            run(p, &d).0 == RET_ALLOW
        };
        let join = build(true, true, true, None).expect("filter");
        let plain = build(true, true, false, None).expect("filter");
        let unix = libc::AF_UNIX as u32;
        assert!(!verdict(&join, libc::SYS_socket, unix));
        assert!(verdict(&plain, libc::SYS_socket, unix));
        assert!(!verdict(&plain, libc::SYS_socket, libc::AF_INET as u32));
        for nr in crate::table::with_action(|a| a == Action::JoinNet) {
            if nr == libc::SYS_unshare {
                continue; // its rule: below
            }
            assert!(!verdict(&join, nr, 0), "{nr} traps");
            assert!(verdict(&plain, nr, 0), "{nr} runs");
        }
        let newuser = libc::CLONE_NEWUSER as u32;
        assert!(!verdict(
            &join,
            libc::SYS_unshare,
            newuser | libc::CLONE_NEWNS as u32
        ));
        assert!(verdict(&join, libc::SYS_unshare, libc::CLONE_NEWNS as u32));
        assert!(verdict(&plain, libc::SYS_unshare, newuser));
    }

    /// Calls from the stat code's instruction pass; the same call from
    /// anywhere else traps.
    #[test]
    fn the_stat_code_instruction_passes() {
        let ip = 0x7e00_0006_2084u64;
        let p = build(true, true, true, Some(ip)).expect("filter");
        let mut d = [0u32; 16];
        d[0] = libc::SYS_statx as u32;
        d[1] = AUDIT_ARCH_X86_64;
        assert_ne!(run(&p, &d).0, RET_ALLOW, "statx traps");
        d[2] = ip as u32;
        d[3] = (ip >> 32) as u32;
        assert_eq!(run(&p, &d).0, RET_ALLOW, "from the stat code");
        d[3] += 1;
        assert_ne!(run(&p, &d).0, RET_ALLOW, "same low word elsewhere");
    }

    /// Every syscall number, in every configuration, is treated by the
    /// built filter as the table says, for arguments that hit each rule
    /// both ways; and every trapped number has a handler.
    #[test]
    fn filter_agrees_with_the_table() {
        use crate::table::{entry, Family};
        let args = [
            0u32,
            1,
            2,
            7,
            10,
            26,
            38,
            0x1011,
            0x1012,
            0x40,
            0x1002_0000,
            0xffff_ffff,
        ];
        let mut handled_and_trapped = std::collections::BTreeSet::new();
        for (fs, net, join) in [
            (true, true, true),
            (true, true, false),
            (false, false, false),
            (true, false, false),
            (false, true, true),
        ] {
            let p = build(fs, net, join, None).expect("filter");
            for nr in 0..=511i64 {
                let x = entry(nr);
                let verdicts: Vec<bool> = args
                    .iter()
                    .map(|&a0| {
                        let mut d = [0u32; 16];
                        d[0] = nr as u32;
                        d[1] = AUDIT_ARCH_X86_64;
                        (d[4], d[6]) = (a0, a0);
                        run(&p, &d).0 != RET_ALLOW
                    })
                    .collect();
                let (all, any) = (verdicts.iter().all(|&t| t), verdicts.iter().any(|&t| t));
                let name = crate::sysnames::name(nr).unwrap_or("?");
                let ok = match x.action {
                    Action::Allow => !any,
                    Action::Trap => all,
                    Action::Meta => all == fs && any == fs,
                    Action::SockMeta => all == net && any == net,
                    // unshare traps for CLONE_NEWUSER only.
                    Action::JoinNet => any == join && (!join || all || nr == libc::SYS_unshare),
                    // socket: every domain traps while threads may join.
                    Action::Args(_) => any && (!all || (nr == libc::SYS_socket && join)),
                };
                assert!(
                    ok,
                    "{name} ({nr}) is {:?}, filter {verdicts:?} in {fs} {net} {join}",
                    x.action
                );
                if any {
                    assert_ne!(x.family, Family::None, "{name} traps with no handler");
                    handled_and_trapped.insert(nr);
                }
            }
        }
        // Every handler's number traps in some configuration.
        for x in crate::table::TABLE {
            if !matches!(x.family, Family::None | Family::Unknown) {
                let name = crate::sysnames::name(x.nr).unwrap_or("?");
                assert!(
                    handled_and_trapped.contains(&x.nr),
                    "{name}'s handler is unreachable"
                );
            }
        }
        assert_eq!(entry(libc::SYS_mq_open).family, Family::Unknown);
    }
}
