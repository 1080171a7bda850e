//! A tokio TCP echo on a multi-threaded runtime (4 workers): a listener on
//! 127.0.0.1:0, a task per accepted connection echoing lines, and 4 client
//! tasks each sending 10 lines and reading every echo back.
//!
//! Prints a summary that holds on any schedule (per-client totals, sorted)
//! and the order in which the server saw the messages, which depends on the
//! schedule: under detrun it is the same on every run with one seed.
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

const CLIENTS: u32 = 4;
const MESSAGES: u32 = 10;

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local_addr");
    let seen: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(Vec::new()));

    let server_seen = seen.clone();
    let server = tokio::spawn(async move {
        let mut conns = Vec::new();
        for conn in 0..CLIENTS {
            let (sock, _) = listener.accept().await.expect("accept");
            let seen = server_seen.clone();
            conns.push(tokio::spawn(async move {
                let (rd, mut wr) = sock.into_split();
                let mut lines = BufReader::new(rd).lines();
                let mut n = 0u32;
                while let Some(line) = lines.next_line().await.expect("server read") {
                    seen.lock().unwrap().push(format!("{conn}:{line}"));
                    wr.write_all(format!("{line}\n").as_bytes())
                        .await
                        .expect("server write");
                    n += 1;
                }
                n
            }));
        }
        let mut per_conn = Vec::new();
        for c in conns {
            per_conn.push(c.await.expect("connection task"));
        }
        per_conn
    });

    let mut clients = Vec::new();
    for k in 0..CLIENTS {
        clients.push(tokio::spawn(async move {
            let sock = TcpStream::connect(addr).await.expect("connect");
            let (rd, mut wr) = sock.into_split();
            let mut lines = BufReader::new(rd).lines();
            let (mut count, mut bytes) = (0u32, 0usize);
            for j in 0..MESSAGES {
                let msg = format!("c{k}m{j}");
                wr.write_all(format!("{msg}\n").as_bytes())
                    .await
                    .expect("client write");
                let echo = lines
                    .next_line()
                    .await
                    .expect("client read")
                    .expect("echo before EOF");
                assert_eq!(echo, msg, "client {k}: wrong echo");
                count += 1;
                bytes += echo.len() + 1;
            }
            wr.shutdown().await.expect("shutdown");
            (k, count, bytes)
        }));
    }

    let mut totals = Vec::new();
    for c in clients {
        totals.push(c.await.expect("client task"));
    }
    totals.sort();
    let mut per_conn = server.await.expect("server task");
    per_conn.sort();

    let seen = seen.lock().unwrap();
    for (k, count, bytes) in &totals {
        println!("client {k}: {count} messages, {bytes} bytes echoed");
    }
    println!("server connections: {per_conn:?}");
    println!("messages {}", seen.len());
    println!("server order: {}", seen.join(" "));
}
