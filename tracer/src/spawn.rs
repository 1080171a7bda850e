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
//!
//! The network namespace is made late, on request: creating one costs
//! ~0.8 ms here, a third of a short run, and most programs never make a
//! socket. [`NetRequest::make`] signals the reaper, which moves itself
//! into a new network namespace; guest threads then join it through a
//! pidfd of PID 1 before their first socket (see `netns.rs`).

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
    /// Read end: the reaper's answer to a network namespace request.
    net_done: Option<i32>,
}

impl Spawned {
    /// The handle for making the network namespace later, if there is a
    /// reaper to hold one.
    pub fn take_net_request(&mut self) -> Option<NetRequest> {
        let fd = self.net_done.take()?;
        let reaper = self.reaper?;
        Some(NetRequest { reaper, fd })
    }

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

/// A request to the reaper for the run's network namespace.
pub struct NetRequest {
    pub reaper: pid_t,
    /// Read end: the reaper's answer, 0 or an errno.
    fd: i32,
}

impl NetRequest {
    /// Have the reaper move into a new network namespace.
    pub fn make(self) -> io::Result<()> {
        // SAFETY: a signal to our own child, then a blocking one-byte read
        // into a local from our descriptor (closed by Drop).
        unsafe {
            if libc::kill(self.reaper, libc::SIGUSR1) != 0 {
                return Err(io::Error::last_os_error());
            }
            let mut b = [0u8; 1];
            loop {
                let n = libc::read(self.fd, b.as_mut_ptr().cast(), 1);
                if n < 0 && *libc::__errno_location() == libc::EINTR {
                    continue;
                }
                return match (n, b[0]) {
                    (1, 0) => Ok(()),
                    (1, e) => Err(io::Error::from_raw_os_error(e as i32)),
                    _ => Err(io::Error::other("the reaper did not answer")),
                };
            }
        }
    }
}

impl Drop for NetRequest {
    fn drop(&mut self) {
        // SAFETY: our descriptor.
        unsafe { libc::close(self.fd) };
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

/// SIGPIPE was ignored when detrun started (before Rust's runtime set it
/// to ignored for detrun itself): see [`note_inherited_sigpipe`].
static SIGPIPE_IGNORED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Note SIGPIPE's disposition as detrun's parent left it. Call before
/// Rust's runtime starts (an `.init_array` function of the binary): the
/// guest gets that disposition, not the one detrun runs with.
pub fn note_inherited_sigpipe() {
    // SAFETY: querying a disposition into a local struct.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGPIPE, std::ptr::null(), &mut old) == 0 {
            SIGPIPE_IGNORED.store(
                old.sa_sigaction == libc::SIG_IGN,
                std::sync::atomic::Ordering::Relaxed,
            );
        }
    }
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
    // Handlers are reset by exec, an ignored signal is not: SIGPIPE as
    // detrun found it (the guest's writes to a closed pipe kill it).
    if !SIGPIPE_IGNORED.load(std::sync::atomic::Ordering::Relaxed) {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
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

/// Where the reaper answers a network namespace request (its own copy).
static NET_DONE_W: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

/// SIGUSR1 in the reaper: move into a new network namespace and answer
/// with 0 or the errno. Only raw syscalls, so safe in a handler.
extern "C" fn on_net_request(_: libc::c_int) {
    let fd = NET_DONE_W.swap(-1, std::sync::atomic::Ordering::SeqCst);
    if fd < 0 {
        return;
    }
    // SAFETY: unshare and write of a local byte; errno is this thread's.
    unsafe {
        let b = if libc::unshare(libc::CLONE_NEWNET) == 0 {
            0u8
        } else {
            (*libc::__errno_location()).clamp(1, 255) as u8
        };
        libc::write(fd, (&b as *const u8).cast(), 1);
        libc::close(fd);
    }
}

/// The reaper: PID 1 of the namespace. Reaps until no child is left.
///
/// # Safety
/// Runs in a forked child; async-signal-safe calls only.
unsafe fn reaper_main(p: &Prepared, go_r: i32, go_w: i32, ready_w: i32, net_w: i32) -> ! {
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
    if net_w >= 0 {
        NET_DONE_W.store(net_w, std::sync::atomic::Ordering::SeqCst);
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_net_request as extern "C" fn(libc::c_int) as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut());
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigaddset(&mut set, libc::SIGUSR1);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
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
        // The virtual network's sockets live in a network namespace of the
        // run's own (nothing else on the machine can reach them), made on
        // the first need: the reaper answers on this pipe.
        let (net_r, net_w) = if cfg.net_host { (-1, -1) } else { pipe()? };
        let flags = libc::CLONE_NEWPID | libc::CLONE_NEWUTS | libc::CLONE_NEWNS | libc::SIGCHLD;
        // SAFETY: a fork-like clone (no new stack); the child only makes
        // async-signal-safe calls before exec.
        let r = unsafe { libc::syscall(libc::SYS_clone, flags, 0, 0, 0, 0) };
        if r == 0 {
            // SAFETY: see above.
            unsafe {
                libc::close(ready_r);
                if net_r >= 0 {
                    libc::close(net_r);
                }
                reaper_main(&p, go_r, go_w, ready_w, net_w)
            };
        }
        // SAFETY: closing our copies of the write ends.
        unsafe {
            libc::close(ready_w);
            if net_w >= 0 {
                libc::close(net_w);
            }
        }
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
                net_done: (net_r >= 0).then_some(net_r),
            });
        }
        if net_r >= 0 {
            // SAFETY: our descriptor; no reaper to answer on it.
            unsafe { libc::close(net_r) };
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
        net_done: None,
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
