//! The thread table, run queue, futex queues and timers.
//!
//! The tracer tells the world what the tracees did (a thread was created, it
//! blocked on a futex, it made an intercepted syscall) and asks it what to do
//! next. One thread holds the turn at a time; [`World::next`] hands it on.
//! Iteration orders are those of `Vec` and `BTreeMap`, so every decision is a
//! function of the seed and of the sequence of calls.

use crate::clock::Clock;
use crate::rng::{Purpose, Streams};
use rand_chacha::ChaCha20Rng;
use rand_core::RngCore;
use std::collections::{BTreeMap, VecDeque};

/// A thread, numbered in creation order from 0.
pub type Tid = u32;
/// A process, numbered in creation order from 0.
pub type ProcId = u32;

/// Identity of a futex word: private futexes are keyed by the process'
/// address space, shared ones by a key the tracer derives from the mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct FutexKey {
    pub space: u64,
    pub addr: u64,
}

/// What a parked thread waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    Futex {
        key: FutexKey,
        bitset: u32,
    },
    /// nanosleep and friends: only the deadline wakes it.
    Sleep,
    /// fd readiness, checked by the tracer.
    Io,
    /// wait4/waitid: a child changed state.
    Child,
    /// pause/sigsuspend/sigtimedwait: a signal.
    Signal,
    /// A vfork parent until its child execs or exits (in the kernel).
    Vfork,
}

impl Wait {
    pub fn name(&self) -> &'static str {
        match self {
            Wait::Futex { .. } => "futex",
            Wait::Sleep => "sleep",
            Wait::Io => "io",
            Wait::Child => "child",
            Wait::Signal => "signal",
            Wait::Vfork => "vfork",
        }
    }
}

/// Why a parked thread became runnable again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WakeReason {
    Woken,
    Timeout,
    Interrupted,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Runnable,
    Running,
    Blocked(Wait),
    Dead,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Run a thread until it blocks or uses its quantum, then round-robin.
    RoundRobin,
    /// rr-style chaos: seeded random priorities, re-drawn often, random
    /// short slices, and occasional starvation of the highest thread.
    Chaos,
    /// Probabilistic Concurrency Testing (Burckhardt et al., ASPLOS'10):
    /// random distinct priorities, the highest runnable thread always runs,
    /// and at `depth - 1` seeded steps the running thread drops to the
    /// lowest priorities. With `data`, steps are counted over data points
    /// (accesses of watched globals) only, and a change point drops the
    /// thread right after the access: a preemption where shared data is.
    Pct {
        depth: u32,
        steps: u64,
        insns: u32,
        data: bool,
    },
}

#[derive(Clone, Debug)]
pub struct Config {
    pub seed: u64,
    pub epoch_secs: u64,
    pub event_cost_ns: u64,
    /// Intercepted events a thread may run before the turn moves on.
    pub quantum: u32,
    pub policy: Policy,
    /// Chaos' instruction budget: at the end of a slice, sometimes run a
    /// seeded 1..=N more instructions before switching (0: never).
    pub chaos_insns: u32,
    /// Reach instruction-level points with breakpoints: single-step a few
    /// instructions to pick an address, then count that many executions of
    /// it (cheap inside loops) instead of stepping every instruction.
    pub breakpoints: bool,
    /// Thread start is a scheduling point: at the return of clone the new
    /// thread may run before its creator's next instruction.
    pub start_points: bool,
    /// The virtual network's latency, loss and partitions.
    pub net: crate::net::NetConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            seed: 0,
            epoch_secs: 1_704_067_200, // 2024-01-01T00:00:00Z
            event_cost_ns: 1_000,
            quantum: 10_000,
            policy: Policy::RoundRobin,
            chaos_insns: 0,
            breakpoints: false,
            start_points: false,
            net: crate::net::NetConfig::default(),
        }
    }
}

#[derive(Clone, Debug)]
struct Thread {
    proc: ProcId,
    /// Priority under Chaos and PCT (higher runs first). Signed: a yield
    /// puts a thread below every other, under the change-point levels.
    prio: i64,
    state: State,
    deadline: Option<u64>,
    wake: Option<WakeReason>,
    cpu_ns: u64,
}

/// Where a timer's signal goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SigTarget {
    Process,
    Thread(Tid),
}

/// A POSIX/itimer/alarm timer of a process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimerSpec {
    pub signal: i32,
    pub target: SigTarget,
    /// sigev_value to pass along.
    pub value: u64,
    /// Absolute times given for this timer are on the realtime clock.
    pub realtime: bool,
}

#[derive(Clone, Debug)]
struct Timer {
    spec: TimerSpec,
    deadline: Option<u64>,
    interval: u64,
    overrun: u64,
}

/// A signal a timer raised; the tracer sends it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delivery {
    pub proc: ProcId,
    pub timer: i32,
    pub spec: TimerSpec,
}

#[derive(Clone, Debug)]
struct Proc {
    threads: Vec<Tid>,
    alive: bool,
    app: ChaCha20Rng,
    at_random: ChaCha20Rng,
    cpu_ns: u64,
    timers: BTreeMap<i32, Timer>,
}

