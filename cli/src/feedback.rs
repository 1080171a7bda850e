//! Hunt's coverage feedback: each run reports the orders it reached at
//! synchronization objects (`--coverage`, tracer/src/coverage.rs); a run
//! that reached a new one joins the corpus, and later runs are, one in two,
//! that run's history up to a random scheduling decision and a new seed's
//! from there (`--branch-at event:N --branch-seed S`, repeatable). The
//! prefix replays exactly, so a mutated run explores next to an order
//! never seen before instead of starting over.
//!
//! A hunt is the same for any `-j`: run i's plan depends only on the runs
//! of the batches before the previous one (`BATCH` runs each), folded in
//! index order, so no run waits unless a batch two back is still running.

use crate::hunt::Strategy;
use detrun_tracer::coverage::mix;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// Runs per feedback batch.
pub const BATCH: u64 = 25;

/// Branch points a mutated run may have (a corpus run's own, plus one).
const MAX_BRANCHES: usize = 8;

/// What one run is: its seed, and for a mutated run the history it
/// follows (the parent's base seed and branch points, plus one more).
#[derive(Clone, Debug)]
pub struct Plan {
    /// The run's own number in the report (and its branch seed when mutated).
    pub seed: u64,
    /// The `--seed` of the run.
    pub base: u64,
    pub st: Strategy,
    /// (scheduling decision, seed) branch points, ascending.
    pub branches: Vec<(u64, u64)>,
    /// The corpus run this one branches from.
    pub parent: Option<u64>,
}

impl Plan {
    pub fn fresh(seed: u64, st: Strategy) -> Plan {
        Plan {
            seed,
            base: seed,
            st,
            branches: Vec::new(),
            parent: None,
        }
    }

    /// The run options of the branch points.
    pub fn branch_flags(&self) -> Vec<String> {
        let mut v = Vec::new();
        for (at, s) in &self.branches {
            v.push(format!("--branch-at=event:{at}"));
            v.push(format!("--branch-seed={s}"));
        }
        v
    }
}

/// What a run reported: its pairs (hashes) and scheduling decisions.
#[derive(Clone)]
pub struct Reached {
    pub pairs: Vec<u64>,
    pub decisions: u64,
}

impl Reached {
    /// Parse the `--coverage` file of a run.
    pub fn parse(text: &str) -> Option<Reached> {
        let v: serde_json::Value = serde_json::from_str(text).ok()?;
        Some(Reached {
            pairs: v["pairs"]
                .as_array()?
                .iter()
                .filter_map(|p| p.as_u64())
                .collect(),
            decisions: v["decisions"].as_u64()?,
        })
    }
}

struct Entry {
    index: u64,
    plan: Plan,
    decisions: u64,
}

/// The corpus and the coverage so far.
#[derive(Default)]
pub struct Feedback {
    pub on: bool,
    /// Runs folded in: runs 0..folded, in index order.
    pub folded: u64,
    seen: BTreeSet<u64>,
    corpus: Vec<Entry>,
    /// Finished runs not yet folded (a run before them is still going).
    waiting: BTreeMap<u64, (Plan, Option<Reached>)>,
    /// Per run index: new pairs it reached.
    pub new_pairs: BTreeMap<u64, u64>,
    /// Distinct pairs after each batch.
    pub curve: Vec<(u64, u64)>,
    pub mutated: u64,
}

impl Feedback {
    pub fn new(on: bool) -> Feedback {
        Feedback {
            on,
            ..Default::default()
        }
    }

    /// Runs that must be folded in before run `i` can be planned.
    pub fn needs(&self, i: u64) -> u64 {
        if self.on {
            (i / BATCH).saturating_sub(1) * BATCH
        } else {
            0
        }
    }

    /// Run `i` (of plan `plan`) ended, with its coverage if it had any.
    pub fn finished(&mut self, i: u64, plan: Plan, reached: Option<Reached>) {
        self.waiting.insert(i, (plan, reached));
        while let Some((plan, reached)) = self.waiting.remove(&self.folded) {
            let i = self.folded;
            let mut new = 0;
            if let Some(r) = reached {
                for p in r.pairs {
                    new += u64::from(self.seen.insert(p));
                }
                // Only a run with decisions to branch at can be a parent.
                if new > 0 && r.decisions > 1 && plan.st.policy != crate::hunt::PolicyArg::Default {
                    self.corpus.push(Entry {
                        index: i,
                        plan,
                        decisions: r.decisions,
                    });
                }
            }
            self.new_pairs.insert(i, new);
            self.folded += 1;
            if self.folded.is_multiple_of(BATCH) {
                self.curve.push((self.folded, self.seen.len() as u64));
            }
        }
    }

    /// The plan of run `i` (seed `seed`, strategy `st` when fresh). Call
    /// once `folded >= needs(i)`: only corpus entries from before that
    /// point count, whatever else has finished since.
    pub fn plan(&mut self, i: u64, seed: u64, st: Strategy) -> Plan {
        let fresh = Plan::fresh(seed, st);
        let limit = self.needs(i);
        let eligible = self.corpus.partition_point(|e| e.index < limit);
        let h = mix(seed, 0x6d75_7461_7465);
        if !self.on || eligible == 0 || h.is_multiple_of(2) {
            return fresh;
        }
        let parent = &self.corpus[((h >> 1) % eligible as u64) as usize];
        let last = parent.plan.branches.last().map_or(0, |b| b.0);
        if parent.plan.branches.len() >= MAX_BRANCHES || parent.decisions <= last + 1 {
            return fresh;
        }
        let at = last + 1 + (h >> 20) % (parent.decisions - last - 1);
        let mut plan = parent.plan.clone();
        plan.seed = seed;
        plan.branches.push((at, seed));
        plan.parent = Some(parent.plan.seed);
        self.mutated += 1;
        plan
    }

