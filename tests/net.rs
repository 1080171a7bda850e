//! Acceptance tests of the virtual network (issue 4): AF_INET/AF_INET6
//! sockets are answered by a simulated network inside detrun, so servers and
//! clients on 127.0.0.1 are reproducible, latency, loss and partitions are
//! seeded and cost no wall time, and nothing reaches the host's network.

use detrun_tests::*;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Output;
use std::time::{Duration, Instant};

fn testdata(name: &str) -> String {
    path_str(&root().join("testdata").join(name)).to_string()
}

/// A directory holding `hello.txt` for the HTTP guests.
fn http_dir(name: &str) -> PathBuf {
    let d = scratch_dir("net", name);
    std::fs::write(d.join("hello.txt"), "hello from the virtual network\n").expect("hello.txt");
    d
}

// ------------------------------------------------------------------- http

/// Python's http.server and a urllib client, two processes talking over
/// 127.0.0.1:8765: the same transcript on every run.
#[test]
fn http_server_and_urllib_client() {
    let dir = http_dir("http");
    let script = testdata("net_http.sh");
    let args = ["--seed", "7", "--", "sh", &script, path_str(&dir)];
    let o = same_runs(5, &args, "net_http.sh");
    let out = stdout(&o);
    assert!(
        out.contains("status 200\nhello from the virtual network\n"),
        "{}",
        show(&o)
    );
}

/// The same through the name `localhost` (resolved from /etc/hosts, maybe
/// to ::1 first, where nothing listens: that connection must be refused and
/// the client must go on to 127.0.0.1).
#[test]
fn http_via_localhost_name() {
    let dir = http_dir("http-localhost");
    let script = testdata("net_http.sh");
    let args = [
        "--seed",
        "7",
        "--",
        "sh",
        &script,
        path_str(&dir),
        "localhost",
    ];
    let o = same_runs(3, &args, "net_http.sh localhost");
    assert!(
        stdout(&o).contains("status 200\nhello from the virtual network\n"),
        "{}",
        show(&o)
    );
}

// ------------------------------------------------------------------- echo

fn got_lines(out: &str) -> Vec<&str> {
    out.lines().filter(|l| l.contains(" got: ")).collect()
}

/// Checks of one net_echo transcript that hold on any interleaving: 15
/// echoes, each client's in order, the server saw every line once, "done".
fn check_echo(o: &Output, what: &str) {
    assert_eq!(code(o), 0, "{what}:\n{}", show(o));
    let out = stdout(o);
    let got = got_lines(&out);
    assert_eq!(got.len(), 15, "{what}: expected 15 echoes:\n{}", show(o));
    for k in 0..3 {
        let mine: Vec<&str> = got
            .iter()
            .copied()
            .filter(|l| l.starts_with(&format!("c{k} got: ")))
            .collect();
        let want: Vec<String> = (0..5)
            .map(|j| format!("c{k} got: client {k} msg {j}"))
            .collect();
        assert_eq!(mine, want, "{what}: client {k}'s echoes:\n{out}");
    }
    let server = out.lines().filter(|l| l.contains(" line: ")).count();
    assert_eq!(server, 15, "{what}: server lines:\n{out}");
    assert_eq!(out.lines().last(), Some("done"), "{what}:\n{out}");
}

/// An epoll TCP echo server and three forked clients: one transcript per
/// seed under the default policy; chaos scheduling finds other
/// interleavings, each still a correct echo.
#[test]
fn tcp_echo_epoll_three_clients() {
    let bin = build_c("net_echo", false);
    let bin = path_str(&bin);
    let first = same_runs(10, &["--seed", "1", "--", bin], "net_echo --seed 1");
    check_echo(&first, "net_echo --seed 1");

    let mut transcripts = BTreeSet::new();
    for s in 1..=12 {
        let seed = s.to_string();
        let o = detrun(&["--chaos", "--seed", &seed, "--", bin]);
        check_echo(&o, &format!("net_echo --chaos --seed {s}"));
        transcripts.insert(stdout(&o));
    }
    assert!(
        transcripts.len() >= 2,
        "12 chaos seeds gave a single interleaving of the echo:\n{}",
        transcripts.iter().next().unwrap()
    );
}

