//! Starting the guest.
//!
//! Layout when namespaces are permitted:
//!
//! ```text
//! detrun (supervisor, tracer)
//!   └─ reaper: PID 1 of new PID+UTS+mount(+network) namespaces, untraced, reaps orphans
//!        └─ guest: PID 2, traced from its first instruction after exec
//! ```
//!
//! The guest is the reaper's child, so init's special signal rules never
//! apply to it (`kill -9 $$` works), and when the reaper dies (it has
//! PDEATHSIG=SIGKILL, so it dies with detrun) the kernel kills everything in
//! the namespace. Without namespaces the guest is detrun's direct child and
//! PIDs are reported as a hazard.
//!
//! The guest waits on a pipe until the supervisor has seized it, then turns
//! ASLR off, makes `rdtsc` fault, installs the seccomp filter and execs.

use crate::config::RunConfig;
use libc::pid_t;
use seccompiler::BpfProgram;
use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;

pub struct Spawned {
    pub guest: pid_t,
    pub reaper: Option<pid_t>,
    /// Write end: one byte releases the guest.
    go: i32,
    pub namespaces: bool,
}

impl Spawned {
    pub fn release(&self) -> io::Result<()> {
        let b = [1u8];
        // SAFETY: writing one byte from a local buffer.
        let r = unsafe { libc::write(self.go, b.as_ptr().cast(), 1) };
        // SAFETY: closing our own descriptor.
        unsafe { libc::close(self.go) };
        if r == 1 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

struct Prepared {
    path: CString,
    // Owners of the strings the pointer arrays point into.
    _argv: Vec<CString>,
    argv_ptrs: Vec<*const libc::c_char>,
    _env: Vec<CString>,
    env_ptrs: Vec<*const libc::c_char>,
    filter: libc::sock_fprog,
    hostname: CString,
    err_msg: Vec<u8>,
    /// (source file, target) pairs bind-mounted read-only over the host's.
    binds: Vec<(CString, CString)>,
}

fn cstr(b: &[u8]) -> io::Result<CString> {
    CString::new(b)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "argument contains NUL"))
}

fn prepare(cfg: &RunConfig, bpf: &BpfProgram) -> io::Result<Prepared> {
    let path = cstr(cfg.program.as_os_str().as_bytes())?;
    let argv: Vec<CString> = cfg
        .argv
        .iter()
        .map(|a| cstr(a.as_bytes()))
        .collect::<io::Result<_>>()?;
    let mut argv_ptrs: Vec<_> = argv.iter().map(|a| a.as_ptr()).collect();
    argv_ptrs.push(std::ptr::null());
    let env: Vec<CString> = std::env::vars_os()
        .map(|(k, v)| {
            let mut b = k.as_bytes().to_vec();
            b.push(b'=');
            b.extend_from_slice(v.as_bytes());
            cstr(&b)
        })
        .collect::<io::Result<_>>()?;
    let mut env_ptrs: Vec<_> = env.iter().map(|a| a.as_ptr()).collect();
    env_ptrs.push(std::ptr::null());
    let filter = libc::sock_fprog {
        len: bpf.len() as u16,
        filter: bpf.as_ptr() as *mut libc::sock_filter,
    };
    let err_msg = format!("detrun: cannot execute {}: ", cfg.program.display()).into_bytes();
    let mut binds = Vec::new();
    if let Some(dir) = &cfg.files_dir {
        for (name, target) in crate::vfiles::FILES {
            let src = dir.join(name);
            if src.exists() && std::path::Path::new(target).exists() {
                binds.push((cstr(src.as_os_str().as_bytes())?, cstr(target.as_bytes())?));
            }
        }
    }
    Ok(Prepared {
        path,
        _argv: argv,
        argv_ptrs,
        _env: env,
        env_ptrs,
        filter,
        hostname: cstr(cfg.hostname.as_bytes())?,
        err_msg,
        binds,
    })
}

fn pipe() -> io::Result<(i32, i32)> {
    let mut fds = [0; 2];
    // SAFETY: fds is a 2-element array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((fds[0], fds[1]))
}

/// Runs in the forked guest; never returns.
///
/// # Safety
/// Only async-signal-safe calls: we are a fork of the supervisor.
unsafe fn guest_main(p: &Prepared, go_r: i32) -> ! {
    let mut b = [0u8; 1];
    if libc::read(go_r, b.as_mut_ptr().cast(), 1) != 1 {
        libc::_exit(125);
    }
    libc::close(go_r);
    libc::personality(libc::ADDR_NO_RANDOMIZE as libc::c_ulong);
    libc::prctl(libc::PR_SET_TSC, libc::PR_TSC_SIGSEGV, 0, 0, 0);
    libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    if libc::syscall(
        libc::SYS_seccomp,
        libc::SECCOMP_SET_MODE_FILTER,
        0,
        &p.filter as *const libc::sock_fprog,
    ) != 0
    {
        let m = b"detrun: installing the seccomp filter failed\n";
        libc::write(2, m.as_ptr().cast(), m.len());
        libc::_exit(125);
    }
    libc::execve(p.path.as_ptr(), p.argv_ptrs.as_ptr(), p.env_ptrs.as_ptr());
    let e = *libc::__errno_location();
    libc::write(2, p.err_msg.as_ptr().cast(), p.err_msg.len());
    let s = libc::strerror(e);
    libc::write(2, s.cast(), libc::strlen(s));
    libc::write(2, b"\n".as_ptr().cast(), 1);
    libc::_exit(if e == libc::ENOENT { 127 } else { 126 });
}

