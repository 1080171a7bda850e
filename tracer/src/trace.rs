//! The schedule trace (`--trace FILE`): one JSON object per line, in the
//! order things happened. Two kinds of record:
//!
//! ```text
//! {"d":12,"t":48000,"run":1}                      scheduling decision 12 at virtual ns 48000: thread 1 runs
//! {"t":49000,"tid":1,"sys":"futex","args":[...],"ret":0}      an intercepted syscall and its result
//! {"t":50000,"tid":1,"sys":"read","args":[...],"park":"io"}   ... that parked the thread
//! {"t":51000,"tid":1,"preempt":{"steps":37,"hits":0}}        preempted 37 instructions after its last event
//! ```
//!
//! Threads are numbered in creation order (the world's ids), times are
//! virtual nanoseconds since the start, and "ret" is present when detrun
//! answered the call itself. Pointer arguments are the guest's addresses,
//! which are deterministic (ASLR is off). The same seed gives the same bytes.

use crate::sys::Args;
use std::io::{BufWriter, Write};
use std::path::Path;

pub struct Trace {
    out: BufWriter<std::fs::File>,
    err: Option<std::io::Error>,
}

impl Trace {
    /// Go on writing at the end of an existing trace (a branch's copy).
    pub fn append(path: &Path) -> std::io::Result<Trace> {
        let f = std::fs::OpenOptions::new().append(true).open(path)?;
        Ok(Trace {
            out: BufWriter::with_capacity(1 << 16, f),
            err: None,
        })
    }

    pub fn create(path: &Path) -> std::io::Result<Trace> {
        Ok(Trace {
            out: BufWriter::with_capacity(1 << 16, std::fs::File::create(path)?),
            err: None,
        })
    }

    fn put(&mut self, r: std::fmt::Arguments) {
        if self.err.is_none() {
            if let Err(e) = self.out.write_fmt(r) {
                self.err = Some(e);
            }
        }
    }

    pub fn decision(&mut self, n: u64, t: u64, vt: u32) {
        self.put(format_args!("{{\"d\":{n},\"t\":{t},\"run\":{vt}}}\n"));
    }

    pub fn syscall(&mut self, t: u64, vt: u32, a: &Args, ret: Option<i64>, park: Option<&str>) {
        let name = crate::sysnames::name(a.nr).unwrap_or("?");
        let [a0, a1, a2, a3, a4, a5] = a.a;
        self.put(format_args!(
            "{{\"t\":{t},\"tid\":{vt},\"sys\":\"{name}\",\"args\":[{a0},{a1},{a2},{a3},{a4},{a5}]"
        ));
        if let Some(r) = ret {
            self.put(format_args!(",\"ret\":{r}"));
        }
        if let Some(p) = park {
            self.put(format_args!(",\"park\":\"{p}\""));
        }
        self.put(format_args!("}}\n"));
    }

    /// An instruction-level preemption of thread `vt`.
    pub fn insn_preemption(&mut self, t: u64, vt: u32, rip: u64, p: (u32, u32, u32)) {
        let (steps, hits, after) = p;
        self.put(format_args!(
            "{{\"t\":{t},\"tid\":{vt},\"preempt\":{{\"rip\":{rip},\"steps\":{steps},\"hits\":{hits}"
        ));
        if after > 0 {
            self.put(format_args!(",\"after\":{after}"));
        }
        self.put(format_args!("}}}}\n"));
    }

    /// A sync-op point: the function entered and its first argument (the
    /// lock, condition or thread).
    pub fn sync_point(&mut self, t: u64, vt: u32, func: &str, obj: u64) {
        self.put(format_args!(
            "{{\"t\":{t},\"tid\":{vt},\"sync\":\"{func}\",\"obj\":{obj}}}\n"
        ));
    }

    /// A spin wait preempted at `rip`, the lowest address of its loop.
    pub fn spin_point(&mut self, t: u64, vt: u32, rip: u64) {
        self.put(format_args!("{{\"t\":{t},\"tid\":{vt},\"spin\":{rip}}}\n"));
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        if let Some(e) = self.err.take() {
            return Err(e);
        }
        self.out.flush()
    }
}