// -------------------------------------------------------------------- udp

/// The `lost: a,b,c` list of a net_udp run, checked against its per-ping
/// lines.
fn lost_list(o: &Output) -> Vec<u32> {
    let out = stdout(o);
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix("lost:"))
        .unwrap_or_else(|| panic!("no `lost:` line:\n{}", show(o)));
    let lost: Vec<u32> = line
        .trim()
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse()
                .unwrap_or_else(|_| panic!("bad lost list {line:?}"))
        })
        .collect();
    let per_ping: Vec<u32> = out
        .lines()
        .filter_map(|l| l.strip_suffix(" lost"))
        .map(|n| n.parse().expect("ping number"))
        .collect();
    assert_eq!(lost, per_ping, "lost list disagrees with the lines:\n{out}");
    let ok = out.lines().filter(|l| l.ends_with(" ok")).count();
    assert_eq!(ok + lost.len(), 40, "40 pings expected:\n{out}");
    lost
}

/// `--net-loss 30%` drops datagrams by the seed: the same ones on every run
/// with one seed, others with another; without it nothing is lost.
#[test]
fn udp_loss_is_seeded() {
    let bin = build_c("net_udp", false);
    let bin = path_str(&bin);
    let a = same_runs(
        3,
        &["--seed", "3", "--net-loss", "30%", "--", bin],
        "net_udp --seed 3 --net-loss 30%",
    );
    let lost3 = lost_list(&a);
    assert!(
        !lost3.is_empty() && lost3.len() < 40,
        "30% loss lost {} of 40 pings:\n{}",
        lost3.len(),
        show(&a)
    );
    let b = detrun(&["--seed", "4", "--net-loss", "30%", "--", bin]);
    assert_eq!(code(&b), 0, "{}", show(&b));
    let lost4 = lost_list(&b);
    assert_ne!(lost3, lost4, "seeds 3 and 4 lost the same pings");

    let clean = detrun(&["--seed", "3", "--", bin]);
    assert_eq!(code(&clean), 0, "{}", show(&clean));
    assert_eq!(lost_list(&clean), Vec::<u32>::new(), "{}", show(&clean));
}

// ---------------------------------------------------------------- latency

/// `--net-latency 200ms`: each request/response round trip takes at least
/// 400 ms of virtual time, and none of wall time.
#[test]
fn latency_is_virtual() {
    let bin = build_c("net_rtt", false);
    let bin = path_str(&bin);
    detrun_bin(); // built before the clock starts
    let t = Instant::now();
    let o = detrun(&["--net-latency", "200ms", "--", bin]);
    let wall = t.elapsed();
    assert_eq!(code(&o), 0, "{}", show(&o));
    let out = stdout(&o);
    let rtts: Vec<u64> = out
        .lines()
        .filter_map(|l| l.strip_prefix("rtt_ms="))
        .map(|v| v.parse().expect("rtt_ms value"))
        .collect();
    assert_eq!(rtts.len(), 3, "{}", show(&o));
    for r in &rtts {
        assert!(
            *r >= 400,
            "round trip of {r} ms under 200 ms latency:\n{out}"
        );
    }
    assert!(
        wall < Duration::from_secs(1),
        "3 virtual round trips of 400 ms took {wall:?} of wall time"
    );
}

// -------------------------------------------------------------- partition

/// (N, replied, t) of each `N reply t=S` / `N timeout t=S` line.
fn partition_lines(o: &Output) -> Vec<(u32, bool, u64)> {
    let out = stdout(o);
    let v: Vec<(u32, bool, u64)> = out
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f.len(), 3, "bad line {l:?} in:\n{out}");
            let n = f[0].parse().expect("request number");
            let replied = match f[1] {
                "reply" => true,
                "timeout" => false,
                other => panic!("bad outcome {other:?} in:\n{out}"),
            };
            let t = f[2]
                .strip_prefix("t=")
                .and_then(|t| t.parse().ok())
                .unwrap_or_else(|| panic!("bad time in {l:?}"));
            (n, replied, t)
        })
        .collect();
    assert_eq!(v.len(), 12, "12 requests expected:\n{}", show(o));
    v
}

