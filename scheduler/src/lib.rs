//! The virtual world of detrun.
//!
//! Everything that decides what happens next in a run lives here as plain
//! data: the virtual clock, the seeded random streams, the thread and process
//! table, the run queue and its policy, futex wait queues, timers and the
//! fixed CPU identity, and the virtual network. Nothing in this crate talks to the OS, reads a wall
//! clock or iterates a hash map, so a world is unit-testable without ptrace
//! and a checkpoint of it is a `clone()`.
//!
//! The tracer observes the tracees, turns each event into a call on
//! [`World`], and applies the answer.

pub mod clock;
pub mod cpuid;
pub mod fsview;
pub mod net;
pub mod rng;
pub mod world;

pub use clock::{Clock, ClockId};
pub use rng::{Purpose, Streams};
pub use world::{
    Config, Delivery, FutexKey, InsnPoint, Next, Policy, ProcId, Segment, SigTarget, Tid,
    TimerSpec, Wait, WakeReason, World,
};
