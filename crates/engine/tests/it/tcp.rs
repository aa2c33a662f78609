//! TCP client against a real echo server.

use crate::common;

use common::*;
use knee_engine::{run, ErrorClass};
use serde_json::json;

#[test]
fn tcp_echo_round_trips() {
    let addr = echo_server();
    let c = json!({"kind": "tcp", "addr": addr.to_string(), "send": "PING\n", "expect": "PING\n"});
    let r = run(one_group(4, json!({"total": 200}), c)).unwrap();
    let g = &r.groups[0];
    assert_eq!(succeeded_failed_hung(g), (200, 0, 0), "{}", r.summary_json());
    assert_eq!(g.counts.kind, "tcp");
    assert_eq!(g.connect.len(), 200);
    assert_eq!(g.ttfb.len(), 200);
}

#[test]
fn tcp_without_a_match_fails_and_refused_is_classed() {
    let addr = echo_server();
    let mut s = one_group(
        2,
        json!({"total": 4}),
        json!({"kind": "tcp", "addr": addr.to_string(), "send": "PING\n", "expect": "PONG"}),
    );
    s.groups[0].timeout_ms = 300;
    let r = run(s).unwrap();
    // The echo server never says PONG and never closes: the operations hang.
    assert_eq!(r.groups[0].counts.outcomes.hung, 4, "{}", r.summary_json());

    let c = json!({"kind": "tcp", "addr": format!("127.0.0.1:{}", closed_port())});
    let r = run(one_group(1, json!({"total": 3}), c)).unwrap();
    assert_eq!(r.groups[0].failures_of(ErrorClass::ConnectRefused), 3);

    let c = json!({"kind": "tcp", "addr": addr.to_string()});
    let r = run(one_group(2, json!({"total": 10}), c)).unwrap();
    assert_eq!(r.groups[0].counts.outcomes.succeeded, 10, "connect-only operations");
}

/// `source_addrs`: client c connects from `source_addrs[c % len]`, as the server sees it; an address
/// this machine does not have fails the connect, naming it.
#[test]
fn clients_connect_from_their_source_addresses() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = std::thread::spawn(move || {
        let mut peers = std::collections::BTreeMap::<String, u32>::new();
        for _ in 0..8 {
            let (_conn, peer) = listener.accept().unwrap();
            *peers.entry(peer.ip().to_string()).or_default() += 1;
        }
        peers
    });
    let c = json!({"kind": "tcp", "addr": addr.to_string(), "source_addrs": ["127.0.0.2", "127.0.0.3"]});
    let r = run(one_group(4, json!({"per_client": 2}), c)).unwrap();
    assert_eq!(r.groups[0].counts.outcomes.succeeded, 8, "{}", r.summary_json());
    let peers = seen.join().unwrap();
    assert_eq!(format!("{peers:?}"), r#"{"127.0.0.2": 4, "127.0.0.3": 4}"#);

    let c = json!({"kind": "tcp", "addr": addr.to_string(), "source_addrs": ["192.0.2.1"]});
    let r = run(one_group(1, json!({"total": 1}), c)).unwrap();
    let samples = r.groups[0].error_samples(ErrorClass::ConnectError);
    assert!(
        samples.iter().any(|s| s.contains("from 192.0.2.1")),
        "{}",
        r.summary_json()
    );
}