/// A partition between the two ports from 2 s to 7 s of virtual time drops
/// exactly the requests sent inside it; before and after, every request is
/// answered.
#[test]
fn partition_heals() {
    let bin = build_c("net_partition", false);
    let bin = path_str(&bin);
    let o = detrun(&["--net-partition", ":9101/:9102@2s..7s", "--", bin]);
    assert_eq!(code(&o), 0, "{}", show(&o));
    let lines = partition_lines(&o);
    let out = stdout(&o);
    let timeouts: Vec<u64> = lines.iter().filter(|l| !l.1).map(|l| l.2).collect();
    assert!(!timeouts.is_empty(), "no request timed out:\n{out}");
    for &(n, replied, t) in &lines {
        assert_eq!(u64::from(n), t, "request {n} not sent at {n} s:\n{out}");
        if !replied {
            assert!(
                (2..7).contains(&t),
                "request {n} sent at {t} s, outside the partition, timed out:\n{out}"
            );
        }
        if n < 2 || t >= 7 {
            assert!(replied, "request {n} at {t} s got no reply:\n{out}");
        }
    }
    assert_eq!(
        timeouts,
        vec![2, 3, 4, 5, 6],
        "every request sent during the partition is lost:\n{out}"
    );

    let clean = detrun(&["--", bin]);
    assert_eq!(code(&clean), 0, "{}", show(&clean));
    let clean_lines = partition_lines(&clean);
    assert!(
        clean_lines.iter().all(|l| l.1),
        "timeouts without a partition:\n{}",
        stdout(&clean)
    );
}

// --------------------------------------------------------------- external

/// An address outside the sandbox is unreachable at once (no real SYN is
/// sent, nothing waits for a host timeout), and the summary names it.
/// `--net=host` is accepted and reported as a network hazard.
#[test]
fn external_address_fails_fast() {
    let bin = build_c("net_external", false);
    let bin = path_str(&bin);
    detrun_bin();
    let t = Instant::now();
    let o = detrun(&["--summary", "--", bin]);
    let wall = t.elapsed();
    assert_eq!(code(&o), 0, "{}", show(&o));
    let out = stdout(&o);
    assert!(
        out.contains("connect: Network is unreachable\n")
            || out.contains("connect: Connection refused\n"),
        "connect to 192.0.2.1 did not fail as unreachable or refused:\n{}",
        show(&o)
    );
    assert!(out.contains("sendto: "), "{}", show(&o));
    assert!(
        stderr(&o).contains("192.0.2.1"),
        "the summary does not name the external address:\n{}",
        show(&o)
    );
    assert!(
        wall < Duration::from_secs(1),
        "failing to reach 192.0.2.1 took {wall:?} of wall time"
    );

    // A socket on the host's network (created, never connected) is a hazard.
    let prog = "import socket; socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()";
    let h = detrun(&["--net=host", "--summary", "--", "python3", "-c", prog]);
    assert_eq!(code(&h), 0, "--net=host not accepted:\n{}", show(&h));
    assert!(
        stderr(&h).contains("- network: AF_INET/AF_INET6 sockets use the host's network"),
        "--net=host is not reported as a hazard:\n{}",
        show(&h)
    );
    let v = detrun(&["--summary", "--", "python3", "-c", prog]);
    assert!(
        stderr(&v).contains("hazards             none"),
        "a virtual socket is not a hazard:\n{}",
        show(&v)
    );
}

// ---------------------------------------------------------------- runtimes

/// A Node.js http server and client in one process (one event loop).
#[test]
fn node_http_in_one_process() {
    let js = testdata("net_node_http.js");
    let o = same_runs(5, &["--seed", "2", "--", "node", &js], "net_node_http.js");
    let out = stdout(&o);
    assert_eq!(
        out.lines().filter(|l| l.contains(" status 200 ")).count(),
        5,
        "{}",
        show(&o)
    );
    assert!(out.contains("closed after 5 requests"), "{}", show(&o));
}