    pub fn pairs(&self) -> u64 {
        self.seen.len() as u64
    }

    /// The last run that reached a new pair (its index), if any did.
    pub fn last_new(&self) -> Option<u64> {
        self.new_pairs
            .iter()
            .rev()
            .find(|(_, &n)| n > 0)
            .map(|(&i, _)| i)
    }

    /// The report's coverage section.
    pub fn report(&self, runs: u64) -> CoverageReport {
        CoverageReport {
            pairs: self.pairs(),
            corpus: self.corpus.len() as u64,
            mutated_runs: self.mutated,
            last_new_run: self.last_new().map(|i| i + 1),
            new_in_last_quarter: self
                .new_pairs
                .range(runs - runs / 4..)
                .map(|(_, &n)| n)
                .sum(),
            curve: self.curve.clone(),
        }
    }

    /// The coverage line hunt prints: how far the search got, and whether
    /// more runs would likely reach more.
    pub fn summary(&self, runs: u64) -> String {
        let r = self.report(runs);
        if r.pairs == 0 {
            return "  coverage: no two threads met at a synchronization object (one thread, \
                    or sync-op points off): the feedback had nothing to go on"
                .to_string();
        }
        let tail = runs / 4;
        let verdict = if r.new_in_last_quarter == 0 {
            format!("saturated: the last {tail} runs reached no new order")
        } else {
            format!(
                "still growing: {} new in the last {tail} runs; more runs may reach more",
                r.new_in_last_quarter
            )
        };
        format!(
            "  coverage: {} orders of two threads at sync objects, last new one in run {} of {runs}; \
             {} runs branched from {} that reached new ones ({verdict})",
            r.pairs,
            r.last_new_run.unwrap_or(0),
            r.mutated_runs,
            r.corpus
        )
    }
}

#[derive(Serialize)]
pub struct CoverageReport {
    /// Distinct ordered pairs of events reached by the hunt.
    pub pairs: u64,
    /// Runs that reached new pairs (mutations branch from them).
    pub corpus: u64,
    pub mutated_runs: u64,
    /// The 1-based number of the last run that reached a new pair.
    pub last_new_run: Option<u64>,
    pub new_in_last_quarter: u64,
    /// (runs folded, distinct pairs) after each batch.
    pub curve: Vec<(u64, u64)>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hunt::PolicyArg;

    fn chaos() -> Strategy {
        Strategy {
            policy: PolicyArg::Chaos,
            depth: 0,
            data: false,
        }
    }

    fn reached(pairs: &[u64]) -> Option<Reached> {
        Some(Reached {
            pairs: pairs.to_vec(),
            decisions: 100,
        })
    }

    /// Fold runs 0..n, fresh, run i reaching pair i.
    fn fold_fresh(f: &mut Feedback, n: u64) {
        for i in 0..n {
            f.finished(i, Plan::fresh(i, chaos()), reached(&[i]));
        }
    }

    #[test]
    fn folding_is_in_index_order_whatever_the_finish_order() {
        let mut a = Feedback::new(true);
        let mut b = Feedback::new(true);
        let runs: Vec<(u64, Option<Reached>)> = (0..60)
            .map(|i| (i, reached(&[i % 7, 100 + i % 3])))
            .collect();
        for (i, r) in &runs {
            a.finished(*i, Plan::fresh(*i, chaos()), r.clone());
        }
        for (i, r) in runs.into_iter().rev() {
            b.finished(i, Plan::fresh(i, chaos()), r);
        }
        assert_eq!(a.folded, 60);
        assert_eq!(b.folded, 60);
        assert_eq!(a.new_pairs, b.new_pairs);
        assert_eq!(a.pairs(), 10);
        assert_eq!(a.corpus.len(), 7, "runs 0-6 each reached something new");
        for i in 50..60 {
            let (p, q) = (a.plan(i, i, chaos()), b.plan(i, i, chaos()));
            assert_eq!((p.base, p.branches.clone()), (q.base, q.branches.clone()));
        }
    }

    #[test]
    fn plans_use_only_runs_before_the_previous_batch() {
        let mut f = Feedback::new(true);
        // Run 30 (batch 1) is in the corpus, but run 40 (batch 1) may only
        // see batches before batch 0: none.
        fold_fresh(&mut f, BATCH * 2);
        assert!((0..BATCH * 2).all(|i| f.plan(i, i, chaos()).parent.is_none()));
        let later: Vec<Plan> = (BATCH * 2..BATCH * 3)
            .map(|i| f.plan(i, i, chaos()))
            .collect();
        let mutated: Vec<&Plan> = later.iter().filter(|p| p.parent.is_some()).collect();
        assert!(!mutated.is_empty() && mutated.len() < later.len());
        for p in mutated {
            assert!(p.parent.unwrap() < BATCH, "parent from batch 0 only");
            assert_eq!(p.branches.len(), 1);
            assert!(p.branches[0].0 >= 1 && p.branches[0].0 < 100);
            assert_eq!(p.branches[0].1, p.seed);
        }
    }

    #[test]
    fn off_plans_fresh_runs() {
        let mut f = Feedback::new(false);
        fold_fresh(&mut f, BATCH * 3);
        assert!((0..BATCH * 4).all(|i| f.plan(i, i, chaos()).parent.is_none()));
        assert_eq!(f.pairs(), BATCH * 3, "coverage is still counted");
    }
}
