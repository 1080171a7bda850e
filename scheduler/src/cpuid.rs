//! The fixed CPU identity every guest sees.
//!
//! `cpuid` faults in every tracee and is answered from this table: one
//! generic x86-64 (v3 level) Intel CPU, with RDRAND and RDSEED masked so
//! runtimes never reach hardware randomness. The tracer restricts the
//! feature bits to what the host really has (claiming an instruction the host
//! lacks would fault) and fills leaf 0xD, which describes the XSAVE layout the
//! kernel enabled in XCR0 and so must be the host's own.

use std::collections::BTreeMap;

pub type Regs = [u32; 4]; // eax, ebx, ecx, edx

/// Feature registers that are ANDed with the host's.
const FEATURE_LEAVES: [(u32, u32); 3] = [(1, 0), (7, 0), (0x8000_0001, 0)];

const RDRAND_ECX_BIT: u32 = 1 << 30;
const RDSEED_EBX_BIT: u32 = 1 << 18;
const OSXSAVE_ECX_BIT: u32 = 1 << 27;

#[derive(Clone, Debug)]
pub struct CpuidTable {
    leaves: BTreeMap<(u32, u32), Regs>,
    /// Features dropped because the host lacks them, as (leaf, register, mask).
    pub dropped: Vec<(u32, &'static str, u32)>,
}

fn s4(s: &[u8]) -> u32 {
    u32::from_le_bytes([s[0], s[1], s[2], s[3]])
}

impl CpuidTable {
    /// The fixed table for a machine of `ncpus` logical CPUs.
    pub fn fixed(ncpus: u32) -> CpuidTable {
        let mut l = BTreeMap::new();
        let vendor = b"GenuineIntel";
        l.insert(
            (0, 0),
            [
                0xd,
                s4(&vendor[0..4]),
                s4(&vendor[8..12]),
                s4(&vendor[4..8]),
            ],
        );
        let ecx1 = (1 << 0)
            | (1 << 1)
            | (1 << 9)
            | (1 << 12)
            | (1 << 13)
            | (1 << 19)
            | (1 << 20)
            | (1 << 22)
            | (1 << 23)
            | (1 << 25)
            | (1 << 26)
            | OSXSAVE_ECX_BIT
            | (1 << 28)
            | (1 << 29);
        let edx1 = (1 << 0)
            | (1 << 1)
            | (1 << 2)
            | (1 << 3)
            | (1 << 4)
            | (1 << 5)
            | (1 << 6)
            | (1 << 7)
            | (1 << 8)
            | (1 << 9)
            | (1 << 11)
            | (1 << 12)
            | (1 << 13)
            | (1 << 14)
            | (1 << 15)
            | (1 << 16)
            | (1 << 17)
            | (1 << 19)
            | (1 << 23)
            | (1 << 24)
            | (1 << 25)
            | (1 << 26)
            | (1 << 27);
        // Family 6, model 0x9E, stepping 10; CLFLUSH line 64 bytes.
        l.insert((1, 0), [0x0009_06EA, 0x0001_0800, ecx1, edx1]);
        l.insert((2, 0), [0x00FE_FF01, 0, 0, 0]);
        // Deterministic cache parameters (leaf 4): L1d, L1i, L2, L3.
        l.insert((4, 0), [0x121, 0x01C0_003F, 63, 0]);
        l.insert((4, 1), [0x122, 0x01C0_003F, 63, 0]);
        l.insert((4, 2), [0x143, 0x03C0_003F, 1023, 0]);
        l.insert(
            (4, 3),
            [0x163 | ((ncpus.max(1) - 1) << 14), 0x03C0_003F, 32767, 0],
        );
        // BMI1, AVX2, BMI2, ERMS, ADX, CLFLUSHOPT. No RDSEED.
        let ebx7 = (1 << 3) | (1 << 5) | (1 << 8) | (1 << 9) | (1 << 19) | (1 << 23);
        l.insert((7, 0), [0, ebx7, 0, 0]);
        // Topology: one thread per core, ncpus cores.
        l.insert((0xb, 0), [0, 1, 0x100, 0]);
        l.insert(
            (0xb, 1),
            [32 - ncpus.max(1).leading_zeros(), ncpus, 0x201, 0],
        );
        l.insert((0x8000_0000, 0), [0x8000_0008, 0, 0, 0]);
        // LAHF, LZCNT, PREFETCHW; SYSCALL, NX, 1G pages, RDTSCP, LM.
        l.insert(
            (0x8000_0001, 0),
            [
                0,
                0,
                1 | (1 << 5) | (1 << 8),
                (1 << 11) | (1 << 20) | (1 << 26) | (1 << 27) | (1 << 29),
            ],
        );
        let mut brand = [0u8; 48];
        let name = b"detrun virtual CPU @ 2.00GHz";
        brand[..name.len()].copy_from_slice(name);
        for i in 0..3u32 {
            let o = (i * 16) as usize;
            l.insert(
                (0x8000_0002 + i, 0),
                [
                    s4(&brand[o..]),
                    s4(&brand[o + 4..]),
                    s4(&brand[o + 8..]),
                    s4(&brand[o + 12..]),
                ],
            );
        }
        l.insert((0x8000_0006, 0), [0, 0, (1024 << 16) | (6 << 12) | 64, 0]);
        l.insert((0x8000_0007, 0), [0, 0, 0, 1 << 8]);
        l.insert((0x8000_0008, 0), [0x3030, 0, 0, 0]);
        CpuidTable {
            leaves: l,
            dropped: Vec::new(),
        }
    }