/// A tokio TCP echo on 4 worker threads (testdata/tokio_net_guest): the
/// order the server saw the messages in is the same on every run.
#[test]
fn tokio_tcp_guest() {
    let bin = build_cargo_guest("tokio_net_guest");
    let o = same_runs(5, &["--seed", "4", "--", path_str(&bin)], "tokio_net_guest");
    let out = stdout(&o);
    assert!(out.contains("messages 40\n"), "{}", show(&o));
    assert!(
        out.contains("server connections: [10, 10, 10, 10]\n"),
        "{}",
        show(&o)
    );
    let order = out
        .lines()
        .find_map(|l| l.strip_prefix("server order: "))
        .unwrap_or_else(|| panic!("no server order:\n{out}"));
    assert_eq!(order.split(' ').count(), 40, "{out}");
}

// -------------------------------------------------------------- isolation

/// Run `detrun ARGS` twice at once (two threads, each spawning a detrun).
fn two_at_once(args: &[&str]) -> (Output, Output) {
    let a: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let b = a.clone();
    let ta = std::thread::spawn(move || detrun(&a.iter().map(String::as_str).collect::<Vec<_>>()));
    let tb = std::thread::spawn(move || detrun(&b.iter().map(String::as_str).collect::<Vec<_>>()));
    (ta.join().expect("run a"), tb.join().expect("run b"))
}

/// Two runs at the same time do not see each other's network: each gets
/// the transcript of a run alone, even on the same fixed port (8765).
#[test]
fn concurrent_runs_are_isolated() {
    let bin = build_c("net_echo", false);
    let bin = path_str(&bin);
    let args = ["--seed", "1", "--", bin];
    let (a, b) = two_at_once(&args);
    let alone = detrun(&args);
    check_echo(&alone, "net_echo alone");
    check_echo(&a, "net_echo concurrent a");
    check_echo(&b, "net_echo concurrent b");
    assert_same(&alone, &a, "net_echo: concurrent run a vs a run alone");
    assert_same(&alone, &b, "net_echo: concurrent run b vs a run alone");

    let dir = http_dir("http-concurrent");
    let script = testdata("net_http.sh");
    let args = ["--seed", "7", "--", "sh", &script, path_str(&dir)];
    let (a, b) = two_at_once(&args);
    let alone = detrun(&args);
    assert_eq!(code(&alone), 0, "{}", show(&alone));
    assert_same(&alone, &a, "net_http.sh: concurrent run a vs a run alone");
    assert_same(&alone, &b, "net_http.sh: concurrent run b vs a run alone");
}

// ------------------------------------------------------------- hermetic

/// The guest's network namespace is the run's own: only a loopback device,
/// so no packet can leave the machine whatever the guest does.
#[test]
fn the_guest_has_a_network_namespace_of_its_own() {
    let o = detrun(&["--", "cat", "/proc/net/dev"]);
    assert_eq!(code(&o), 0, "{}", show(&o));
    let ifaces: Vec<String> = stdout(&o)
        .lines()
        .filter_map(|l| l.split_once(':').map(|(n, _)| n.trim().to_string()))
        .filter(|n| !n.contains('|'))
        .collect();
    assert_eq!(ifaces, vec!["lo".to_string()], "{}", show(&o));
    // With --net=host the host's interfaces show through.
    let h = detrun(&["--net=host", "--", "cat", "/proc/net/dev"]);
    let n = stdout(&h).lines().filter(|l| l.contains(':')).count();
    assert!(
        n >= 2,
        "--net=host hides the host's interfaces:\n{}",
        show(&h)
    );
}

/// A listener on an abstract AF_UNIX name in the host's network namespace
/// (the test's own): a guest socket inside the run's namespace cannot reach
/// it, and may bind the same name.
fn host_listener(tag: &str) -> (std::os::unix::net::UnixListener, String) {
    use std::os::linux::net::SocketAddrExt;
    let name = format!("detrun-netns-{tag}-{}", std::process::id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).expect("name");
    let l = std::os::unix::net::UnixListener::bind_addr(&addr).expect("abstract listener");
    l.set_nonblocking(true).expect("nonblocking");
    (l, name)
}

