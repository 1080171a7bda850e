//! The mechanism of detrun: spawn the sandbox, the seccomp filter, the
//! ptrace event loop, tracee registers and memory, syscall injection at
//! exec, instruction emulation (rdtsc, cpuid), and the syscall handlers that
//! turn each intercepted call into an operation on the world.

pub mod alloc;
pub mod backtrace;
pub mod checkpoint;
pub mod config;
pub mod exec;
pub mod filter;
pub mod handlers;
pub mod net;
pub mod netns;
pub mod patch;
pub mod schedule;
pub mod selftime;
pub mod spawn;
pub mod summary;
pub mod supervisor;
pub mod sys;
pub mod sysnames;
pub mod table;
pub mod trace;
pub mod vdso;
pub mod vfiles;

pub use config::RunConfig;
pub use summary::Summary;
pub use supervisor::{Supervisor, EXIT_DEADLOCK, EXIT_HAZARD, EXIT_INTERNAL, EXIT_TIMEOUT};
