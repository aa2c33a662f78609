//! The limits that produce errors: the pool (503), the request timeout (504), hung requests,
//! the connection limit with its backlog, and a port already in use.

use crate::common;

use std::time::Duration;

use common::{against, assert_stats, closed_loop, get, ms, serve, start, stats, Conn};
use knee_demo_target::{Config, Server};
use tokio::net::TcpStream;

#[test]
fn pool_rejects_past_its_size_and_counts_match() {
    // S = 50 ms flat; pool of 5.
    let (server, addr, rt) = serve("lambda = 20.0\nsigma = 0.0\nkappa = 0.0\npool = 5\nreject_ms = 2.0\n");
    let under = rt.block_on(closed_loop(addr, "/", 5, ms(0), ms(1000), ms(2000)));
    assert_eq!(under.status_503, 0, "5 clients fit a pool of 5: {under:?}");
    server.reset();
    let over = rt.block_on(closed_loop(addr, "/", 8, ms(200), ms(1000), ms(2000)));
    assert!(over.status_503 > 0, "{over:?}");
    // The pool serves at most 5 at a time: 5 / 50 ms = 100/s.
    assert!((over.rate() - 100.0).abs() < 10.0, "{over:?}");
    let s = rt.block_on(stats(addr));
    assert_eq!(s["rejected_pool"].as_u64(), Some(over.status_503), "{s}");
    assert_eq!(s["failed"]["pool"].as_u64(), Some(over.status_503), "{s}");
    assert_eq!(s["served"].as_u64(), Some(over.ok), "{s}");
    assert_eq!(s["requests"].as_u64(), Some(over.ok + over.status_503), "{s}");
    assert_eq!(s["max_in_flight"].as_u64(), Some(5), "{s}");
}

#[test]
fn slow_requests_time_out_with_504() {
    // /slow would take 1 s; the 50 ms timeout answers 504 long before.
    against(
        "lambda = 100.0\nsigma = 0.0\nkappa = 0.0\ntimeout_s = 0.05\n[paths.\"/slow\"]\ncost = 100.0\n",
        |addr| async move {
            let mut c = Conn::open(addr).await.unwrap();
            let t = std::time::Instant::now();
            assert_eq!(c.request("GET", "/slow").await.unwrap().0, 504);
            let took = t.elapsed();
            assert!(
                took >= Duration::from_millis(45) && took < Duration::from_millis(500),
                "504 after the timeout: {took:?}"
            );
            assert_eq!(c.request("GET", "/fast").await.unwrap().0, 200);
            assert_stats(addr, &[("timed_out", 1), ("served", 1)]).await;
        },
    );
}

#[test]
fn a_configured_fraction_of_requests_hangs_silently() {
    let (_server, addr, rt) = serve("lambda = 100.0\nsigma = 0.0\nkappa = 0.0\nhang_after = 0\nhang_fraction = 0.25\n");
    let run = rt.block_on(closed_loop(addr, "/", 4, ms(0), ms(1000), ms(150)));
    let total = run.ok + run.gave_up;
    assert!(total > 40, "{run:?}");
    let frac = run.gave_up as f64 / total as f64;
    assert!((frac - 0.25).abs() < 0.03, "hung fraction {frac:.3}: {run:?}");
    let s = rt.block_on(stats(addr));
    assert_eq!(s["hung"].as_u64(), Some(run.gave_up), "{s}");
    assert_eq!(s["served"].as_u64(), Some(run.ok), "{s}");
    // The clients dropped their hung connections: the server notices and lets go of them.
    let mut hanging = s["hanging"].as_u64();
    for _ in 0..50 {
        if hanging == Some(0) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        hanging = rt.block_on(stats(addr))["hanging"].as_u64();
    }
    assert_eq!(hanging, Some(0));
}

#[test]
fn requests_below_hang_after_never_hang() {
    let (_server, addr, rt) = serve("lambda = 200.0\nsigma = 0.0\nkappa = 0.0\nhang_after = 3\nhang_fraction = 1.0\n");
    let run = rt.block_on(closed_loop(addr, "/", 3, ms(0), ms(500), ms(200)));
    assert_eq!(run.gave_up, 0, "{run:?}");
    let over = rt.block_on(closed_loop(addr, "/", 5, ms(0), ms(500), ms(200)));
    assert!(over.gave_up > 0, "{over:?}");
}

#[test]
fn connections_past_max_wait_in_the_backlog() {
    let (server, addr, rt) = serve("max_connections = 2\nbacklog = 1\nlambda = 1000.0\n");
    rt.block_on(async {
        let mut a = Conn::open(addr).await.unwrap();
        let mut b = Conn::open(addr).await.unwrap();
        assert_eq!(a.request("GET", "/").await.unwrap().0, 200);
        assert_eq!(b.request("GET", "/").await.unwrap().0, 200);
        // The kernel queues up to backlog + 1 more; past that connects time out (SYNs dropped).
        let mut extra = Vec::new();
        let mut timed_out = 0;
        for _ in 0..6 {
            match tokio::time::timeout(Duration::from_millis(300), TcpStream::connect(addr)).await {
                Ok(Ok(s)) => extra.push(s),
                _ => timed_out += 1,
            }
        }
        assert!(timed_out > 0, "no connect waited: {} connected", extra.len());
        assert!(!extra.is_empty(), "the backlog holds some");
        let s: serde_json::Value = serde_json::from_str(&server.stats_json()).unwrap();
        assert_eq!(
            (s["connections_accepted"].as_u64(), s["connections_open"].as_u64()),
            (Some(2), Some(2)),
            "{s}"
        );
        // One connection closes: a queued one is accepted (the oldest in the kernel's accept queue).
        drop(a);
        let mut accepted = 0;
        for _ in 0..100 {
            let s: serde_json::Value = serde_json::from_str(&server.stats_json()).unwrap();
            accepted = s["connections_accepted"].as_u64().unwrap();
            if accepted == 3 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let s: serde_json::Value = serde_json::from_str(&server.stats_json()).unwrap();
        assert_eq!(accepted, 3, "a queued connection is accepted once a slot frees: {s}");
        assert_eq!(b.request("GET", "/").await.unwrap().0, 200);
        drop(extra);
    });
}

#[test]
fn port_in_use_is_a_clear_error() {
    let first = start("");
    let port = first.http_addr().port();
    let cfg = Config::from_toml(&format!("port = {port}")).unwrap();
    let e = Server::start(cfg).err().expect("second bind must fail");
    let msg = e.to_string();
    assert!(e.is_os_error());
    assert!(
        msg.contains(&format!("127.0.0.1:{port}")) && msg.contains("pick another port"),
        "{msg}"
    );
    assert!(!msg.contains('\n'));
}

#[test]
fn admin_endpoints() {
    against("", |addr| async move {
        assert_eq!(get(addr, "GET", "/x").await.0, 200);
        let (st, body) = get(addr, "GET", "/admin/config").await;
        assert_eq!(st, 200);
        let doc: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert!(doc["model"]["n_star"].as_f64().unwrap() > 30.0);
        let (st, body) = get(addr, "POST", "/admin/reset").await;
        assert_eq!(st, 200);
        let before: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(before["served"].as_u64(), Some(1));
        let s = stats(addr).await;
        assert_eq!(
            (s["served"].as_u64(), s["requests"].as_u64()),
            (Some(0), Some(0)),
            "admin calls are not requests"
        );
        assert_eq!(s["state"], "normal");
        assert_eq!(get(addr, "GET", "/admin/nope").await.0, 404);
        assert_eq!(get(addr, "DELETE", "/x").await.0, 405);
    });
}
