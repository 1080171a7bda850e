//! Code placed inside tracees.
//!
//! Empty for now: the vDSO is neutralized by rewriting `AT_SYSINFO_EHDR` at
//! the exec stop (see `tracer/src/exec.rs`), so no stub code is needed, and
//! the in-tracee fast path for time queries (a shared page with the virtual
//! clock, issue 7) is not written yet. This crate is where it will live.
