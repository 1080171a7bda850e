//! Signals to parked threads: expired virtual timers are sent, and a
//! parked thread with a deliverable signal is woken (interrupted).

use crate::ctx::Ctx;
use crate::sys;
use detrun_scheduler::{ProcId, Wait, WakeReason};

impl Ctx {
    /// Send the signals of expired timers and wake the waiters they interrupt.
    pub fn deliver_timers(&mut self, ds: Vec<detrun_scheduler::Delivery>) {
        for d in ds {
            let p = d.proc as usize;
            if !self.procs.get(p).is_some_and(|x| x.alive) {
                continue;
            }
            let tgid = self.procs[p].tgid;
            let code = if d.timer >= 0 { -2 } else { -6 }; // SI_TIMER, SI_TKILL
            let target = match d.spec.target {
                detrun_scheduler::SigTarget::Thread(vt) if self.world.is_alive(vt) => {
                    self.vt_tid[vt as usize]
                }
                _ => {
                    // Process-directed: the main thread if alive, else the first.
                    let ths = self.world.threads_of(d.proc);
                    match ths.iter().find(|&&v| self.world.is_alive(v)) {
                        Some(&v) => self.vt_tid[v as usize],
                        None => continue,
                    }
                }
            };
            let r = if d.timer >= 0 {
                sys::tgsigqueue(tgid, target, d.spec.signal, code, d.spec.value)
            } else {
                sys::tgkill(tgid, target, d.spec.signal)
            };
            if r.is_ok() {
                self.stats.signals += 1;
            }
            self.check_signals(Some(d.proc));
        }
    }

    /// Wake parked threads (of `proc`, or of every process) that have a
    /// deliverable signal pending.
    pub fn check_signals(&mut self, proc: Option<ProcId>) {
        let parked = self.world.parked(|w| w != Wait::Vfork);
        for vt in parked {
            let tid = self.vt_tid[vt as usize];
            let Some(t) = self.threads.get(&tid) else {
                continue;
            };
            if proc.is_some_and(|p| p != t.proc) {
                continue;
            }
            let Some(st) = sys::sig_state(tid) else {
                continue;
            };
            let mask = t.wait_mask.unwrap_or(st.blocked);
            if st.deliverable(mask) != 0 {
                self.world.wake(vt, WakeReason::Interrupted);
            }
        }
    }
}
