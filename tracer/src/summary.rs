//! What a run saw: syscall counts, virtual time, threads and processes, and
//! every nondeterminism hazard. Printed with `--summary`, written as JSON
//! with `--summary-json`; `--strict` fails the run when `hazards` is not empty.

use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Clone, Debug, Serialize)]
pub struct Hazard {
    pub kind: String,
    pub detail: String,
    pub count: u64,
}

/// One branch run from a checkpoint (`results.json`).
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct BranchResult {
    pub checkpoint: usize,
    /// Virtual time and scheduling decisions at the checkpoint.
    pub at_ns: u64,
    /// The branch point asked for (`--branch-at` replays it from scratch).
    pub requested_ns: u64,
    pub decisions: u64,
    /// The branch's seed (None: the run continued unchanged).
    pub seed: Option<u64>,
    pub exit_code: i32,
    /// Virtual time at the branch's end.
    pub virtual_ns: u64,
    pub wall_ms: u64,
    pub error: Option<String>,
    /// Memory the branch's processes did not share with the checkpoint
    /// when they exited (Private_Dirty, KB): what copy-on-write cost.
    #[serde(default)]
    pub private_dirty_kb: u64,
    pub stdout: Option<String>,
    pub stderr: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    pub seed: u64,
    pub exit_code: i32,
    pub virtual_ns: u64,
    pub wall_ms: u64,
    pub threads: u64,
    pub processes: u64,
    pub syscalls_intercepted: u64,
    pub syscalls: BTreeMap<String, u64>,
    pub rdtsc: u64,
    pub cpuid: u64,
    pub signals_delivered: u64,
    /// Time calls answered inside the tracee (no stop).
    pub fast_time_calls: u64,
    /// Stat calls answered inside the tracee, and call sites patched for it.
    pub fast_stat_calls: u64,
    pub stat_sites_patched: u64,
    /// `rdtsc` sites patched to read the clock page (their reads count as
    /// fast time calls).
    pub rdtsc_sites_patched: u64,
    /// read(2) calls of regular files made in the tracee, and the sites
    /// patched for it.
    pub fast_read_calls: u64,
    pub read_sites_patched: u64,
    pub insn_preemptions: u64,
    /// Instruction-level points moved past detrun's code in the tracee.
    pub insn_points_moved: u64,
    pub single_steps: u64,
    pub breakpoint_hits: u64,
    /// Sync-op entries armed with a breakpoint, and the points they gave.
    pub sync_sites: u64,
    pub sync_points: u64,
    /// Globals watched by debug registers, and the points they gave.
    pub data_watches: u64,
    pub data_points: u64,
    /// Spin waits found by probes and preempted.
    pub spin_points: u64,
    pub scheduling_decisions: u64,
    pub context_switches: u64,
    pub namespaces: bool,
    /// The run's network namespace was made (at the first socket), and how
    /// many threads joined it then.
    pub net_namespace: bool,
    pub net_joins: u64,
    pub hazards: Vec<Hazard>,
    /// Facts that make results machine-specific but not run-specific.
    pub notes: Vec<String>,
    pub deadlock: Option<Vec<String>>,
    /// The supervisor's own peak resident memory (the guest's is not counted).
    pub supervisor_max_rss_kb: u64,
    /// Heap allocations the supervisor made (it makes none per stop).
    pub supervisor_allocs: u64,
    /// The virtual network's traffic (absent with --net=host or no sockets).
    pub network: Option<NetSummary>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct NetSummary {
    pub connections: u64,
    pub refused: u64,
    pub datagrams: u64,
    pub dropped_loss: u64,
    pub dropped_partition: u64,
    pub undeliverable: u64,
    pub retransmits: u64,
    pub held_by_partition: u64,
    pub resets: u64,
    /// Addresses outside the sandbox the guest tried to reach (unreachable).
    pub external: Vec<String>,
}

/// Counters kept during the run without allocation on the hot path.
#[derive(Clone)]
pub struct Stats {
    pub by_nr: Box<[u64; 512]>,
    pub rdtsc: u64,
    pub cpuid: u64,
    pub signals: u64,
    /// Time calls the in-tracee stubs answered.
    pub fast_time_calls: u64,
    pub fast_stat_calls: u64,
    pub stat_sites_patched: u64,
    /// `rdtsc` sites patched to read the clock page (their reads count as
    /// fast time calls).
    pub rdtsc_sites_patched: u64,
    /// read(2) calls of regular files made in the tracee, and the sites
    /// patched for it.
    pub fast_read_calls: u64,
    pub read_sites_patched: u64,
    pub insn_preemptions: u64,
    /// Instruction-level points moved past detrun's code in the tracee.
    pub insn_points_moved: u64,
    pub single_steps: u64,
    pub breakpoint_hits: u64,
    /// Sync-op entries armed, and the points they gave.
    pub sync_sites: u64,
    pub sync_points: u64,
    pub data_watches: u64,
    pub data_points: u64,
    pub spin_points: u64,
    pub threads: u64,
    pub processes: u64,
    hazards: BTreeMap<(String, String), u64>,
    notes: BTreeMap<String, String>,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            by_nr: Box::new([0; 512]),
            rdtsc: 0,
            cpuid: 0,
            signals: 0,
            fast_time_calls: 0,
            fast_stat_calls: 0,
            stat_sites_patched: 0,
            rdtsc_sites_patched: 0,
            fast_read_calls: 0,
            read_sites_patched: 0,
            insn_preemptions: 0,
            insn_points_moved: 0,
            single_steps: 0,
            breakpoint_hits: 0,
            sync_sites: 0,
            sync_points: 0,
            data_watches: 0,
            data_points: 0,
            spin_points: 0,
            threads: 0,
            processes: 0,
            hazards: BTreeMap::new(),
            notes: BTreeMap::new(),
        }
    }
}