    /// Restrict feature bits to the host's and take leaf 0xD from it.
    /// `host(leaf, subleaf)` executes the real instruction.
    pub fn restrict_to(&mut self, host: impl Fn(u32, u32) -> Regs) {
        for (leaf, sub) in FEATURE_LEAVES {
            let h = host(leaf, sub);
            if let Some(r) = self.leaves.get_mut(&(leaf, sub)) {
                let names = ["eax", "ebx", "ecx", "edx"];
                // leaf 1 eax is the signature, not features.
                let first = if leaf == 1 || leaf == 0x8000_0001 {
                    2
                } else {
                    1
                };
                for i in first..4 {
                    let missing = r[i] & !h[i];
                    if missing != 0 {
                        self.dropped.push((leaf, names[i], missing));
                        r[i] &= h[i];
                    }
                }
            }
        }
        // OSXSAVE mirrors CR4, which the host kernel decides.
        let h1 = host(1, 0);
        if let Some(r) = self.leaves.get_mut(&(1, 0)) {
            r[2] = (r[2] & !OSXSAVE_ECX_BIT) | (h1[2] & OSXSAVE_ECX_BIT);
        }
        for sub in 0..64 {
            let h = host(0xd, sub);
            if h != [0; 4] {
                self.leaves.insert((0xd, sub), h);
            }
        }
        self.mask_randomness();
    }

    fn mask_randomness(&mut self) {
        if let Some(r) = self.leaves.get_mut(&(1, 0)) {
            r[2] &= !RDRAND_ECX_BIT;
        }
        if let Some(r) = self.leaves.get_mut(&(7, 0)) {
            r[1] &= !RDSEED_EBX_BIT;
        }
    }

    /// The answer to `cpuid` with `eax = leaf`, `ecx = subleaf`.
    pub fn lookup(&self, leaf: u32, subleaf: u32) -> Regs {
        let sub = match leaf {
            4 | 7 | 0xb | 0xd | 0xf | 0x10 | 0x12 | 0x14 | 0x17 | 0x18 | 0x1f => subleaf,
            _ => 0,
        };
        match self.leaves.get(&(leaf, sub)) {
            Some(r) => *r,
            // Topology leaves report their subleaf even when invalid.
            None if leaf == 0xb => [0, 0, subleaf & 0xff, 0],
            None => [0; 4],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn randomness_is_masked_even_if_host_has_it() {
        let mut t = CpuidTable::fixed(4);
        t.restrict_to(|_, _| [u32::MAX; 4]);
        assert_eq!(t.lookup(1, 0)[2] & RDRAND_ECX_BIT, 0);
        assert_eq!(t.lookup(7, 0)[1] & RDSEED_EBX_BIT, 0);
        let v = t.lookup(0, 0);
        let mut s = Vec::new();
        for r in [v[1], v[3], v[2]] {
            s.extend_from_slice(&r.to_le_bytes());
        }
        assert_eq!(&s, b"GenuineIntel");
    }

    #[test]
    fn features_the_host_lacks_are_dropped() {
        let mut t = CpuidTable::fixed(2);
        t.restrict_to(|leaf, _| if leaf == 7 { [0; 4] } else { [u32::MAX; 4] });
        assert_eq!(t.lookup(7, 0)[1], 0);
        assert!(t.dropped.iter().any(|d| d.0 == 7));
        assert_ne!(t.lookup(1, 0)[2] & (1 << 28), 0, "AVX kept");
    }
}
