//! Property tests of the world, without ptrace: for random sequences of
//! thread events, (1) the same seed gives the same decisions, (2) a policy
//! never picks a parked or dead thread, (3) virtual time never goes back.

use detrun_scheduler::{Config, FutexKey, Next, Policy, Segment, Tid, Wait, World};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Spawn,
    Tick(u8),
    FutexWait(u8),
    FutexWake(u8, u8),
    Sleep(u32),
    Yield,
    Exit,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => Just(Op::Spawn),
        4 => (1u8..20).prop_map(Op::Tick),
        2 => (0u8..3).prop_map(Op::FutexWait),
        2 => (0u8..3, 1u8..4).prop_map(|(k, n)| Op::FutexWake(k, n)),
        2 => (1u32..5_000_000).prop_map(Op::Sleep),
        2 => Just(Op::Yield),
        1 => Just(Op::Exit),
    ]
}

fn policy() -> impl Strategy<Value = Policy> {
    prop_oneof![
        Just(Policy::RoundRobin),
        Just(Policy::Chaos),
        (1u32..4, prop_oneof![Just(0u32), Just(50u32)], any::<bool>()).prop_map(
            |(d, insns, data)| Policy::Pct {
                depth: d,
                steps: 200,
                insns,
                data
            }
        ),
    ]
}

/// Drive a world with `ops`; returns the decisions it made. Panics if an
/// invariant breaks.
fn drive(seed: u64, policy: Policy, ops: &[Op]) -> Vec<Tid> {
    drive_scripted(seed, policy, ops, None).0
}

/// Like `drive`, following `script` if given; also returns the recorded turns.
fn drive_scripted(
    seed: u64,
    policy: Policy,
    ops: &[Op],
    script: Option<Vec<Segment>>,
) -> (Vec<Tid>, Vec<Segment>) {
    let mut w = World::new(Config {
        seed,
        policy,
        quantum: 5,
        ..Config::default()
    });
    if let Some(s) = script {
        w.set_script(s);
    }
    let p = w.add_process();
    w.add_thread(p);
    w.add_thread(p);
    let mut decisions = Vec::new();
    let mut cur: Option<Tid> = None;
    let mut last_time = w.clock.monotonic();
    let mut ops = ops.iter();
    let mut guard = 0;
    loop {
        guard += 1;
        if guard > 10_000 {
            break;
        }
        let t = match cur {
            Some(t) => t,
            None => {
                // The candidates a policy may choose from, before it chooses.
                let runnable: Vec<Tid> = (0..w.thread_count() as Tid)
                    .filter(|&t| w.is_runnable(t))
                    .collect();
                match w.next_turn() {
                    Next::Run(t) => {
                        let due_woken = w.take_wake(t).is_some();
                        assert!(
                            runnable.contains(&t) || due_woken,
                            "picked {t}, which was not runnable ({runnable:?})"
                        );
                        assert!(w.waiting_on(t).is_none(), "picked a parked thread");
                        assert!(w.is_alive(t), "picked a dead thread");
                        decisions.push(t);
                        cur = Some(t);
                        t
                    }
                    Next::Deliver(_) | Next::Net => continue,
                    Next::Idle | Next::Done => break,
                }
            }
        };
        assert!(w.clock.monotonic() >= last_time, "time went backwards");
        last_time = w.clock.monotonic();
        let Some(op) = ops.next() else { break };
        let key = |k: u8| FutexKey {
            space: 1,
            addr: 0x1000 + k as u64 * 4,
        };
        match op {
            Op::Spawn => {
                w.add_thread(p);
            }
            Op::Tick(n) => {
                for i in 0..*n {
                    // Every third event an access of a watched global.
                    let expired = if i % 3 == 2 {
                        w.tick_data(t)
                    } else {
                        w.tick(t)
                    };
                    if expired {
                        w.yield_turn(t);
                        cur = None;
                        break;
                    }
                    // What the tracer does for an instruction-level point.
                    if let Some(k) = w.take_insn_preemption() {
                        w.insn_preempted(t, k.steps, k.hits, k.after);
                        w.yield_turn(t);
                        cur = None;
                        break;
                    }
                }
            }
            Op::FutexWait(k) => {
                w.block(
                    t,
                    Wait::Futex {
                        key: key(*k),
                        bitset: u32::MAX,
                    },
                    Some(w.clock.monotonic() + 10_000_000),
                );
                cur = None;
            }
            Op::FutexWake(k, n) => {
                w.futex_wake(key(*k), *n as u32, u32::MAX);
            }
            Op::Sleep(ns) => {
                let d = w.clock.monotonic() + *ns as u64;
                w.block(t, Wait::Sleep, Some(d));
                cur = None;
            }
            Op::Yield => {
                w.yield_turn(t);
                cur = None;
            }
            Op::Exit => {
                w.exit_thread(t);
                cur = None;
            }
        }
    }
    (decisions, w.recorded.clone())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn same_seed_same_decisions(seed in any::<u64>(), pol in policy(), ops in prop::collection::vec(op(), 1..200)) {
        let a = drive(seed, pol, &ops);
        let b = drive(seed, pol, &ops);
        prop_assert_eq!(a, b);
    }

    /// A recorded schedule replayed under the default policy makes the same
    /// decisions as the chaotic run that recorded it.
    #[test]
    fn recorded_schedule_replays(seed in any::<u64>(), pol in policy(), ops in prop::collection::vec(op(), 1..200)) {
        let (a, rec) = drive_scripted(seed, pol, &ops, None);
        let (b, _) = drive_scripted(seed, Policy::RoundRobin, &ops, Some(rec));
        prop_assert_eq!(a, b);
    }

    #[test]
    fn invariants_hold(seed in any::<u64>(), pol in policy(), ops in prop::collection::vec(op(), 1..300)) {
        drive(seed, pol, &ops);
    }
}

#[test]
fn chaos_decisions_depend_on_the_seed() {
    let ops: Vec<Op> = (0..200)
        .map(|i| if i % 3 == 0 { Op::Yield } else { Op::Tick(1) })
        .collect();
    let runs: std::collections::BTreeSet<Vec<Tid>> =
        (0..10).map(|s| drive(s, Policy::Chaos, &ops)).collect();
    assert!(runs.len() > 1, "chaos made the same decisions for 10 seeds");
}