/// One turn of the schedule: `tid` ran `events` intercepted events;
/// `preempted` when the turn ended because the policy took it away (rather
/// than the thread blocking, yielding or exiting by itself).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub tid: Tid,
    pub events: u32,
    pub preempted: bool,
    /// When preempted between syscalls: instructions it ran after its
    /// last event (single-stepped), else 0.
    pub insns: u32,
    /// With breakpoints: executions of the instruction reached after
    /// `insns` steps that ran before the preemption (0: none).
    pub hits: u32,
    /// Instructions stepped after the last of those executions.
    pub after: u32,
}

/// An instruction-level preemption for the tracer to carry out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InsnPoint {
    /// Instructions to single-step.
    pub steps: u32,
    /// Then: executions of the instruction reached to wait for (0: none).
    pub hits: u32,
    /// Then: instructions to single-step (a position in a loop's body).
    pub after: u32,
    /// Step exactly `steps` (a replay). Otherwise, with `hits`, step on
    /// from there to the next backward jump, a loop's head, whose
    /// executions then count: a loop is where a long stretch with no
    /// event runs, and its head is executed again.
    pub exact: bool,
}
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Next {
    /// Give the turn to this thread.
    Run(Tid),
    /// Timers fired: send these signals, then ask again.
    Deliver(Vec<Delivery>),
    /// Virtual time reached a network delivery: move the data, then ask
    /// again.
    Net,
    /// Nothing is runnable, no timer is pending: only the outside world (or
    /// nothing: a deadlock) can wake a thread.
    Idle,
    /// No thread is left.
    Done,
}

/// Timer ids used for alarm/setitimer(ITIMER_REAL) and the other itimers.
pub const ITIMER_REAL_ID: i32 = -1;
pub const ITIMER_VIRTUAL_ID: i32 = -2;
pub const ITIMER_PROF_ID: i32 = -3;

#[derive(Clone, Debug)]
pub struct World {
    pub clock: Clock,
    cfg: Config,
    streams: Streams,
    sched: ChaCha20Rng,
    threads: Vec<Thread>,
    procs: Vec<Proc>,
    futexes: BTreeMap<FutexKey, VecDeque<Tid>>,
    current: Option<Tid>,
    last: Option<Tid>,
    slice: u32,
    /// Cached earliest deadline of any thread or timer (u64::MAX: none).
    next_deadline: u64,
    /// Scheduling decisions made, for the summary and traces.
    pub decisions: u64,
    pub switches: u64,
    /// Intercepted events so far (PCT steps).
    steps: u64,
    /// Data points so far (PCT's steps with `data`).
    data_steps: u64,
    /// PCT priority change points, ascending, with the level each sets.
    change_points: Vec<(u64, i64)>,
    /// The priority the next voluntary yield gives (falls by one each time).
    yield_floor: i64,
    /// Instructions the run's instruction-level points stepped or counted.
    stepped: u64,
    /// Length of the current slice (Chaos draws it per turn).
    slice_len: u32,
    /// The turns taken so far, for `--record-schedule`.
    pub recorded: Vec<Segment>,
    /// A schedule to follow (`--schedule`); after it, the policy decides.
    script: Vec<Segment>,
    script_pos: usize,
    /// Set when the script named a thread that could not run.
    pub diverged: Option<u64>,
    /// The current turn was given by the script.
    scripted: bool,
    /// The instruction-level point of the scripted turn, if any.
    script_insns: InsnPoint,
    /// An instruction-level preemption the tracer must carry out: run this
    /// many more instructions, then (PCT) drop to the given priority.
    pending_insns: Option<(InsnPoint, Option<i64>)>,
    /// Sockets, connections and data in flight.
    pub net: crate::net::Net,
}

fn cfg_quantum(cfg: &Config) -> u32 {
    cfg.quantum.max(1)
}

impl World {
    pub fn new(cfg: Config) -> World {
        let streams = Streams::new(cfg.seed);
        let mut sched = streams.stream(Purpose::Sched, 0);
        let mut change_points = Vec::new();
        if let Policy::Pct { depth, steps, .. } = cfg.policy {
            for level in 1..depth.max(1) as i64 {
                change_points.push((sched.next_u64() % steps.max(1), level));
            }
            change_points.sort();
        }
        let slice_len = cfg_quantum(&cfg);
        let clock = Clock::with_offset(
            cfg.epoch_secs,
            cfg.event_cost_ns,
            streams.stream(Purpose::Clock, 0).next_u64(),
        );
        let net = crate::net::Net::new(
            cfg.net.clone(),
            streams.stream(Purpose::Fault, 0),
            clock.monotonic(),
        );
        World {
            clock,
            net,
            sched,
            streams,
            cfg,
            threads: Vec::new(),
            procs: Vec::new(),
            futexes: BTreeMap::new(),
            current: None,
            last: None,
            slice: 0,
            next_deadline: u64::MAX,
            decisions: 0,
            switches: 0,
            steps: 0,
            data_steps: 0,
            change_points,
            yield_floor: 0,
            stepped: 0,
            slice_len,
            recorded: Vec::new(),
            script: Vec::new(),
            script_pos: 0,
            diverged: None,
            scripted: false,
            script_insns: InsnPoint {
                steps: 0,
                hits: 0,
                after: 0,
                exact: true,
            },
            pending_insns: None,
        }
    }