fn summary_of(args: &[&str], name: &str) -> (Output, serde_json::Value) {
    detrun_summary("net", name, args)
}

/// The run's network namespace is made at the first socket (it costs
/// ~0.8 ms, and most programs make none), yet threads and processes that
/// existed before it, or that dropped root first, make their sockets inside
/// it: none reaches the host's listener, a socketpair end binds the host's
/// name, /proc/…/net shows only `lo`; the same output twice, under load.
#[test]
fn the_network_namespace_is_made_late_but_holds_every_socket() {
    let bin = build_c("netns_late", false);
    let bin = path_str(&bin);
    let (none, v) = summary_of(&["--", "sh", "-c", "true"], "netns-none");
    assert_eq!(code(&none), 0, "{}", show(&none));
    assert_eq!(v["net_namespace"], false, "made without a socket: {v}");
    let _hog = Hog::start();
    let cases: &[(&str, &[&str], u64)] = &[
        (
            "threads",
            &["main: connect: refused", "thread: connect: refused"],
            2,
        ),
        (
            "fork",
            &[
                "parent: connect: refused",
                "child: connect: refused",
                "child exited 0",
            ],
            2,
        ),
        ("setuid", &["nobody: connect: refused"], 1),
        ("userns", &["userns: connect: refused"], 1),
        ("socketpair", &["bind: ok"], 1),
        ("proc", &["thread: 1 interface(s)"], 1),
    ];
    for (mode, want, joins) in cases {
        let (l, name) = host_listener(mode);
        let args = ["--seed", "3", "--", bin, mode, &name];
        let first = same_runs(2, &args, &format!("netns_late {mode}"));
        let (o, v) = summary_of(&args, &format!("netns-{mode}"));
        assert_same(&first, &o, &format!("netns_late {mode} with a summary"));
        let out = stdout(&o);
        for w in *want {
            assert!(
                out.lines().any(|x| x == *w),
                "{mode}: no `{w}`:
{}",
                show(&o)
            );
        }
        assert_eq!(v["net_namespace"], true, "{mode}: {v}");
        assert_eq!(v["net_joins"].as_u64(), Some(*joins), "{mode}: {v}");
        assert_eq!(v["hazards"], serde_json::json!([]), "{mode}: {v}");
        assert!(
            l.accept().is_err(),
            "{mode}: a guest socket reached the host's listener"
        );
    }
}

/// A guest waiting on a virtual socket that nothing in the sandbox will
/// write to is a deadlock (exit 123, the call named), not an external wait.
#[test]
fn waiting_on_a_silent_virtual_socket_is_a_deadlock() {
    let prog = "import socket\n\
        l = socket.socket(); l.bind(('127.0.0.1', 0)); l.listen()\n\
        c = socket.create_connection(l.getsockname()); s, _ = l.accept()\n\
        c.recv(1)\n";
    let o = detrun_limit(&["--", "python3", "-c", prog], Duration::from_secs(60));
    assert_eq!(code(&o), 123, "{}", show(&o));
    assert!(stderr(&o).contains("deadlock"), "{}", show(&o));
    assert!(stderr(&o).contains("recvfrom"), "{}", show(&o));
}

