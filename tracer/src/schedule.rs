//! Schedule files (`--record-schedule FILE`, `--schedule FILE`).
//!
//! Version 1 is line-oriented text:
//!
//! ```text
//! # detrun schedule v1
//! seed 1337
//! policy chaos
//! 0 12 p
//! 1 3 e
//! ```
//!
//! After the header (`seed`, `policy`: the run that recorded it; `points
//! sync` when sync-op entries and thread start were scheduling points, as
//! a replay must make them again), each line
//! is one turn: the thread (numbered in creation order from 0), how many
//! intercepted events it ran, and `p` if the turn ended because the
//! scheduler preempted it or `e` if the thread ended the turn itself
//! (blocked, yielded, exited). An optional fourth field on a `p` line is
//! the number of instructions the thread ran after its last event before
//! the preemption (an instruction-level preemption point, reached by
//! single-stepping); `S@H` means S single-steps, then H executions of the
//! instruction reached (the breakpoint variant), and `S@H+A` A further
//! single-steps after those executions. Replaying follows the turns in order and then
//! continues with the default policy; a prefix of a schedule is a valid
//! schedule (that is how `analyze` bisects).

use detrun_scheduler::Segment;
use std::fmt::Write as _;
use std::path::Path;

pub const HEADER: &str = "# detrun schedule v1";

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    pub seed: u64,
    pub policy: String,
    /// Sync-op and thread-start points were on.
    pub sync: bool,
    pub turns: Vec<Segment>,
}

impl Schedule {
    pub fn render(&self) -> String {
        let mut s = format!("{HEADER}\nseed {}\npolicy {}\n", self.seed, self.policy);
        if self.sync {
            s.push_str("points sync\n");
        }
        for t in &self.turns {
            let kind = if t.preempted { 'p' } else { 'e' };
            if t.after > 0 {
                let _ = writeln!(
                    s,
                    "{} {} {kind} {}@{}+{}",
                    t.tid, t.events, t.insns, t.hits, t.after
                );
            } else if t.hits > 0 {
                let _ = writeln!(s, "{} {} {kind} {}@{}", t.tid, t.events, t.insns, t.hits);
            } else if t.insns > 0 {
                let _ = writeln!(s, "{} {} {kind} {}", t.tid, t.events, t.insns);
            } else {
                let _ = writeln!(s, "{} {} {kind}", t.tid, t.events);
            }
        }
        s
    }

    pub fn parse(text: &str) -> Result<Schedule, String> {
        let mut lines = text.lines();
        if lines.next().map(str::trim) != Some(HEADER) {
            return Err(format!(
                "not a detrun schedule (first line must be `{HEADER}`)"
            ));
        }
        let mut seed = 0;
        let mut policy = "default".to_string();
        let mut sync = false;
        let mut turns = Vec::new();
        for (i, line) in lines.enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let f: Vec<&str> = line.split_whitespace().collect();
            let bad = || format!("line {}: cannot parse `{line}`", i + 2);
            match f.as_slice() {
                ["seed", v] => seed = v.parse().map_err(|_| bad())?,
                ["policy", v] => policy = v.to_string(),
                ["points", v] => sync = v.split(',').any(|k| k == "sync"),
                [t, n, k] | [t, n, k, _] => turns.push(Segment {
                    tid: t.parse().map_err(|_| bad())?,
                    events: n.parse().map_err(|_| bad())?,
                    preempted: match *k {
                        "p" => true,
                        "e" => false,
                        _ => return Err(bad()),
                    },
                    insns: match f.get(3) {
                        Some(i) => i
                            .split('@')
                            .next()
                            .unwrap_or("")
                            .parse()
                            .map_err(|_| bad())?,
                        None => 0,
                    },
                    hits: match f.get(3).and_then(|i| i.split_once('@')) {
                        Some((_, h)) => h
                            .split('+')
                            .next()
                            .unwrap_or("")
                            .parse()
                            .map_err(|_| bad())?,
                        None => 0,
                    },
                    after: match f.get(3).and_then(|i| i.split_once('+')) {
                        Some((_, a)) => a.parse().map_err(|_| bad())?,
                        None => 0,
                    },
                }),
                _ => return Err(bad()),
            }
        }
        Ok(Schedule {
            seed,
            policy,
            sync,
            turns,
        })
    }

    pub fn load(path: &Path) -> Result<Schedule, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Schedule::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let s = Schedule {
            seed: 9,
            policy: "chaos".into(),
            sync: true,
            turns: vec![
                Segment {
                    tid: 0,
                    events: 4,
                    preempted: true,
                    insns: 0,
                    hits: 0,
                    after: 0,
                },
                Segment {
                    tid: 1,
                    events: 2,
                    preempted: true,
                    insns: 37,
                    hits: 12,
                    after: 5,
                },
                Segment {
                    tid: 2,
                    events: 0,
                    preempted: false,
                    insns: 0,
                    hits: 0,
                    after: 0,
                },
            ],
        };
        assert_eq!(Schedule::parse(&s.render()), Ok(s));
        assert!(Schedule::parse("hello").is_err());
        assert!(Schedule::parse("# detrun schedule v1\n0 x p\n").is_err());
    }
}
