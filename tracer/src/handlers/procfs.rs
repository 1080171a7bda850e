//! `/proc/<pid>/stat` and `/proc/<pid>/status` with virtual times and
//! counters. An `open`/`openat` of one of them is redirected to a file the
//! supervisor writes: the guest's own view of the file (read through
//! `/proc/<pid>/root/proc`, so PIDs are the namespace's) with CPU times from
//! virtual time and fault and context-switch counters zeroed.

use super::Out;
use crate::ctx::Ctx;
use crate::sys::{self, Args, Regs};
use crate::task::Post;
use libc::pid_t;

/// (pid part, file) of a path this module answers, e.g. ("self", "stat").
fn parse(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_prefix("/proc/")?;
    let (who, file) = rest.rsplit_once('/')?;
    if file != "stat" && file != "status" {
        return None;
    }
    let ok = who == "self"
        || who == "thread-self"
        || who
            .split("/task/")
            .all(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()))
        || who
            .strip_prefix("self/task/")
            .is_some_and(|p| p.bytes().all(|c| c.is_ascii_digit()));
    ok.then_some((who, file))
}

fn virtual_stat(text: &str, utime_ticks: u64) -> String {
    // Fields after "(comm)" start at field 3 (state).
    let Some(close) = text.rfind(')') else {
        return text.to_string();
    };
    let (head, tail) = text.split_at(close + 1);
    let mut f: Vec<String> = tail.split_whitespace().map(str::to_string).collect();
    // proc(5) numbering: field n is f[n - 3].
    let mut set = |n: usize, v: String| {
        if let Some(x) = f.get_mut(n - 3) {
            *x = v;
        }
    };
    // The reader is running, not in the tracing stop the supervisor sees.
    set(3, "R".into());
    for n in [10, 11, 12, 13, 15, 16, 17, 22, 39] {
        set(n, "0".into());
    }
    set(14, utime_ticks.to_string());
    format!("{head} {}\n", f.join(" "))
}

fn virtual_status(text: &str, ncpus: u32) -> String {
    let mask = if ncpus >= 64 {
        u64::MAX
    } else {
        (1u64 << ncpus) - 1
    };
    text.lines()
        .map(|l| {
            let key = l.split(':').next().unwrap_or("");
            match key {
                "voluntary_ctxt_switches" | "nonvoluntary_ctxt_switches" => format!("{key}:\t0"),
                "Cpus_allowed" => format!("{key}:\t{mask:x}"),
                "Cpus_allowed_list" => format!("{key}:\t0-{}", ncpus.max(1) - 1),
                _ => l.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

pub fn handle(s: &mut Ctx, tid: pid_t, a: &Args, mut regs: Regs) -> Out {
    let path_arg = if a.nr == libc::SYS_open { 0 } else { 1 };
    let ptr = a.a[path_arg];
    let Ok(raw) = sys::read_cstr(tid, ptr, 256) else {
        return Out::Pass;
    };
    let Ok(path) = std::str::from_utf8(&raw) else {
        return Out::Pass;
    };
    // What /proc/…/net shows is the opener's network namespace.
    if crate::netns::is_proc_net(path) && crate::netns::join(s, tid, &regs) {
        return Out::Again;
    }
    let Some((who, file)) = parse(path) else {
        return Out::Pass;
    };
    let Some(t) = s.threads.get(&tid) else {
        return Out::Pass;
    };
    let (proc, tgid) = (t.proc, s.procs[t.proc as usize].tgid);
    let ns_self = super::process::ns_id(tgid);
    let ns_thread = super::process::ns_id(tid);
    let who = match who {
        "self" => ns_self.to_string(),
        "thread-self" => format!("{ns_self}/task/{ns_thread}"),
        w => w.replacen("self", &ns_self.to_string(), 1),
    };
    let real = format!("/proc/{tgid}/root/proc/{who}/{file}");
    let Ok(text) = std::fs::read_to_string(&real) else {
        return Out::Pass;
    };
    let ticks = s.world.proc_cpu_ns(proc) / 10_000_000;
    let out = if file == "stat" {
        virtual_stat(&text, ticks)
    } else {
        virtual_status(&text, s.cfg.ncpus)
    };
    let Some(dir) = s.cfg.files_dir.clone() else {
        return Out::Pass;
    };
    s.files.proc_files += 1;
    let fpath = dir.join(format!("proc-{}", s.files.proc_files));
    if std::fs::write(&fpath, out).is_err() {
        return Out::Pass;
    }
    // The new path goes below the red zone of the guest's stack; the
    // original pointer is put back at the exit stop.
    let mut bytes = fpath.to_string_lossy().into_owned().into_bytes();
    bytes.push(0);
    let scratch = (regs.rsp - 256 - bytes.len() as u64) & !15;
    if sys::write_mem(tid, scratch, &bytes).is_err() {
        return Out::Pass;
    }
    sys::set_arg(&mut regs, path_arg, scratch);
    Out::Exit(
        regs,
        Post::RestoreArg {
            index: path_arg,
            value: ptr,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognizes_proc_paths() {
        assert_eq!(parse("/proc/self/stat"), Some(("self", "stat")));
        assert_eq!(parse("/proc/12/status"), Some(("12", "status")));
        assert_eq!(parse("/proc/12/task/13/stat"), Some(("12/task/13", "stat")));
        assert_eq!(parse("/proc/self/maps"), None);
        assert_eq!(parse("/etc/passwd"), None);
        assert_eq!(parse("/proc/x/stat"), None);
    }

    #[test]
    fn stat_fields_are_virtualized() {
        let real = "7 (a b) R 1 7 7 0 -1 4194304 97 3 4 5 66 77 8 9 20 0 1 0 425661 3133440 381 1";
        let v = virtual_stat(real, 5);
        let f: Vec<&str> = v.split(')').nth(1).unwrap().split_whitespace().collect();
        assert_eq!(f[10 - 3], "0");
        assert_eq!(f[14 - 3], "5");
        assert_eq!(f[15 - 3], "0");
        assert_eq!(f[22 - 3], "0");
        assert!(v.starts_with("7 (a b) R 1"));
        assert!(virtual_stat("7 (x) t 1 2", 0).starts_with("7 (x) R 1"));
    }
}
