//! Parking: a thread that must wait gives up the turn and is blocked in the
//! world; descriptors it waits on are polled (never blocking) at each
//! scheduling point, and the buffers for that are reused.

use crate::ctx::Ctx;
use crate::sys;
use crate::task::{Park, Resume};
use detrun_scheduler::{Tid, Wait, WakeReason};
use libc::pid_t;

/// Buffers reused at every stop (no allocation per stop).
#[derive(Default)]
pub struct IoBufs {
    /// The buffer through which the supervisor completes large writes.
    pub buf: Vec<u8>,
    /// The segments of the write being completed.
    pub segs: Vec<(u64, u64)>,
    /// For `check_io`.
    pub scratch_tids: Vec<Tid>,
    pub scratch_pollfds: Vec<libc::pollfd>,
}

impl Ctx {
    /// Park the running thread. It is stopped at a seccomp stop (or at an
    /// exit stop when `park == Park::Exit`).
    pub fn park(&mut self, tid: pid_t, park: Park, wait: Wait, deadline: Option<u64>, nr: i64) {
        // A wait with its own signal mask may unblock a signal that is
        // already pending: then the real call returns at once.
        if let Some(mask) = self.threads.get(&tid).and_then(|t| t.wait_mask) {
            if sys::sig_state(tid).is_some_and(|s| s.deliverable(mask) != 0) {
                if let Some(t) = self.threads.get_mut(&tid) {
                    t.wait_mask = None;
                    t.io.clear();
                }
                self.continue_running(tid);
                return;
            }
        }
        if let Some(t) = self.threads.get_mut(&tid) {
            t.park = Some(park);
            t.parked_nr = nr;
            self.world.block(t.vt, wait, deadline);
        }
        if self.turn.running == Some(tid) {
            self.turn.running = None;
        }
    }

    /// The running thread gives up the turn, staying runnable; it will
    /// continue with `resume`.
    pub fn yield_running(&mut self, tid: pid_t, resume: Resume) {
        if let Some(t) = self.threads.get_mut(&tid) {
            t.resume = resume;
            self.world.yield_turn(t.vt);
        }
        if self.turn.running == Some(tid) {
            self.turn.running = None;
        }
    }

    /// Wake parked threads whose descriptors became ready.
    pub(crate) fn check_io(&mut self) {
        // Reused vectors: this runs at every stop while a thread waits.
        let mut parked = std::mem::take(&mut self.io.scratch_tids);
        let mut fds = std::mem::take(&mut self.io.scratch_pollfds);
        self.world.parked_into(|w| w == Wait::Io, &mut parked);
        for &vt in &parked {
            let tid = self.vt_tid[vt as usize];
            let Some(t) = self.threads.get(&tid) else {
                continue;
            };
            if t.park == Some(Park::Kernel) {
                continue;
            }
            if t.park == Some(Park::Retry) || (t.io.is_empty() && t.park == Some(Park::Exit)) {
                if self.turn.kernel_retry {
                    self.world.wake(vt, WakeReason::Woken);
                }
                continue;
            }
            if t.io.is_empty() {
                continue;
            }
            use std::os::fd::AsRawFd;
            fds.clear();
            fds.extend(t.io.iter().map(|(f, ev)| libc::pollfd {
                fd: f.as_raw_fd(),
                events: *ev,
                revents: 0,
            }));
            // SAFETY: polling our own stolen descriptors without blocking.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 0) };
            if n > 0 {
                self.world.wake(vt, WakeReason::Woken);
            }
        }
        self.io.scratch_tids = parked;
        self.io.scratch_pollfds = fds;
        self.turn.kernel_retry = false;
    }
}
