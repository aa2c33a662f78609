//! The TCP line protocol: greeting, PING/PONG, echo, QUIT, BUSY past the pool.

use crate::common;

use std::time::{Duration, Instant};

use common::{runtime, start};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

async fn line(rd: &mut BufReader<TcpStream>) -> String {
    let mut l = String::new();
    tokio::time::timeout(Duration::from_secs(2), rd.read_line(&mut l))
        .await
        .unwrap()
        .unwrap();
    l
}

#[test]
fn greeting_ping_echo_quit() {
    let server = start("lambda = 100.0\nsigma = 0.0\nkappa = 0.0\n[tcp]\nhandshake_cost = 2.0\n");
    let addr = server.tcp_addr();
    runtime().block_on(async {
        let t = Instant::now();
        let mut rd = BufReader::new(TcpStream::connect(addr).await.unwrap());
        assert_eq!(line(&mut rd).await, "HELLO knee-target\n");
        let took = t.elapsed();
        assert!(
            // at least the cost; well under ten times it (a cost charged per byte, or in the wrong unit)
            took >= Duration::from_millis(19) && took < Duration::from_millis(200),
            "handshake costs 2 x 10 ms: {took:?}"
        );
        rd.get_mut().write_all(b"PING\nhello there\nQUIT\n").await.unwrap();
        assert_eq!(line(&mut rd).await, "PONG\n");
        assert_eq!(line(&mut rd).await, "hello there\n");
        assert_eq!(line(&mut rd).await, "BYE\n");
        assert_eq!(line(&mut rd).await, "", "closed after QUIT");
    });
    let s: serde_json::Value = serde_json::from_str(&server.stats_json()).unwrap();
    assert_eq!(
        (
            s["tcp_connections"].as_u64(),
            s["tcp_handshakes"].as_u64(),
            s["tcp_lines"].as_u64()
        ),
        (Some(1), Some(1), Some(3))
    );
}

#[test]
fn handshakes_past_the_pool_get_busy() {
    let server = start("lambda = 10.0\nsigma = 0.0\nkappa = 0.0\npool = 1\n[tcp]\nhandshake_cost = 1.0\n");
    let addr = server.tcp_addr();
    runtime().block_on(async {
        let mut a = BufReader::new(TcpStream::connect(addr).await.unwrap());
        tokio::time::sleep(Duration::from_millis(20)).await;
        let mut b = BufReader::new(TcpStream::connect(addr).await.unwrap());
        assert_eq!(line(&mut b).await, "BUSY\n");
        assert_eq!(line(&mut a).await, "HELLO knee-target\n");
    });
    let s: serde_json::Value = serde_json::from_str(&server.stats_json()).unwrap();
    assert_eq!(
        (s["connections_refused"].as_u64(), s["tcp_handshakes"].as_u64()),
        (Some(1), Some(1)),
        "{s}"
    );
}
