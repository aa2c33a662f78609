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
