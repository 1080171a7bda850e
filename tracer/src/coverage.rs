//! What interleavings a run reached, for hunt's feedback (`--coverage`).
//!
//! An event is an operation on a synchronization object: a sync-op point
//! (the object is the call's first argument, the site its return address)
//! or an atomic instruction (the object is the memory it changes, the site
//! the instruction). When a thread's event follows another thread's last
//! event on the same object, the ordered pair of the two (operation and
//! site each, not the threads or the object) is covered: which code's
//! write a read saw, in the reads-from style of Maple and RFF. Two runs
//! that cover the same pairs took the same orders at every object, as far
//! as these points see; a new pair is a new order.

use std::collections::{BTreeSet, HashMap};

/// The events and pairs of one run.
#[derive(Default)]
pub struct Coverage {
    /// Per (address space, object): the thread and the event last there.
    last: HashMap<(u64, u64), (u32, u64)>,
    pub pairs: BTreeSet<u64>,
    pub events: u64,
}

/// A 64-bit mix of two values (splitmix64's finalizer): stable across
/// runs and builds, unlike std's hasher.
pub fn mix(a: u64, b: u64) -> u64 {
    let mut z = a ^ b.rotate_left(29) ^ 0x9e37_79b9_7f4a_7c15;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Coverage {
    /// Thread `thread` did operation `op` at code `site` on `obj` in
    /// address space `space`.
    pub fn event(&mut self, space: u64, obj: u64, thread: u32, op: u64, site: u64) {
        self.events += 1;
        let ev = mix(op, site);
        if let Some((t, prev)) = self.last.insert((space, obj), (thread, ev)) {
            if t != thread {
                self.pairs.insert(mix(prev, ev));
            }
        }
    }

    /// `{"events": N, "decisions": D, "pairs": [...]}`: the file hunt reads.
    pub fn to_json(&self, decisions: u64) -> String {
        let pairs: Vec<String> = self.pairs.iter().map(u64::to_string).collect();
        format!(
            "{{\"events\":{},\"decisions\":{decisions},\"pairs\":[{}]}}\n",
            self.events,
            pairs.join(",")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_of_two_threads_on_one_object() {
        let mut c = Coverage::default();
        c.event(0, 0x10, 1, 1, 0x400);
        c.event(0, 0x10, 1, 2, 0x410);
        assert!(c.pairs.is_empty(), "one thread's events make no pair");
        c.event(0, 0x20, 2, 1, 0x500);
        assert!(c.pairs.is_empty(), "another object makes no pair");
        c.event(1, 0x10, 2, 1, 0x500);
        assert!(c.pairs.is_empty(), "another address space makes no pair");
        c.event(0, 0x10, 2, 1, 0x500);
        assert_eq!(c.pairs.len(), 1);
        // The other order is another pair; the same order again is not.
        c.event(0, 0x10, 1, 2, 0x410);
        assert_eq!(c.pairs.len(), 2);
        c.event(0, 0x10, 2, 1, 0x500);
        c.event(0, 0x10, 1, 2, 0x410);
        assert_eq!(c.pairs.len(), 2, "the same orders again add nothing");
        assert_eq!(c.events, 8);
    }
}
