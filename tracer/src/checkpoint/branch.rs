//! The branch driver: at each branch point of `--checkpoint-at`/`--every`,
//! branch the world in place or take a checkpoint and run its branches
//! (one event loop each, from the copied processes), keeping the base run's
//! own outcome.

use super::{BranchAt, Checkpoint};
use crate::config::BranchPlan;
use crate::ctx::{Ctx, EXIT_INTERNAL};
use std::time::Instant;

/// The event loop a branch runs (the supervisor's, without branch points).
pub type LoopFn = fn(&mut Ctx) -> std::io::Result<()>;

#[derive(Default)]
pub struct Branches {
    /// Next branch point of `cfg.branch`, and checkpoints taken so far.
    next: usize,
    pub taken: usize,
    /// Failed tries at the pending checkpoint.
    attempts: u32,
    /// Checkpoints whose branches have not run yet (explore), with the
    /// branch point each was asked for.
    pending: std::collections::VecDeque<(Checkpoint, u64)>,
    /// Branches run so far (for `results.json`).
    pub results: Vec<crate::summary::BranchResult>,
    /// The run is over (all its branches ran).
    pub ended: bool,
}

impl Branches {
    /// Is a branch point (or checkpoint) reached?
    pub fn due(&self, cx: &Ctx) -> bool {
        let Some(plan) = cx.cfg.branch.as_ref() else {
            return false;
        };
        if cx.threads.is_empty() {
            return false;
        }
        let at = match plan.every {
            Some(e) => BranchAt::Time(e.saturating_mul(self.next as u64 + 1)),
            None => match plan.at.get(self.next) {
                Some(&a) => a,
                None => return false,
            },
        };
        at.reached(cx.world.clock.elapsed(), cx.world.decisions)
    }

    /// At a branch point: branch in place, or checkpoint and run the
    /// branches from it. False: the run is over.
    pub fn at_point(&mut self, cx: &mut Ctx, run: LoopFn) -> bool {
        let Some(plan) = cx.cfg.branch.clone() else {
            return true;
        };
        if !plan.checkpoint {
            // In place, point i switches to seed i.
            if let Some(Some(seed)) = plan.seeds.get(self.next) {
                cx.world.branch(*seed);
            }
            self.next += 1;
            return true;
        }
        let index = self.taken;
        let ck = match cx.take_checkpoint(index) {
            Ok(ck) => ck,
            Err(why) => {
                // Try again at the next scheduling points, for a while. A
                // later point than asked is not the point a branch from
                // scratch takes: say so.
                if self.attempts == 0 {
                    cx.stats.hazard(
                        "checkpoint-deferred",
                        format!("a checkpoint was taken later than asked: {why}"),
                    );
                }
                self.attempts += 1;
                if self.attempts == 1 || cx.cfg.verbose {
                    eprintln!("detrun: checkpoint deferred: {why}");
                }
                if self.attempts >= 1000 {
                    self.attempts = 0;
                    self.next += 1;
                    eprintln!("detrun: checkpoint skipped: {why}");
                }
                return true;
            }
        };
        self.attempts = 0;
        // The point asked for: with `every`, the last multiple passed (a
        // sleep may jump over several; this is the first point after each).
        let requested = match plan.every {
            Some(e) => {
                let n = (ck.at_ns / e).max(1);
                self.next = n as usize;
                e * n
            }
            None => {
                self.next += 1;
                match plan.at.get(index) {
                    Some(BranchAt::Time(t)) => *t,
                    _ => ck.at_ns,
                }
            }
        };
        self.taken += 1;
        if plan.continue_base {
            // Up to `max_alive` checkpoints wait for their branches while
            // the run goes on; the oldest runs its branches first.
            while self.pending.len() >= plan.max_alive.max(1) {
                if let Some((old, req)) = self.pending.pop_front() {
                    self.branches_of(cx, run, old, req, &plan);
                }
            }
            let r = cx.instantiate(&ck, None, None);
            self.pending.push_back((ck, requested));
            if let Err(e) = r {
                eprintln!("detrun: cannot resume the run after checkpoint {index}: {e}");
                self.ended = true;
                return false;
            }
            cx.publish_clock();
            true
        } else {
            self.branches_of(cx, run, ck, requested, &plan);
            self.ended = true;
            false
        }
    }

