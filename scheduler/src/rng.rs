//! Seeded random streams. One seed expands into independent ChaCha20
//! streams, split first by purpose and then by an index (the creation order
//! of the process that draws from it), so drawing more from one stream never
//! shifts another.

use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};

/// What a stream is for. The discriminant is part of the stream id: never
/// renumber.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// getrandom, /dev/urandom, /dev/random.
    App = 1,
    /// AT_RANDOM bytes at exec.
    AtRandom = 2,
    /// Scheduling decisions.
    Sched = 3,
    /// Network and fault decisions.
    Fault = 4,
    /// Identifiers derived from the seed (boot id, uuids).
    Ident = 5,
    /// The clock's sub-second starting phase.
    Clock = 6,
    /// Which shared globals a process watches (data points).
    Watch = 7,
}

#[derive(Clone, Debug)]
pub struct Streams {
    key: [u8; 32],
}

impl Streams {
    pub fn new(seed: u64) -> Streams {
        // Spread the seed over the key with a fixed expansion so that seeds
        // 0 and 1 give unrelated keys.
        let mut base = ChaCha20Rng::seed_from_u64(seed ^ 0x6465_7472_756e_0001);
        let mut key = [0u8; 32];
        base.fill_bytes(&mut key);
        Streams { key }
    }

    /// The stream for `purpose` and `index`.
    pub fn stream(&self, purpose: Purpose, index: u64) -> ChaCha20Rng {
        let mut r = ChaCha20Rng::from_seed(self.key);
        r.set_stream(((purpose as u64) << 48) ^ index);
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(s: &Streams, p: Purpose, i: u64) -> [u8; 16] {
        let mut b = [0u8; 16];
        s.stream(p, i).fill_bytes(&mut b);
        b
    }

    #[test]
    fn streams_are_reproducible_and_independent() {
        let a = Streams::new(7);
        let b = Streams::new(7);
        assert_eq!(bytes(&a, Purpose::App, 0), bytes(&b, Purpose::App, 0));
        assert_ne!(bytes(&a, Purpose::App, 0), bytes(&a, Purpose::App, 1));
        assert_ne!(bytes(&a, Purpose::App, 0), bytes(&a, Purpose::Sched, 0));
        assert_ne!(
            bytes(&a, Purpose::App, 0),
            bytes(&Streams::new(8), Purpose::App, 0)
        );
    }
}