    /// An instruction-level preemption is due: the tracer single-steps the
    /// running thread this many instructions, then calls
    /// [`World::insn_preempted`].
    pub fn take_insn_preemption(&mut self) -> Option<InsnPoint> {
        self.pending_insns.as_ref().map(|p| p.0)
    }

    /// A seeded instruction-level point within `budget` instructions: all
    /// single-steps, or (with breakpoints) a few steps to choose an
    /// instruction and a number of its executions.
    fn draw_point(&mut self, budget: u32) -> InsnPoint {
        let r = self.sched.next_u64();
        let budget = budget.max(1) as u64;
        // Steps over every scale up to the budget: a uniform draw would
        // seldom stop in the first few instructions after an event, where
        // a window right after a lock or a thread start is.
        let scale = 64 - budget.leading_zeros() as u64;
        let log_steps = |r: u64| 1 + ((r >> 8) % (1u64 << ((r % scale) + 1)).min(budget)) as u32;
        if self.cfg.breakpoints && r.is_multiple_of(2) {
            // A loop's head (the next backward jump after a few steps) and
            // a number of its executions, also over every scale; then a
            // position in its body.
            let shift = (r >> 48) % 8;
            InsnPoint {
                steps: 1 + ((r >> 1) % 64) as u32,
                hits: 1 + (((r >> 16) % budget) >> shift) as u32,
                after: ((r >> 56) % 64) as u32,
                exact: false,
            }
        } else {
            InsnPoint {
                steps: log_steps(r >> 1),
                hits: 0,
                after: 0,
                exact: true,
            }
        }
    }

    /// The running thread `t` ran `done` more instructions (fewer than asked
    /// if it reached a syscall first) and is preempted there.
    pub fn insn_preempted(&mut self, t: Tid, done: u32, hits: u32, after: u32) {
        if let Some((_, level)) = self.pending_insns.take() {
            if let (Some(level), Some(th)) = (level, self.threads.get_mut(t as usize)) {
                th.prio = level;
            }
        }
        // Chaos: the point is there to let another thread in; picked by
        // priority, the preempted thread would mostly go on at once.
        if self.cfg.policy == Policy::Chaos && !self.scripted {
            self.yield_floor -= 1;
            if let Some(th) = self.threads.get_mut(t as usize) {
                th.prio = self.yield_floor;
            }
        }
        self.stepped += u64::from(done) + u64::from(hits) + u64::from(after);
        if let Some(seg) = self.recorded.last_mut() {
            seg.preempted = true;
            seg.insns = done.max(1);
            seg.hits = hits;
            seg.after = after;
        }
    }