/// Network faults are carried by hunt into every run and into the printed
/// replay command: a run that fails only when a datagram is lost is found
/// under --net-loss and replays.
#[test]
fn hunt_carries_network_faults() {
    let bin = build_c("net_udp", false);
    let dir = scratch_dir("net", "hunt");
    let report = dir.join("report.json");
    let rep = path_str(&report);
    let o = detrun_limit(
        &[
            "hunt",
            "--runs",
            "4",
            "-j",
            "2",
            "--no-progress",
            "--net-loss",
            "30%",
            "--fail-on",
            "stdout-regex=lost: [0-9]",
            "--report",
            rep,
            "--",
            path_str(&bin),
        ],
        Duration::from_secs(300),
    );
    let text = std::fs::read_to_string(&report).unwrap_or_default();
    assert!(
        text.contains("--net-loss=30%"),
        "replay lacks the fault:\n{text}\n{}",
        show(&o)
    );
    let v: serde_json::Value = serde_json::from_str(&text).expect("report is JSON");
    assert_eq!(v["runs"].as_u64(), Some(4), "{text}");
    assert_eq!(v["results"].as_array().map_or(0, |r| r.len()), 4, "{text}");
    let clean = detrun_limit(
        &[
            "hunt",
            "--runs",
            "2",
            "--no-progress",
            "--fail-on",
            "stdout-regex=lost: [0-9]",
            "--",
            path_str(&bin),
        ],
        Duration::from_secs(300),
    );
    assert_eq!(
        code(&clean),
        0,
        "no loss without --net-loss:\n{}",
        show(&clean)
    );
    assert_ne!(
        code(&o),
        0,
        "30% loss over 40 pings lost nothing in 4 runs:\n{}",
        show(&o)
    );
}

/// `--net-reset`: a seeded message breaks the connection; both processes
/// see ECONNRESET, at the same message for one seed, at another for another.
#[test]
fn resets_are_seeded() {
    let py = testdata("net_reset.py");
    let at = |seed: &str| {
        let o = same_runs(
            3,
            &["--seed", seed, "--net-reset", "2%", "--", "python3", &py],
            "net_reset.py",
        );
        let out = stdout(&o);
        assert!(
            out.contains("server: Connection reset by peer"),
            "{}",
            show(&o)
        );
        let line = out
            .lines()
            .find(|l| l.starts_with("client: Connection reset by peer at "))
            .unwrap_or_else(|| panic!("no reset seen by the client:\n{}", show(&o)))
            .to_string();
        line
    };
    let seeds: BTreeSet<String> = ["1", "2", "3", "4"].iter().map(|s| at(s)).collect();
    assert!(
        seeds.len() >= 2,
        "every seed reset at the same message: {seeds:?}"
    );
    let clean = detrun(&["--", "python3", &py]);
    assert_eq!(
        stdout(&clean),
        "client: all 60 echoed\n",
        "{}",
        show(&clean)
    );
}

/// Under CPU load (a hog on every CPU), a chaos run of the echo cluster
/// with faults is the same run as without load.
#[test]
fn echo_with_faults_is_identical_under_load() {
    let bin = build_c("net_echo", false);
    let bin = path_str(&bin);
    let args = [
        "--chaos",
        "--seed",
        "5",
        "--net-latency",
        "3ms",
        "--net-jitter",
        "2ms",
        "--net-loss",
        "10%",
        "--",
        bin,
    ];
    let quiet = detrun(&args);
    check_echo(&quiet, "net_echo with faults");
    let _hog = Hog::start();
    for i in 0..3 {
        let loaded = detrun(&args);
        assert_same(&quiet, &loaded, &format!("net_echo under load, run {i}"));
    }
}

/// A Go net/http server and http.Client in one process (20 sequential and
/// 10 concurrent GETs from goroutines), a TCP echo through net.Dial and a
/// UDP exchange through net.ListenUDP / net.DialUDP: the same on every run.
#[test]
fn go_http_server_and_client() {
    let bin = build_go("go_net_guest");
    let o = same_runs(5, &["--seed", "3", "--", path_str(&bin)], "go_net_guest");
    let out = stdout(&o);
    let responses: Vec<&str> = out
        .lines()
        .filter_map(|l| l.strip_prefix("response: "))
        .collect();
    let mut want: Vec<String> = (0..10)
        .map(|i| format!("conc 200 item c{i:02} ok"))
        .chain((0..20).map(|i| format!("seq 200 item s{i:02} ok")))
        .collect();
    want.sort();
    assert_eq!(responses, want, "{}", show(&o));
    assert!(out.contains("responses: 30\n"), "{}", show(&o));
    assert!(out.contains("total body bytes: 330\n"), "{}", show(&o));
    for i in 0..5 {
        assert!(
            out.contains(&format!("tcp echo: tcp line {i}\n")),
            "{}",
            show(&o)
        );
        assert!(
            out.contains(&format!("udp: pong ping {i}\n")),
            "{}",
            show(&o)
        );
    }
    assert!(out.contains("tcp server echoed 55 bytes\n"), "{}", show(&o));
    assert_eq!(out.lines().last(), Some("done"), "{}", show(&o));
}

