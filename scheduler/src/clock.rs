//! The virtual clock. Time is a single monotonic nanosecond counter that
//! advances by a fixed cost per intercepted event and jumps to the next timer
//! when nothing can run. Every clock id is a fixed offset of it, so no clock
//! can disagree with another or go backwards.

use serde::Serialize;

/// Nanoseconds per second.
pub const NS: u64 = 1_000_000_000;

/// Which clock a guest asked for, already decoded from the clock id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockId {
    Realtime,
    Monotonic,
    Boottime,
    ProcessCpu,
    ThreadCpu,
}

impl ClockId {
    /// Decode a Linux clock id. Dynamic (negative) CPU clock ids of other
    /// threads are mapped to the CPU clocks; unknown ids give `None` (EINVAL).
    pub fn from_linux(id: i64) -> Option<ClockId> {
        Some(match id {
            0 | 5 | 11 => ClockId::Realtime, // REALTIME, _COARSE, TAI
            1 | 4 | 6 => ClockId::Monotonic, // MONOTONIC, _RAW, _COARSE
            7..=9 => ClockId::Boottime,      // BOOTTIME, REALTIME_ALARM, BOOTTIME_ALARM
            2 => ClockId::ProcessCpu,
            3 => ClockId::ThreadCpu,
            x if x < 0 => {
                // CPUCLOCK encoding: low 2 bits select PROF/VIRT/SCHED, bit 2 says thread.
                if x & 4 != 0 {
                    ClockId::ThreadCpu
                } else {
                    ClockId::ProcessCpu
                }
            }
            _ => return None,
        })
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Clock {
    /// Monotonic nanoseconds since the virtual boot.
    mono: u64,
    /// Monotonic value at the start of the run.
    start: u64,
    /// Realtime nanoseconds since the Unix epoch at `mono == 0`.
    epoch_at_boot: u64,
    /// Cost of one intercepted event.
    pub event_cost: u64,
}

impl Clock {
    /// A clock whose realtime reads `epoch_secs` at the start of the run.
    pub fn new(epoch_secs: u64, event_cost: u64) -> Clock {
        Clock::with_offset(epoch_secs, event_cost, 0)
    }

    /// Like [`Clock::new`], with the run starting `offset_ns` (< 1 s) into
    /// that second: each seed gets its own sub-second phase, so values
    /// derived from the clock alone (glibc's temporary file names, for one)
    /// differ between seeds and concurrent runs do not collide.
    pub fn with_offset(epoch_secs: u64, event_cost: u64, offset_ns: u64) -> Clock {
        // Start as if the machine booted 100 s before the run.
        let boot = 100 * NS;
        let start = boot + offset_ns % NS;
        Clock {
            mono: start,
            start,
            epoch_at_boot: epoch_secs.saturating_mul(NS).saturating_sub(boot),
            event_cost,
        }
    }

    pub fn monotonic(&self) -> u64 {
        self.mono
    }

    pub fn realtime(&self) -> u64 {
        self.epoch_at_boot.saturating_add(self.mono)
    }

    /// Virtual nanoseconds since the run started.
    pub fn elapsed(&self) -> u64 {
        self.mono - self.start
    }

    /// Convert an absolute deadline on `clock` to monotonic nanoseconds.
    pub fn to_monotonic(&self, clock: ClockId, abs: u64) -> u64 {
        match clock {
            ClockId::Realtime => abs.saturating_sub(self.epoch_at_boot),
            _ => abs,
        }
    }

    /// Read a clock; CPU clocks are given by the caller's own counters.
    pub fn read(&self, clock: ClockId, cpu_ns: u64) -> u64 {
        match clock {
            ClockId::Realtime => self.realtime(),
            ClockId::Monotonic | ClockId::Boottime => self.mono,
            ClockId::ProcessCpu | ClockId::ThreadCpu => cpu_ns,
        }
    }

    /// One intercepted event happened.
    pub fn tick(&mut self) {
        self.mono = self.mono.saturating_add(self.event_cost);
    }

    /// Jump forward (never backward) to `t`.
    pub fn advance_to(&mut self, t: u64) {
        if t > self.mono {
            self.mono = t;
        }
    }

    /// The virtual TSC: 2 GHz nominal, derived from monotonic time.
    pub fn tsc(&self) -> u64 {
        self.mono.saturating_mul(2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clocks_are_offsets_of_one_counter() {
        let mut c = Clock::new(1_700_000_000, 1000);
        let r0 = c.realtime();
        assert_eq!(r0, 1_700_000_000 * NS);
        c.tick();
        assert_eq!(c.realtime() - r0, 1000);
        assert_eq!(c.elapsed(), 1000);
        c.advance_to(5);
        assert_eq!(c.elapsed(), 1000, "advance_to never goes back");
        let abs = c.realtime() + 7 * NS;
        assert_eq!(
            c.to_monotonic(ClockId::Realtime, abs),
            c.monotonic() + 7 * NS
        );
    }

    #[test]
    fn clock_ids_decode() {
        assert_eq!(ClockId::from_linux(0), Some(ClockId::Realtime));
        assert_eq!(ClockId::from_linux(1), Some(ClockId::Monotonic));
        assert_eq!(ClockId::from_linux(7), Some(ClockId::Boottime));
        assert_eq!(ClockId::from_linux(3), Some(ClockId::ThreadCpu));
        assert_eq!(ClockId::from_linux(12), None);
        assert_eq!(ClockId::from_linux(-6), Some(ClockId::ProcessCpu));
    }
}