    /// Follow `script` turn by turn before handing over to the policy.
    pub fn set_script(&mut self, script: Vec<Segment>) {
        self.script = script;
        self.script_pos = 0;
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// `k` of `n` candidates (indices, ascending): the shared globals
    /// process `proc` watches, a function of the seed and the process
    /// alone (a branch keeps them: they are the program's, not the
    /// schedule's).
    pub fn pick_watches(&self, proc: ProcId, n: usize, k: usize) -> Vec<usize> {
        let mut rng = self.streams.stream(Purpose::Watch, u64::from(proc));
        let mut idx: Vec<usize> = (0..n).collect();
        let k = k.min(n);
        for i in 0..k {
            let j = i + (rng.next_u64() % (n - i) as u64) as usize;
            idx.swap(i, j);
        }
        idx.truncate(k);
        idx.sort_unstable();
        idx
    }

    /// Start an alternate history here: from now on the schedule and the
    /// network's faults come from `seed`; the program's own randomness and
    /// everything already decided stay as they are. A run from a checkpoint
    /// and a run from scratch that branch at the same point are the same.
    pub fn branch(&mut self, seed: u64) {
        let streams = Streams::new(seed);
        // Index 1: a branch's streams never repeat a base run's.
        self.sched = streams.stream(Purpose::Sched, 1);
        self.net.reseed(streams.stream(Purpose::Fault, 1));
        for t in &mut self.threads {
            t.prio = (self.sched.next_u64() >> 1) as i64;
        }
        if let Policy::Pct { depth, steps, .. } = self.cfg.policy {
            self.change_points.clear();
            for level in 1..depth.max(1) as i64 {
                let at = self.pct_count() + self.sched.next_u64() % steps.max(1);
                self.change_points.push((at, level));
            }
            self.change_points.sort();
        }
        // A followed schedule ends where the branch begins.
        self.script.clear();
        self.script_pos = 0;
        self.pending_insns = None;
    }

    pub fn streams(&self) -> &Streams {
        &self.streams
    }

    // ---- processes and threads ----

    /// A new process (its first thread is added with [`World::add_thread`]).
    pub fn add_process(&mut self) -> ProcId {
        let id = self.procs.len() as ProcId;
        self.procs.push(Proc {
            threads: Vec::new(),
            alive: true,
            app: self.streams.stream(Purpose::App, id as u64),
            at_random: self.streams.stream(Purpose::AtRandom, id as u64),
            cpu_ns: 0,
            timers: BTreeMap::new(),
        });
        id
    }

    /// A new runnable thread in `proc`.
    pub fn add_thread(&mut self, proc: ProcId) -> Tid {
        let id = self.threads.len() as Tid;
        let prio = match self.cfg.policy {
            Policy::RoundRobin => 0,
            // PCT: initial priorities sit above the d-1 change-point levels.
            Policy::Pct { depth, .. } => depth as i64 + (self.sched.next_u64() >> 8) as i64,
            Policy::Chaos => (self.sched.next_u64() >> 1) as i64,
        };
        self.threads.push(Thread {
            proc,
            prio,
            state: State::Runnable,
            deadline: None,
            wake: None,
            cpu_ns: 0,
        });
        if let Some(p) = self.procs.get_mut(proc as usize) {
            p.threads.push(id);
        }
        id
    }

    pub fn proc_of(&self, t: Tid) -> ProcId {
        self.threads[t as usize].proc
    }

    pub fn threads_of(&self, p: ProcId) -> &[Tid] {
        &self.procs[p as usize].threads
    }

    pub fn thread_count(&self) -> usize {
        self.threads.len()
    }

    pub fn process_count(&self) -> usize {
        self.procs.len()
    }

    pub fn is_alive(&self, t: Tid) -> bool {
        self.threads
            .get(t as usize)
            .is_some_and(|th| th.state != State::Dead)
    }

    /// The thread is gone. Its waits and the turn are released.
    pub fn exit_thread(&mut self, t: Tid) {
        self.unpark(t);
        let th = &mut self.threads[t as usize];
        th.state = State::Dead;
        th.deadline = None;
        let p = th.proc as usize;
        if self.current == Some(t) {
            self.current = None;
        }
        if self.procs[p]
            .threads
            .iter()
            .all(|&x| self.threads[x as usize].state == State::Dead)
        {
            self.procs[p].alive = false;
            self.procs[p].timers.clear();
        }
        self.recompute_deadline();
    }

    /// Exec replaced the process image: its timers survive (POSIX), only
    /// POSIX timers (ids >= 0) are deleted.
    pub fn exec_process(&mut self, p: ProcId) {
        self.procs[p as usize].timers.retain(|id, _| *id < 0);
        self.recompute_deadline();
    }

    // ---- the clock ----

    /// One intercepted event of thread `t`. Returns true when `t` has used its
    /// quantum and should give up the turn.
    pub fn tick(&mut self, t: Tid) -> bool {
        self.clock.tick();
        let cost = self.clock.event_cost;
        if let Some(th) = self.threads.get_mut(t as usize) {
            th.cpu_ns += cost;
            let p = th.proc as usize;
            self.procs[p].cpu_ns += cost;
        }
        self.slice += 1;
        self.steps += 1;
        if let Some(seg) = self.recorded.last_mut() {
            seg.events += 1;
        }
        let expired = self.policy_expired(t);
        if expired {
            if let Some(seg) = self.recorded.last_mut() {
                seg.preempted = true;
            }
        }
        expired
    }

    /// The steps PCT's change points are counted in.
    fn pct_count(&self) -> u64 {
        match self.cfg.policy {
            Policy::Pct { data: true, .. } => self.data_steps,
            _ => self.steps,
        }
    }

    /// An access of a watched global by `t`: an event like `tick`'s, and
    /// a step of PCT over data points.
    pub fn tick_data(&mut self, t: Tid) -> bool {
        self.data_steps += 1;
        self.tick(t)
    }

    fn policy_expired(&mut self, t: Tid) -> bool {
        if self.scripted {
            let due = self.slice >= self.slice_len;
            if due && self.script_insns.steps > 0 {
                // Recorded as preempted between syscalls: go that far.
                self.pending_insns = Some((self.script_insns, None));
                return false;
            }
            return due;
        }
        match self.cfg.policy {
            Policy::RoundRobin => self.slice >= self.slice_len,
            Policy::Chaos => {
                if self.slice < self.slice_len {
                    return false;
                }
                let others = self
                    .threads
                    .iter()
                    .enumerate()
                    .any(|(i, o)| i as Tid != t && o.state == State::Runnable);
                if self.cfg.chaos_insns > 0 && others && self.sched.next_u64().is_multiple_of(4) {
                    let p = self.draw_point(self.cfg.chaos_insns);
                    self.pending_insns = Some((p, None));
                    return false;
                }
                true
            }
            Policy::Pct { insns, data, .. } => {
                // At a change point the running thread drops to that level,
                // either now or, with an instruction budget and someone to
                // switch to, a seeded number of instructions from now (not
                // after a data point: the access is where to drop).
                let insns = if data { 0 } else { insns };
                while let Some(&(at, level)) = self.change_points.first() {
                    if at > self.pct_count() {
                        break;
                    }
                    self.change_points.remove(0);
                    let others = self
                        .threads
                        .iter()
                        .enumerate()
                        .any(|(i, o)| i as Tid != t && o.state == State::Runnable);
                    if insns > 0 && others && self.pending_insns.is_none() {
                        let p = self.draw_point(insns);
                        self.pending_insns = Some((p, Some(level)));
                        return false;
                    }
                    if let Some(th) = self.threads.get_mut(t as usize) {
                        th.prio = level;
                    }
                }
                let mine = self.threads.get(t as usize).map_or(0, |th| th.prio);
                self.threads
                    .iter()
                    .any(|o| o.state == State::Runnable && o.prio > mine)
            }
        }
    }

    pub fn thread_cpu_ns(&self, t: Tid) -> u64 {
        self.threads[t as usize].cpu_ns
    }

    pub fn proc_cpu_ns(&self, p: ProcId) -> u64 {
        self.procs[p as usize].cpu_ns
    }

    /// The earliest pending deadline (monotonic ns), if any.
    pub fn next_deadline(&self) -> Option<u64> {
        (self.next_deadline != u64::MAX).then_some(self.next_deadline)
    }

    /// True when a deadline has passed and [`World::fire_due`] has work.
    pub fn timers_due(&self) -> bool {
        self.clock.monotonic() >= self.next_deadline
    }

    /// Wake threads whose deadline passed and return the signals of timers
    /// that expired, in (deadline, process, timer) order.
    pub fn fire_due(&mut self) -> Vec<Delivery> {
        let now = self.clock.monotonic();
        let mut out = Vec::new();
        if now < self.next_deadline {
            return out;
        }
        for t in 0..self.threads.len() {
            let th = &self.threads[t];
            if matches!(th.state, State::Blocked(_)) && th.deadline.is_some_and(|d| d <= now) {
                self.wake(t as Tid, WakeReason::Timeout);
            }
        }
        let mut fired: Vec<(u64, ProcId, i32)> = Vec::new();
        for (pi, p) in self.procs.iter_mut().enumerate() {
            if !p.alive {
                continue;
            }
            for (id, tm) in p.timers.iter_mut() {
                if let Some(d) = tm.deadline {
                    if d <= now {
                        fired.push((d, pi as ProcId, *id));
                        match (now - d).checked_div(tm.interval) {
                            Some(missed) => {
                                tm.overrun = missed;
                                tm.deadline = Some(d + (missed + 1) * tm.interval);
                            }
                            None => tm.deadline = None,
                        }
                    }
                }
            }
        }
        fired.sort();
        for (_, p, id) in fired {
            let spec = self.procs[p as usize].timers[&id].spec;
            out.push(Delivery {
                proc: p,
                timer: id,
                spec,
            });
        }
        self.recompute_deadline();
        out
    }

    fn recompute_deadline(&mut self) {
        let mut d = u64::MAX;
        for th in &self.threads {
            if matches!(th.state, State::Blocked(_)) {
                if let Some(x) = th.deadline {
                    d = d.min(x);
                }
            }
        }
        for p in &self.procs {
            if p.alive {
                for tm in p.timers.values() {
                    if let Some(x) = tm.deadline {
                        d = d.min(x);
                    }
                }
            }
        }
        self.next_deadline = d;
    }

    // ---- randomness ----

    /// Application random bytes for process `p`.
    pub fn fill_random(&mut self, p: ProcId, buf: &mut [u8]) {
        self.procs[p as usize].app.fill_bytes(buf);
    }

    /// The 16 AT_RANDOM bytes for an exec of process `p`.
    pub fn at_random(&mut self, p: ProcId) -> [u8; 16] {
        let mut b = [0u8; 16];
        self.procs[p as usize].at_random.fill_bytes(&mut b);
        b
    }

    // ---- blocking ----

    /// Park `t` until woken or until the monotonic `deadline`.
    pub fn block(&mut self, t: Tid, wait: Wait, deadline: Option<u64>) {
        let th = &mut self.threads[t as usize];
        th.state = State::Blocked(wait);
        th.deadline = deadline;
        th.wake = None;
        if let Wait::Futex { key, .. } = wait {
            self.futexes.entry(key).or_default().push_back(t);
        }
        if self.current == Some(t) {
            self.current = None;
        }
        if let Some(d) = deadline {
            self.next_deadline = self.next_deadline.min(d);
        }
    }

    /// What `t` is parked on, if it is.
    pub fn waiting_on(&self, t: Tid) -> Option<Wait> {
        match self.threads.get(t as usize)?.state {
            State::Blocked(w) => Some(w),
            _ => None,
        }
    }

    pub fn deadline_of(&self, t: Tid) -> Option<u64> {
        self.threads.get(t as usize)?.deadline
    }

    fn unpark(&mut self, t: Tid) {
        if let State::Blocked(Wait::Futex { key, .. }) = self.threads[t as usize].state {
            if let Some(q) = self.futexes.get_mut(&key) {
                q.retain(|&x| x != t);
                if q.is_empty() {
                    self.futexes.remove(&key);
                }
            }
        }
    }

    /// Make a parked thread runnable. No effect on a thread that is not parked.
    pub fn wake(&mut self, t: Tid, reason: WakeReason) -> bool {
        if !matches!(self.threads[t as usize].state, State::Blocked(_)) {
            return false;
        }
        self.unpark(t);
        let th = &mut self.threads[t as usize];
        let had_deadline = th.deadline.take().is_some();
        th.state = State::Runnable;
        th.wake = Some(reason);
        if had_deadline {
            self.recompute_deadline();
        }
        true
    }

    /// The reason the thread was last woken (taken once).
    pub fn take_wake(&mut self, t: Tid) -> Option<WakeReason> {
        self.threads[t as usize].wake.take()
    }

    /// Threads parked on a given kind of wait, in creation order.
    pub fn parked(&self, pred: impl Fn(Wait) -> bool) -> Vec<Tid> {
        let mut v = Vec::new();
        self.parked_into(pred, &mut v);
        v
    }

    /// [`World::parked`] into `out` (cleared first), for a caller that
    /// reuses one vector at every stop.
    pub fn parked_into(&self, pred: impl Fn(Wait) -> bool, out: &mut Vec<Tid>) {
        out.clear();
        out.extend(
            self.threads
                .iter()
                .enumerate()
                .filter_map(|(i, th)| match th.state {
                    State::Blocked(w) if pred(w) => Some(i as Tid),
                    _ => None,
                }),
        );
    }

    // ---- futexes ----

    /// Wake up to `n` waiters of `key` whose bitset intersects `bitset`.
    pub fn futex_wake(&mut self, key: FutexKey, n: u32, bitset: u32) -> u32 {
        let Some(q) = self.futexes.get(&key) else {
            return 0;
        };
        let mut woken = Vec::new();
        for &t in q.iter() {
            if woken.len() as u32 >= n {
                break;
            }
            if let State::Blocked(Wait::Futex { bitset: b, .. }) = self.threads[t as usize].state {
                if b & bitset != 0 {
                    woken.push(t);
                }
            }
        }
        for &t in &woken {
            self.wake(t, WakeReason::Woken);
        }
        woken.len() as u32
    }

    /// Wake `nwake` waiters of `from` and move up to `nmove` others to `to`.
    /// Returns (woken, moved).
    pub fn futex_requeue(
        &mut self,
        from: FutexKey,
        to: FutexKey,
        nwake: u32,
        nmove: u32,
    ) -> (u32, u32) {
        let woken = self.futex_wake(from, nwake, u32::MAX);
        let mut moved = 0;
        if from == to {
            return (woken, 0);
        }
        while moved < nmove {
            let Some(q) = self.futexes.get_mut(&from) else {
                break;
            };
            let Some(t) = q.pop_front() else {
                break;
            };
            if q.is_empty() {
                self.futexes.remove(&from);
            }
            if let State::Blocked(Wait::Futex { key, .. }) = &mut self.threads[t as usize].state {
                *key = to;
            }
            self.futexes.entry(to).or_default().push_back(t);
            moved += 1;
        }
        (woken, moved)
    }

    pub fn futex_waiters(&self, key: FutexKey) -> usize {
        self.futexes.get(&key).map_or(0, |q| q.len())
    }

    // ---- timers ----

    /// Set (or with `value == 0` disarm) timer `id` of `p`. Returns the old
    /// (remaining, interval) in ns.
    pub fn set_timer(
        &mut self,
        p: ProcId,
        id: i32,
        spec: TimerSpec,
        value: u64,
        interval: u64,
    ) -> (u64, u64) {
        let now = self.clock.monotonic();
        let old = self.get_timer(p, id);
        let tm = self.procs[p as usize].timers.entry(id).or_insert(Timer {
            spec,
            deadline: None,
            interval: 0,
            overrun: 0,
        });
        tm.spec = spec;
        tm.deadline = if value == 0 {
            None
        } else {
            Some(now.saturating_add(value))
        };
        tm.interval = interval;
        self.recompute_deadline();
        old
    }

    /// Create a POSIX timer; returns its id (0, 1, ... in creation order).
    pub fn create_timer(&mut self, p: ProcId, spec: TimerSpec) -> i32 {
        let timers = &mut self.procs[p as usize].timers;
        let id = (0..).find(|i| !timers.contains_key(i)).unwrap_or(0);
        timers.insert(
            id,
            Timer {
                spec,
                deadline: None,
                interval: 0,
                overrun: 0,
            },
        );
        id
    }

    pub fn has_timer(&self, p: ProcId, id: i32) -> bool {
        self.procs[p as usize].timers.contains_key(&id)
    }

    pub fn timer_spec(&self, p: ProcId, id: i32) -> Option<TimerSpec> {
        self.procs[p as usize].timers.get(&id).map(|t| t.spec)
    }

    pub fn delete_timer(&mut self, p: ProcId, id: i32) -> bool {
        let r = self.procs[p as usize].timers.remove(&id).is_some();
        self.recompute_deadline();
        r
    }

    /// (remaining, interval) of a timer in ns; (0, 0) when disarmed.
    pub fn get_timer(&self, p: ProcId, id: i32) -> (u64, u64) {
        let now = self.clock.monotonic();
        match self.procs[p as usize].timers.get(&id) {
            Some(t) => (t.deadline.map_or(0, |d| d.saturating_sub(now)), t.interval),
            None => (0, 0),
        }
    }

    pub fn timer_overrun(&self, p: ProcId, id: i32) -> u64 {
        self.procs[p as usize]
            .timers
            .get(&id)
            .map_or(0, |t| t.overrun)
    }

    // ---- the turn ----

    pub fn current(&self) -> Option<Tid> {
        self.current
    }

    /// `t` gives up the turn but stays runnable.
    pub fn yield_turn(&mut self, t: Tid) {
        if self.threads[t as usize].state == State::Running {
            self.threads[t as usize].state = State::Runnable;
        }
        if self.current == Some(t) {
            self.current = None;
        }
    }

    /// `t` yields of its own accord (sched_yield, a zero sleep, a spin
    /// that waits for another thread): it gives up the turn, and under
    /// Chaos and PCT drops below every other thread, so that a yield loop
    /// lets the others run rather than being picked again forever. (PCT
    /// would otherwise run its highest thread's spin for good; CHESS's
    /// fair scheduling and Fray's PCT lower a yielding thread the same way.)
    pub fn yielded(&mut self, t: Tid) {
        if self.cfg.policy != Policy::RoundRobin && !self.scripted {
            self.yield_floor -= 1;
            if let Some(th) = self.threads.get_mut(t as usize) {
                th.prio = self.yield_floor;
            }
        }
        self.yield_turn(t);
    }

    /// `t` just created a thread or process: a scheduling point, at which
    /// the new one may run before its creator's next instruction. True
    /// when `t` should give up the turn. Without `start_points` the creator
    /// goes on (the default policy's runs stay as they were).
    pub fn thread_started(&mut self, t: Tid) -> bool {
        if !self.cfg.start_points {
            return false;
        }
        let expired = self.tick(t);
        // Chaos: the creator may also be preempted a few instructions on,
        // where it publishes what the new thread reads.
        if !expired
            && !self.scripted
            && self.cfg.policy == Policy::Chaos
            && self.cfg.chaos_insns > 0
            && self.pending_insns.is_none()
            && self.sched.next_u64().is_multiple_of(self.point_odds())
        {
            let p = self.draw_point(self.cfg.chaos_insns);
            self.pending_insns = Some((p, None));
        }
        expired
    }

    /// Chaos arms an instruction-level point at one turn in this many:
    /// every other with a few threads, fewer with many (each costs
    /// single-steps, and there are more turns).
    /// The odds also fall as the run's points have stepped more
    /// instructions, so that a long run's points cost ~ the square root
    /// of its turns rather than a share of each.
    fn point_odds(&self) -> u64 {
        let live = self
            .threads
            .iter()
            .filter(|t| t.state != State::Dead)
            .count() as u64;
        (live / 4).max(2) * (1 + self.stepped / 1000)
    }

    pub fn is_runnable(&self, t: Tid) -> bool {
        self.threads[t as usize].state == State::Runnable
    }

    fn runnable(&self) -> impl Iterator<Item = Tid> + '_ {
        self.threads
            .iter()
            .enumerate()
            .filter(|(_, t)| t.state == State::Runnable)
            .map(|(i, _)| i as Tid)
    }