/// Checks of one net_asyncio transcript that hold on any schedule.
fn check_asyncio(o: &Output, what: &str) {
    assert_eq!(code(o), 0, "{what}:\n{}", show(o));
    let out = stdout(o);
    for k in 0..5 {
        assert!(
            out.contains(&format!("client {k}: 10 echoes, 50 bytes, 0 after eof\n")),
            "{what}: client {k}:\n{}",
            show(o)
        );
    }
    assert!(out.contains("timeout ok\n"), "{what}:\n{}", show(o));
    assert!(out.contains("server lines: 50\n"), "{what}:\n{}", show(o));
    let order = out
        .lines()
        .find_map(|l| l.strip_prefix("server order: "))
        .unwrap_or_else(|| panic!("{what}: no server order:\n{out}"));
    let seen: BTreeSet<&str> = order.split(' ').collect();
    assert_eq!(seen.len(), 50, "{what}: server order {order:?}");
    for i in 0..5 {
        assert!(
            out.contains(&format!("udp: pong ping {i}\n")),
            "{what}:\n{}",
            show(o)
        );
    }
    assert_eq!(out.lines().last(), Some("done"), "{what}:\n{out}");
}

/// Python asyncio: start_server and 5 concurrent open_connection clients,
/// wait_for timing out on a silent read (virtual time), a datagram endpoint
/// ping-pong. One transcript per seed; every chaos seed is a correct run.
#[test]
fn python_asyncio_network() {
    let py = testdata("net_asyncio.py");
    let o = same_runs(
        5,
        &["--seed", "2", "--", "python3", &py],
        "net_asyncio.py --seed 2",
    );
    check_asyncio(&o, "net_asyncio.py --seed 2");
    // The chaos runs are independent: four at a time.
    for batch in [1..=4, 5..=8] {
        std::thread::scope(|sc| {
            let runs: Vec<_> = batch
                .map(|s| {
                    let py = &py;
                    sc.spawn(move || {
                        let seed = s.to_string();
                        let c = detrun(&["--chaos", "--seed", &seed, "--", "python3", py]);
                        (s, c)
                    })
                })
                .collect();
            for r in runs {
                let (s, c) = r.join().expect("chaos run");
                check_asyncio(&c, &format!("net_asyncio.py --chaos --seed {s}"));
            }
        });
    }
}

/// `--host NAME=ADDR`: the name resolves through the guest's /etc/hosts,
/// the address is the sandbox's own (a server can bind it and a client
/// reach it by name), and an address that is neither stays foreign.
#[test]
fn virtual_hosts_resolve_and_bind() {
    let prog = "import socket, threading\n\
        print(socket.gethostbyname('db'))\n\
        l = socket.socket(); l.bind(('10.0.0.2', 5432)); l.listen()\n\
        def serve():\n    s, a = l.accept(); s.sendall(('hello ' + a[0]).encode()); s.close()\n\
        t = threading.Thread(target=serve); t.start()\n\
        c = socket.create_connection(('db', 5432)); print(c.recv(100).decode()); t.join()\n\
        try:\n    socket.socket().bind(('10.9.9.9', 1))\nexcept OSError as e:\n    print('foreign bind:', e.strerror)\n";
    let o = detrun(&["--host", "db=10.0.0.2", "--", "python3", "-c", prog]);
    assert_eq!(code(&o), 0, "{}", show(&o));
    assert_eq!(
        stdout(&o),
        "10.0.0.2\nhello 10.0.0.2\nforeign bind: Cannot assign requested address\n",
        "{}",
        show(&o)
    );
    let bad = detrun(&["--host", "db", "--", "true"]);
    assert_eq!(
        code(&bad),
        2,
        "a malformed --host is a usage error:\n{}",
        show(&bad)
    );
}
