//! A multi-threaded tokio runtime: tasks on 4 worker threads, timers and a
//! channel. Under detrun the output (including timings) is the same each run.
use std::time::{Duration, Instant};

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() {
    let start = Instant::now();
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    let mut handles = Vec::new();
    for i in 0..8u64 {
        let tx = tx.clone();
        handles.push(tokio::spawn(async move {
            let mut acc = i;
            for j in 0..20u64 {
                tokio::time::sleep(Duration::from_millis(1 + (i * 7 + j) % 5)).await;
                acc = acc.wrapping_mul(31).wrapping_add(j);
                tx.send((i, j)).await.unwrap();
            }
            acc
        }));
    }
    drop(tx);
    let mut order = Vec::new();
    while let Some(m) = rx.recv().await {
        order.push(m);
    }
    let mut sums = Vec::new();
    for h in handles {
        sums.push(h.await.unwrap());
    }
    let digest = order.iter().fold(0u64, |a, (i, j)| a.wrapping_mul(1_000_003).wrapping_add(i * 100 + j));
    println!("messages {} digest {digest} sums {sums:?}", order.len());
    println!("elapsed_ms {}", start.elapsed().as_millis());
}