    fn pick(&mut self) -> Option<Tid> {
        self.scripted = false;
        if self.script_pos < self.script.len() && self.diverged.is_none() {
            let seg = self.script[self.script_pos];
            let ok = self
                .threads
                .get(seg.tid as usize)
                .is_some_and(|t| t.state == State::Runnable);
            if ok {
                self.script_pos += 1;
                self.scripted = true;
                self.slice_len = if seg.preempted {
                    seg.events.max(1)
                } else {
                    u32::MAX
                };
                self.script_insns = InsnPoint {
                    steps: if seg.preempted { seg.insns } else { 0 },
                    hits: if seg.preempted { seg.hits } else { 0 },
                    after: if seg.preempted { seg.after } else { 0 },
                    exact: true,
                };
                return Some(seg.tid);
            }
            // Nothing can run yet: time must move first.
            self.runnable().next()?;
            self.diverged = Some(self.script_pos as u64);
        }
        if self.cfg.policy == Policy::RoundRobin {
            self.slice_len = self.cfg.quantum.max(1);
        }
        let n = self.threads.len() as Tid;
        match self.cfg.policy {
            Policy::RoundRobin => {
                let start = self.last.map_or(0, |l| l + 1);
                (0..n)
                    .map(|i| (start + i) % n)
                    .find(|&t| self.threads[t as usize].state == State::Runnable)
            }
            Policy::Chaos => {
                let c: Vec<Tid> = self.runnable().collect();
                if c.is_empty() {
                    return None;
                }
                let r = self.sched.next_u64();
                // Re-draw the priority of one thread now and then.
                if r.is_multiple_of(4) {
                    let v = c[((r >> 8) % c.len() as u64) as usize];
                    self.threads[v as usize].prio = (self.sched.next_u64() >> 1) as i64;
                }
                // Mostly the highest priority runs (starving the others for
                // a while); sometimes a uniformly random one.
                let pick = if (r >> 4).is_multiple_of(8) {
                    c[((r >> 16) % c.len() as u64) as usize]
                } else {
                    self.highest(&c)
                };
                // Short random slices: 1..=2*quantum/8 events, at least 1.
                let max = (self.cfg.quantum / 4).clamp(1, 64);
                self.slice_len = 1 + (self.sched.next_u64() % max as u64) as u32;
                // Sometimes the turn ends between syscalls, a seeded number
                // of instructions after its first event.
                if self.cfg.chaos_insns > 0
                    && c.len() > 1
                    && self.pending_insns.is_none()
                    && self.sched.next_u64().is_multiple_of(self.point_odds())
                {
                    let p = self.draw_point(self.cfg.chaos_insns);
                    self.pending_insns = Some((p, None));
                }
                Some(pick)
            }
            Policy::Pct { .. } => {
                let c: Vec<Tid> = self.runnable().collect();
                (!c.is_empty()).then(|| self.highest(&c))
            }
        }
    }

