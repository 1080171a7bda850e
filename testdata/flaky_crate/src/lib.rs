//! A guest crate for `detrun hunt`: a tiny library with three unit tests,
//! one of which (`flaky_counter_race`) is flaky.
//!
//! [`racy_increment`] is a read-modify-write done as a separate atomic
//! `load` and `store` with a `yield_now()` (a `sched_yield` syscall) in
//! between, so an increment made by another thread inside that window is
//! lost. The flaky test runs two threads that increment once each and
//! asserts the total, over several rounds. The second thread takes a head
//! start first (yield, syscall-free work, yield). Under detrun's default
//! schedule (run a thread until it blocks or yields, then round-robin in
//! creation order) its yield hands the turn back to the first thread, which
//! finishes its increment first, so the test passes; natively the
//! syscall-free work keeps the second thread behind the first and the test
//! passes almost always. Seeds of `detrun --chaos` that switch threads inside the window
//! make it fail.

use std::sync::atomic::{AtomicU64, Ordering};

/// Add one to `c`, racily: another thread's increment between the load and
/// the store is overwritten.
pub fn racy_increment(c: &AtomicU64) {
    let v = c.load(Ordering::SeqCst);
    std::thread::yield_now(); // a syscall inside the window
    c.store(v + 1, Ordering::SeqCst);
}

/// Add one to `c` atomically.
pub fn increment(c: &AtomicU64) {
    c.fetch_add(1, Ordering::SeqCst);
}

/// Sum of `1..=n`.
pub fn triangle(n: u64) -> u64 {
    n * (n + 1) / 2
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Syscall-free work: costs no scheduling events under detrun.
    fn busy_work(n: u64) -> u64 {
        let mut x = 0u64;
        for i in 0..n {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        x
    }

    #[test]
    fn triangle_numbers() {
        assert_eq!(triangle(0), 0);
        assert_eq!(triangle(1), 1);
        assert_eq!(triangle(10), 55);
    }

    #[test]
    fn atomic_counter() {
        let c = Arc::new(AtomicU64::new(0));
        let hs: Vec<_> = (0..2)
            .map(|_| {
                let c = Arc::clone(&c);
                std::thread::spawn(move || {
                    for _ in 0..100 {
                        increment(&c);
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(c.load(Ordering::SeqCst), 200);
    }

    /// Flaky: two threads each increment once through `racy_increment`;
    /// an unlucky interleaving loses one of the two updates.
    #[test]
    fn flaky_counter_race() {
        for round in 0..8 {
            let c = Arc::new(AtomicU64::new(0));
            let first = {
                let c = Arc::clone(&c);
                std::thread::spawn(move || racy_increment(&c))
            };
            let second = {
                let c = Arc::clone(&c);
                std::thread::spawn(move || {
                    // A head start for the first thread: a yield, some
                    // syscall-free work (free under detrun, a millisecond
                    // natively) and another yield.
                    std::thread::yield_now();
                    busy_work(300_000);
                    std::thread::yield_now();
                    racy_increment(&c);
                })
            };
            first.join().unwrap();
            second.join().unwrap();
            assert_eq!(c.load(Ordering::SeqCst), 2, "lost update in round {round}");
        }
    }
}
