//! The TCP line protocol on the second port, for connection and handshake tests:
//! connect → (handshake cost) → greeting line → per line: `PING` → `PONG`, `QUIT` → `BYE` and
//! close, anything else is echoed back. A connection past the pool gets `BUSY` and is closed.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::state::{Admit, Shared};

const MAX_LINE: u64 = 64 * 1024;

/// What admitting one exchange came to.
enum Step {
    Go,
    Busy,
    Hang,
}

/// Admit one exchange of `cost`, wait for a worker, and wait its service time.
async fn exchange(shared: &Shared, cost: f64) -> Step {
    if cost <= 0.0 {
        return Step::Go;
    }
    match shared.admit() {
        Admit::Reject => {
            shared
                .sleep(Duration::from_secs_f64(shared.cfg.reject_ms / 1000.0))
                .await;
            Step::Busy
        }
        Admit::Hang => Step::Hang,
        Admit::Serve(n) => {
            struct Leave<'a>(&'a Shared);
            impl Drop for Leave<'_> {
                fn drop(&mut self) {
                    self.0.leave();
                }
            }
            let _leave = Leave(shared);
            // No timeout on the line protocol: it waits for a worker as long as it takes.
            if let Some(worker) = shared.workers.take(n, None, &shared.timer).await {
                shared.sleep(shared.service_time(worker.n, cost)).await;
            }
            Step::Go
        }
    }
}

/// Hold the connection silently until the client closes it.
async fn hang(shared: &Shared, rd: &mut BufReader<tokio::net::tcp::OwnedReadHalf>) {
    shared.counters.hung.fetch_add(1, Relaxed);
    shared.hanging.fetch_add(1, Relaxed);
    let mut sink = [0u8; 4096];
    while matches!(rd.read(&mut sink).await, Ok(n) if n > 0) {}
    shared.hanging.fetch_sub(1, Relaxed);
}

/// Serve one TCP connection.
pub async fn serve(shared: Arc<Shared>, stream: TcpStream) {
    let c = &shared.counters;
    c.tcp_connections.fetch_add(1, Relaxed);
    let _ = stream.set_nodelay(true);
    let (rd, mut wr) = stream.into_split();
    let mut rd = BufReader::new(rd);
    match exchange(&shared, shared.cfg.tcp.handshake_cost).await {
        Step::Go => {}
        Step::Busy => {
            c.connections_refused.fetch_add(1, Relaxed);
            let _ = wr.write_all(b"BUSY\n").await;
            let _ = wr.shutdown().await;
            return;
        }
        Step::Hang => return hang(&shared, &mut rd).await,
    }
    c.tcp_handshakes.fetch_add(1, Relaxed);
    if !shared.cfg.tcp.greeting.is_empty() && wr.write_all(shared.cfg.tcp.greeting.as_bytes()).await.is_err() {
        return;
    }
    let mut line = Vec::with_capacity(128);
    loop {
        line.clear();
        match (&mut rd).take(MAX_LINE).read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let text = String::from_utf8_lossy(&line);
        let cmd = text.trim_end_matches(['\r', '\n']);
        match exchange(&shared, shared.cfg.tcp.line_cost).await {
            Step::Go => {}
            Step::Busy => {
                if wr.write_all(b"BUSY\n").await.is_err() {
                    return;
                }
                continue;
            }
            Step::Hang => return hang(&shared, &mut rd).await,
        }
        c.tcp_lines.fetch_add(1, Relaxed);
        let reply: Vec<u8> = match cmd {
            "PING" => b"PONG\n".to_vec(),
            "QUIT" => {
                let _ = wr.write_all(b"BYE\n").await;
                let _ = wr.shutdown().await;
                return;
            }
            other => format!("{other}\n").into_bytes(),
        };
        if wr.write_all(&reply).await.is_err() {
            return;
        }
    }
}