    /// The highest-priority thread of `c` (ties: creation order).
    fn highest(&self, c: &[Tid]) -> Tid {
        let mut best = c[0];
        for &t in c {
            if self.threads[t as usize].prio > self.threads[best as usize].prio {
                best = t;
            }
        }
        best
    }

    /// Decide who runs next. The caller has already given up the turn of the
    /// previous thread (blocked it, yielded it, or it died).
    pub fn next_turn(&mut self) -> Next {
        debug_assert!(self.current.is_none());
        // Threads whose deadline has passed are candidates too.
        if self.timers_due() {
            let d = self.fire_due();
            if !d.is_empty() {
                return Next::Deliver(d);
            }
        }
        loop {
            if let Some(t) = self.pick() {
                self.decisions += 1;
                if self.last != Some(t) {
                    self.switches += 1;
                }
                self.threads[t as usize].state = State::Running;
                self.current = Some(t);
                self.last = Some(t);
                self.slice = 0;
                self.recorded.push(Segment {
                    tid: t,
                    events: 0,
                    preempted: false,
                    insns: 0,
                    hits: 0,
                    after: 0,
                });
                return Next::Run(t);
            }
            if self.threads.iter().all(|t| t.state == State::Dead) {
                return Next::Done;
            }
            let net = self.net.next_due().unwrap_or(u64::MAX);
            if self.next_deadline == u64::MAX && net == u64::MAX {
                return Next::Idle;
            }
            // Nothing can run: jump to the next timer or delivery.
            self.clock.advance_to(self.next_deadline.min(net));
            if net <= self.clock.monotonic() {
                return Next::Net;
            }
            let d = self.fire_due();
            if !d.is_empty() {
                return Next::Deliver(d);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn world(policy: Policy) -> World {
        World::new(Config {
            policy,
            quantum: 3,
            ..Config::default()
        })
    }

    #[test]
    fn round_robin_in_creation_order() {
        let mut w = world(Policy::RoundRobin);
        let p = w.add_process();
        let a = w.add_thread(p);
        let b = w.add_thread(p);
        let c = w.add_thread(p);
        let mut order = Vec::new();
        for _ in 0..6 {
            let Next::Run(t) = w.next_turn() else {
                panic!()
            };
            order.push(t);
            w.yield_turn(t);
        }
        assert_eq!(order, vec![a, b, c, a, b, c]);
    }

    #[test]
    fn quantum_expires() {
        let mut w = world(Policy::RoundRobin);
        let p = w.add_process();
        let a = w.add_thread(p);
        assert_eq!(w.next_turn(), Next::Run(a));
        assert!(!w.tick(a));
        assert!(!w.tick(a));
        assert!(w.tick(a));
    }

    #[test]
    fn futex_wait_wake_and_bitsets() {
        let mut w = world(Policy::RoundRobin);
        let p = w.add_process();
        let a = w.add_thread(p);
        let b = w.add_thread(p);
        let key = FutexKey {
            space: 0,
            addr: 0x1000,
        };
        w.block(a, Wait::Futex { key, bitset: 1 }, None);
        w.block(b, Wait::Futex { key, bitset: 2 }, None);
        assert_eq!(w.futex_wake(key, 10, 2), 1);
        assert!(w.is_runnable(b));
        assert!(!w.is_runnable(a));
        assert_eq!(w.take_wake(b), Some(WakeReason::Woken));
        let key2 = FutexKey {
            space: 0,
            addr: 0x2000,
        };
        assert_eq!(w.futex_requeue(key, key2, 0, 1), (0, 1));
        assert_eq!(w.futex_waiters(key2), 1);
        assert_eq!(w.futex_wake(key2, 1, u32::MAX), 1);
        assert!(w.is_runnable(a));
    }

    #[test]
    fn time_jumps_to_the_next_deadline() {
        let mut w = world(Policy::RoundRobin);
        let p = w.add_process();
        let a = w.add_thread(p);
        let t0 = w.clock.monotonic();
        w.block(a, Wait::Sleep, Some(t0 + 60 * crate::clock::NS));
        assert_eq!(w.next_turn(), Next::Run(a));
        assert_eq!(w.clock.monotonic(), t0 + 60 * crate::clock::NS);
        assert_eq!(w.take_wake(a), Some(WakeReason::Timeout));
    }

    #[test]
    fn interval_timer_fires_repeatedly() {
        let mut w = world(Policy::RoundRobin);
        let p = w.add_process();
        let a = w.add_thread(p);
        let spec = TimerSpec {
            signal: 14,
            target: SigTarget::Process,
            value: 0,
            realtime: false,
        };
        w.set_timer(p, ITIMER_REAL_ID, spec, 100, 100);
        w.block(a, Wait::Signal, None);
        for _ in 0..3 {
            match w.next_turn() {
                Next::Deliver(d) => assert_eq!(d[0].spec.signal, 14),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn idle_and_done() {
        let mut w = world(Policy::RoundRobin);
        let p = w.add_process();
        let a = w.add_thread(p);
        w.block(a, Wait::Io, None);
        assert_eq!(w.next_turn(), Next::Idle);
        w.exit_thread(a);
        assert_eq!(w.next_turn(), Next::Done);
    }
}