impl Stats {
    #[inline]
    pub fn count(&mut self, nr: i64) {
        if let Some(c) = usize::try_from(nr).ok().and_then(|i| self.by_nr.get_mut(i)) {
            *c += 1;
        }
    }

    /// Record a hazard; returns true the first time this (kind, detail) is seen.
    pub fn hazard(&mut self, kind: &str, detail: impl Into<String>) -> bool {
        let e = self
            .hazards
            .entry((kind.to_string(), detail.into()))
            .or_insert(0);
        *e += 1;
        *e == 1
    }

    /// Record a portability note (same on every run here, may differ elsewhere).
    pub fn note(&mut self, kind: &str, text: &str) {
        self.notes
            .entry(kind.to_string())
            .or_insert_with(|| text.to_string());
    }

    pub fn has_hazards(&self) -> bool {
        !self.hazards.is_empty()
    }

    pub fn summary(&self) -> Summary {
        let mut syscalls = BTreeMap::new();
        let mut total = 0;
        for (nr, &c) in self.by_nr.iter().enumerate() {
            if c > 0 {
                let name = crate::sysnames::name(nr as i64)
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("syscall_{nr}"));
                syscalls.insert(name, c);
                total += c;
            }
        }
        Summary {
            threads: self.threads,
            processes: self.processes,
            syscalls_intercepted: total,
            syscalls,
            rdtsc: self.rdtsc,
            cpuid: self.cpuid,
            signals_delivered: self.signals,
            fast_time_calls: self.fast_time_calls,
            fast_stat_calls: self.fast_stat_calls,
            stat_sites_patched: self.stat_sites_patched,
            rdtsc_sites_patched: self.rdtsc_sites_patched,
            fast_read_calls: self.fast_read_calls,
            read_sites_patched: self.read_sites_patched,
            insn_preemptions: self.insn_preemptions,
            insn_points_moved: self.insn_points_moved,
            single_steps: self.single_steps,
            breakpoint_hits: self.breakpoint_hits,
            sync_sites: self.sync_sites,
            sync_points: self.sync_points,
            data_watches: self.data_watches,
            data_points: self.data_points,
            spin_points: self.spin_points,
            hazards: self
                .hazards
                .iter()
                .map(|((k, d), &c)| Hazard {
                    kind: k.clone(),
                    detail: d.clone(),
                    count: c,
                })
                .collect(),
            notes: self
                .notes
                .iter()
                .map(|(k, v)| format!("{k}: {v}"))
                .collect(),
            ..Summary::default()
        }
    }
}

impl Summary {
    /// The human-readable form, for stderr.
    pub fn render(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let _ = writeln!(s, "detrun summary (seed {})", self.seed);
        let _ = writeln!(s, "  exit code           {}", self.exit_code);
        let _ = writeln!(
            s,
            "  virtual time        {}.{:06} s   (wall {} ms)",
            self.virtual_ns / 1_000_000_000,
            (self.virtual_ns % 1_000_000_000) / 1000,
            self.wall_ms
        );
        let _ = writeln!(
            s,
            "  threads / processes {} / {}",
            self.threads, self.processes
        );
        let _ = writeln!(
            s,
            "  intercepted         {} syscalls, {} rdtsc, {} cpuid, {} signals; {} time and {} stat calls answered in the tracee",
            self.syscalls_intercepted,
            self.rdtsc,
            self.cpuid,
            self.signals_delivered,
            self.fast_time_calls,
            self.fast_stat_calls
        );
        let _ = writeln!(
            s,
            "  preemption          {} instruction preemptions, {} single-steps, {} breakpoint hits",
            self.insn_preemptions, self.single_steps, self.breakpoint_hits
        );
        if self.spin_points > 0 {
            let _ = writeln!(
                s,
                "  spin points         {} spin waits preempted",
                self.spin_points
            );
        }
        if self.sync_sites > 0 {
            let _ = writeln!(
                s,
                "  sync points         {} at {} sync-op entries and atomics",
                self.sync_points, self.sync_sites
            );
        }
        if self.data_watches > 0 {
            let _ = writeln!(
                s,
                "  data points         {} at {} watched globals",
                self.data_points, self.data_watches
            );
        }
        let _ = writeln!(
            s,
            "  scheduling          {} decisions, {} switches",
            self.scheduling_decisions, self.context_switches
        );
        let mut top: Vec<_> = self.syscalls.iter().collect();
        top.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let list: Vec<String> = top
            .iter()
            .take(12)
            .map(|(n, c)| format!("{n} {c}"))
            .collect();
        if !list.is_empty() {
            let _ = writeln!(s, "  top syscalls        {}", list.join(", "));
        }
        if self.hazards.is_empty() {
            let _ = writeln!(s, "  hazards             none");
        } else {
            let _ = writeln!(s, "  hazards             {}", self.hazards.len());
            for h in &self.hazards {
                let _ = writeln!(s, "    - {}: {} (x{})", h.kind, h.detail, h.count);
            }
        }
        if let Some(n) = &self.network {
            let _ = writeln!(
                s,
                "  network (virtual)   {} connections ({} refused), {} datagrams ({} lost, {} cut by partitions, {} undeliverable), {} retransmits, {} held by partitions, {} resets",
                n.connections, n.refused, n.datagrams, n.dropped_loss, n.dropped_partition,
                n.undeliverable, n.retransmits, n.held_by_partition, n.resets
            );
            if !n.external.is_empty() {
                let _ = writeln!(
                    s,
                    "  network             unreachable outside the sandbox: {} (use --net=host to reach the real network)",
                    n.external.join(", ")
                );
            }
        }
        for n in &self.notes {
            let _ = writeln!(s, "  note                {n}");
        }
        s
    }
}