    /// Run every branch of `ck`, then let the checkpoint go.
    fn branches_of(
        &mut self,
        cx: &mut Ctx,
        run: LoopFn,
        ck: Checkpoint,
        requested: u64,
        plan: &BranchPlan,
    ) {
        for seed in &plan.seeds {
            self.run_branch(cx, run, &ck, *seed, plan, requested);
        }
        cx.release_checkpoint(ck);
    }

    /// At the end of the run: the branches of checkpoints still waiting,
    /// with the run's own outcome kept.
    pub fn drain(&mut self, cx: &mut Ctx, run: LoopFn) {
        if self.pending.is_empty() {
            return;
        }
        let Some(plan) = cx.cfg.branch.clone() else {
            return;
        };
        let world = cx.world.clone();
        let stats = cx.stats.clone();
        let (main_status, deadlock, timed_out) = (
            cx.turn.main_status,
            cx.turn.deadlock.take(),
            cx.turn.timed_out,
        );
        let trace = cx.trace.take();
        while let Some((ck, req)) = self.pending.pop_front() {
            self.branches_of(cx, run, ck, req, &plan);
        }
        cx.world = world;
        cx.stats = stats;
        cx.turn.main_status = main_status;
        cx.turn.deadlock = deadlock;
        cx.turn.timed_out = timed_out;
        cx.trace = trace;
    }

    /// Run one branch from `ck` to its end (a loop without branch points
    /// of its own); its result goes to `results` (and its outputs to the plan's directory).
    fn run_branch(
        &mut self,
        cx: &mut Ctx,
        run: LoopFn,
        ck: &Checkpoint,
        seed: Option<u64>,
        plan: &BranchPlan,
        requested_ns: u64,
    ) {
        let started = Instant::now();
        let name = format!(
            "c{}-b{}",
            ck.index,
            seed.map_or("base".into(), |s| s.to_string())
        );
        let files = plan
            .out_dir
            .as_ref()
            .map(|d| [d.join(format!("{name}.out")), d.join(format!("{name}.err"))]);
        let trace = match (&plan.out_dir, &cx.cfg.trace) {
            (Some(d), Some(_)) => Some(d.join(format!("{name}.trace"))),
            _ => None,
        };
        let capture = if cx.cfg.capture_branches {
            files.clone()
        } else {
            None
        };
        let base_trace = cx.trace.take();
        let r = cx.instantiate(ck, capture, trace.as_deref());
        let (code, error) = match r {
            Ok(()) => {
                if let Some(s) = seed {
                    cx.world.branch(s);
                }
                cx.publish_clock();
                let r = run(cx);
                cx.kill_all();
                if let Some(t) = cx.trace.as_mut() {
                    let _ = t.flush();
                }
                let code = cx.exit_code();
                (code, r.err().map(|e| e.to_string()))
            }
            Err(e) => {
                cx.kill_all();
                eprintln!("detrun: branch {name} could not start: {e}");
                (EXIT_INTERNAL, Some(e))
            }
        };
        cx.trace = base_trace;
        if let Some(d) = &plan.out_dir {
            // One line per finished branch, for a watcher's progress.
            use std::io::Write;
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(d.join("progress"))
            {
                let _ = writeln!(f, "{} {} {}", ck.index, requested_ns, code);
            }
        }
        self.results.push(crate::summary::BranchResult {
            checkpoint: ck.index,
            at_ns: ck.at_ns,
            requested_ns,
            decisions: ck.decisions,
            seed,
            exit_code: code,
            virtual_ns: cx.world.clock.elapsed(),
            wall_ms: started.elapsed().as_millis() as u64,
            error,
            private_dirty_kb: cx.copy.private_kb,
            stdout: files.as_ref().map(|f| f[0].display().to_string()),
            stderr: files.as_ref().map(|f| f[1].display().to_string()),
        });
    }
}