#[test]
fn a_connect_past_its_limit_fails_as_connect_timeout_and_without_one_is_hung() {
    // A listener whose accept queue is full: the kernel drops knee's SYNs.
    let (l, _queued) = full_listener();
    let addr = l.local_addr().unwrap().to_string();
    let reason = |c: serde_json::Value, timeout_ms: u64| {
        let mut s = one_group(1, json!({"total": 2}), c);
        s.groups[0].timeout_ms = timeout_ms;
        let r = run_within(s, std::time::Duration::from_secs(10));
        let g = &r.groups[0];
        (
            succeeded_failed_hung(g),
            g.failures_of(ErrorClass::ConnectTimeout),
            first_reason(&r),
        )
    };
    let tcp = json!({"kind": "tcp", "addr": addr, "send": "PING\n", "connect_timeout_ms": 150});
    let (counts, class, key) = reason(tcp.clone(), 1000);
    assert_eq!((counts, class), ((0, 2, 0), 2), "{key:?}");
    assert_eq!(key, "connect to <addr>: no connection within <n> ms (connect_timeout)");
    // The same for HTTP (and the connect timeout longer than the operation's: hung, as without one).
    let http = json!({"kind": "http", "url": format!("http://{addr}/"), "connect_timeout_ms": 150});
    let (counts, class, _) = reason(http.clone(), 1000);
    assert_eq!((counts, class), ((0, 2, 0), 2));
    let mut long = tcp;
    long["connect_timeout_ms"] = json!(5000);
    assert_eq!(reason(long, 300).0, (0, 0, 2));
    // And WebSocket: a connect still going at the operation's timeout is a hung operation, not one never started
    // (those were left out of the counts, and their clients stopped).
    let ws = json!({"kind": "websocket", "url": format!("ws://{addr}/"), "message": "hi"});
    assert_eq!(reason(ws, 300).0, (0, 0, 2));
}

/// A templated `expect` whose filled-in pattern is not a regex it can compile (a 20 000-byte value repeated a
/// thousand times, past the regex size limit) fails the operation as `request`, before it connects; it skipped
/// the check and counted a success.
#[test]
fn a_filled_in_expect_that_does_not_compile_fails_the_operation_unsent() {
    let addr = echo_server();
    let c = json!({"kind": "tcp", "addr": addr.to_string(), "send": "PING\n", "expect": "^(${u.big}){1000}"});
    let text = format!("big\n{}\n", "a".repeat(20_000));
    let s = spec(json!({
        "threads": 1,
        "data": [{"name": "u", "text": text, "format": "csv", "order": "circular"}],
        "groups": [group("main", 1, json!({"total": 3}), c)],
    }));
    let r = run(s).unwrap();
    let g = &r.groups[0];
    assert_eq!(g.failures_of(ErrorClass::Request), 3, "{}", r.summary_json());
    assert_eq!(g.connect.len(), 0, "{}", r.summary_json());
    assert!(first_reason(&r).contains("expect filled in as"), "{}", first_reason(&r));
}

/// A service that streams without end (chargen) and an `expect` that never matches: the operation fails once the
/// reply passes 1 MiB, said, where it kept every byte until its timeout and matched all of them at each read.
#[test]
fn a_reply_that_streams_past_the_limit_without_a_match_fails_there() {
    let addr = serve_each(|mut conn| {
        use std::io::Write;
        let chunk = vec![b'x'; 64 * 1024];
        while conn.write_all(&chunk).is_ok() {}
    });
    let c = json!({"kind": "tcp", "addr": addr.to_string(), "expect": "NEVER"});
    let mut s = one_group(1, json!({"total": 2}), c);
    s.groups[0].timeout_ms = 20_000;
    let r = run_within(s, std::time::Duration::from_secs(15));
    let g = &r.groups[0];
    assert_eq!(g.failures_of(ErrorClass::Protocol), 2, "{}", r.summary_json());
    assert!(
        first_reason(&r).contains("without a match for expect (knee reads at most <n> MiB of a reply)"),
        "{}",
        first_reason(&r)
    );
}

/// Clients still connecting when a duration's step ends (the service's accept queue full: its kernel drops the
/// SYNs) never started: nothing of them reached the service, as an HTTP request never written. They were counted
/// as started and abandoned, where the same service over http counted none.
#[test]
fn a_tcp_operation_cut_short_while_connecting_never_started() {
    let (l, _queued) = full_listener();
    let addr = l.local_addr().unwrap().to_string();
    for c in [
        json!({"kind": "tcp", "addr": addr, "send": "PING\n"}),
        json!({"kind": "http", "url": format!("http://{addr}/")}),
    ] {
        let mut s = one_group(2, json!({"duration_ms": 300}), c.clone());
        s.groups[0].timeout_ms = 5000;
        let r = run_within(s, std::time::Duration::from_secs(10));
        let o = &r.groups[0].counts.outcomes;
        assert_eq!(
            (o.succeeded, o.failed, o.hung, o.abandoned),
            (0, 0, 0, 0),
            "{c}: {}",
            r.summary_json()
        );
    }
}
