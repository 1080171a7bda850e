//! The mechanism of detrun: spawn the sandbox, the seccomp filter, the
//! ptrace event loop, tracee registers and memory, syscall injection at
//! exec, instruction emulation (rdtsc, cpuid), and the syscall handlers that
//! turn each intercepted call into an operation on the world.

pub mod alloc;
pub mod backtrace;
pub mod checkpoint;
pub mod config;
pub mod coverage;
pub mod ctx;
pub mod datapoints;
pub mod files;
pub mod filter;
pub mod handlers;
pub mod host;
pub mod insn;
pub mod lifecycle;
pub mod net;
pub mod netns;
pub mod parking;
pub mod patch;
pub mod schedule;
pub mod selftime;
pub mod signals;
pub mod spawn;
pub mod summary;
pub mod supervisor;
pub mod syncpoints;
pub mod sys;
pub mod sysnames;
pub mod table;
pub mod task;
pub mod trace;
pub mod vdso;
pub mod vfiles;
pub mod watchdog;

pub use config::RunConfig;
pub use summary::Summary;
pub use supervisor::{Supervisor, EXIT_DEADLOCK, EXIT_HAZARD, EXIT_INTERNAL, EXIT_TIMEOUT};

/// The layering `docs/ARCHITECTURE.md` describes, checked on the sources.
#[cfg(test)]
mod layering {
    use std::path::{Path, PathBuf};

    fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).expect("src") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                sources(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }

    /// Lines of code (not comments) of `p` that name `what`.
    fn naming(p: &Path, what: &str) -> Vec<String> {
        std::fs::read_to_string(p)
            .expect("source")
            .lines()
            .filter(|l| !l.trim_start().starts_with("//") && l.contains(what))
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn only_the_loop_names_the_loop_and_parts_do_not_name_handlers() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        sources(&src, &mut files);
        assert!(files.len() > 30, "{} sources", files.len());
        for f in &files {
            let rel = f.strip_prefix(&src).expect("under src");
            let r = rel.to_string_lossy();
            if r == "lib.rs" {
                continue;
            }
            let in_loop = r.starts_with("supervisor/");
            let in_handlers = r.starts_with("handlers/");
            if !in_loop {
                let bad = naming(f, "supervisor::");
                assert!(bad.is_empty(), "{r} reaches the loop: {bad:?}");
            }
            if !in_loop && !in_handlers {
                let bad = naming(f, "handlers::");
                assert!(bad.is_empty(), "{r} (a part) uses a handler: {bad:?}");
            }
        }
    }

    /// Every module docs/ARCHITECTURE.md names exists.
    #[test]
    fn the_architecture_map_names_real_modules() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let doc = std::fs::read_to_string(root.join("docs/ARCHITECTURE.md")).expect("doc");
        let mut named = 0;
        for part in doc.split('`').skip(1).step_by(2) {
            let Some(stem) = part.strip_suffix(".rs") else {
                continue;
            };
            let found = [
                "tracer/src",
                "tracer/src/supervisor",
                "tracer/src/checkpoint",
                "tracer/src/handlers",
            ]
            .iter()
            .any(|d| root.join(d).join(format!("{stem}.rs")).exists())
                || root.join(part).exists();
            assert!(
                found,
                "docs/ARCHITECTURE.md names {part}, which does not exist"
            );
            named += 1;
        }
        for dir in [
            "cli/",
            "tracer/",
            "scheduler/",
            "shim/",
            "tests/",
            "checkpoint/",
        ] {
            assert!(doc.contains(&format!("`{dir}`")), "{dir} is on the map");
        }
        assert!(named > 20, "{named} modules named");
    }
}