/// The reaper: PID 1 of the namespace. Reaps until no child is left.
///
/// # Safety
/// Runs in a forked child; async-signal-safe calls only.
unsafe fn reaper_main(p: &Prepared, go_r: i32, go_w: i32, ready_w: i32) -> ! {
    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
    if libc::getppid() == 1 {
        libc::_exit(125); // detrun already gone
    }
    libc::sethostname(p.hostname.as_ptr(), p.hostname.count_bytes());
    libc::setdomainname(c"(none)".as_ptr(), 6);
    // Private mounts, then a /proc that shows this namespace's PIDs.
    if libc::mount(
        std::ptr::null(),
        c"/".as_ptr(),
        std::ptr::null(),
        libc::MS_REC | libc::MS_PRIVATE,
        std::ptr::null(),
    ) == 0
    {
        libc::mount(
            c"proc".as_ptr(),
            c"/proc".as_ptr(),
            c"proc".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        );
        for (src, dst) in &p.binds {
            let r = libc::mount(
                src.as_ptr(),
                dst.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND,
                std::ptr::null(),
            );
            if r != 0 {
                let m = b"detrun: warning: cannot mount the virtual file over ";
                libc::write(2, m.as_ptr().cast(), m.len());
                libc::write(2, dst.as_ptr().cast(), dst.count_bytes());
                libc::write(2, b"\n".as_ptr().cast(), 1);
            }
        }
    }
    let g = libc::fork();
    if g == 0 {
        libc::close(go_w);
        libc::close(ready_w);
        guest_main(p, go_r);
    }
    libc::close(go_r);
    libc::close(go_w);
    if g < 0 {
        libc::_exit(125);
    }
    // The guest exists: detrun may look it up now.
    libc::write(ready_w, b"1".as_ptr().cast(), 1);
    libc::close(ready_w);
    loop {
        let mut st = 0;
        if libc::waitpid(-1, &mut st, 0) < 0 && *libc::__errno_location() == libc::ECHILD {
            libc::_exit(0);
        }
    }
}

/// Fork the guest (and reaper). The guest is stopped on its pipe until
/// [`Spawned::release`].
pub fn spawn(cfg: &RunConfig, bpf: &BpfProgram) -> io::Result<Spawned> {
    let p = prepare(cfg, bpf)?;
    let (go_r, go_w) = pipe()?;
    if cfg.namespaces {
        let (ready_r, ready_w) = pipe()?;
        let mut flags = libc::CLONE_NEWPID | libc::CLONE_NEWUTS | libc::CLONE_NEWNS | libc::SIGCHLD;
        if !cfg.net_host {
            // The virtual network's sockets live in a namespace of the
            // run's own: nothing else on the machine can reach them.
            flags |= libc::CLONE_NEWNET;
        }
        // SAFETY: a fork-like clone (no new stack); the child only makes
        // async-signal-safe calls before exec.
        let r = unsafe { libc::syscall(libc::SYS_clone, flags, 0, 0, 0, 0) };
        if r == 0 {
            // SAFETY: see above.
            unsafe {
                libc::close(ready_r);
                reaper_main(&p, go_r, go_w, ready_w)
            };
        }
        // SAFETY: closing our copy of the write end.
        unsafe { libc::close(ready_w) };
        let mut b = [0u8; 1];
        // SAFETY: a blocking read of one byte into `b`; EOF means the reaper
        // died before it forked.
        let ready = r > 0 && unsafe { libc::read(ready_r, b.as_mut_ptr().cast(), 1) } == 1;
        // SAFETY: our descriptor.
        unsafe { libc::close(ready_r) };
        if r > 0 {
            let reaper = r as pid_t;
            // SAFETY: closing our copy of the read end.
            unsafe { libc::close(go_r) };
            if !ready {
                return Err(io::Error::other("the namespace reaper exited early"));
            }
            let guest = find_child(reaper)?;
            drop(p);
            return Ok(Spawned {
                guest,
                reaper: Some(reaper),
                go: go_w,
                namespaces: true,
            });
        }
        // Not permitted here: fall back to a plain child.
    }
    // SAFETY: fork in a single-threaded supervisor; the child only makes
    // async-signal-safe calls before exec.
    let g = unsafe { libc::fork() };
    if g == 0 {
        // SAFETY: see above.
        unsafe {
            libc::close(go_w);
            guest_main(&p, go_r);
        }
    }
    if g < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: closing our copy of the read end.
    unsafe { libc::close(go_r) };
    drop(p);
    Ok(Spawned {
        guest: g,
        reaper: None,
        go: go_w,
        namespaces: false,
    })
}

/// The reaper's only child, as a PID of our namespace (it has forked it).
fn find_child(reaper: pid_t) -> io::Result<pid_t> {
    let path = format!("/proc/{reaper}/task/{reaper}/children");
    std::fs::read_to_string(&path)
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|x| x.parse().ok()))
        .ok_or_else(|| io::Error::other("the guest process did not appear"))
}
