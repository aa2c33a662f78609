//! HTTPS against a real rustls server on 127.0.0.1:0 with a certificate of a private CA (made by `openssl`).

use crate::common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use common::pki::Pki;
use common::*;
use knee_engine::{run, ErrorClass};
use serde_json::json;

/// Start an HTTPS server with a certificate of the test PKI (whose root the client is not given);
/// returns its port and its request counter.
fn untrusted_server(dir: &std::path::Path) -> (u16, Arc<AtomicU64>) {
    let config = Pki::new(dir).server_config();
    let requests = Arc::new(AtomicU64::new(0));
    let addr = https_server(config, b"secure\n", requests.clone(), |_| ());
    (addr.port(), requests)
}

#[test]
fn https_with_insecure_verifier_and_untrusted_cert_failure() {
    let dir = temp_dir("tls");
    let (port, requests) = untrusted_server(&dir);
    let mut client = json!({"kind": "http", "url": format!("https://127.0.0.1:{port}/"), "insecure": true});
    client["expect_body"] = json!("secure");
    let r = run(one_group(2, json!({"total": 100}), client.clone())).unwrap();
    let g = &r.groups[0];
    assert_eq!(succeeded_failed_hung(g), (100, 0, 0), "{}", r.summary_json());
    assert_eq!(g.counts.kind, "https");
    assert_eq!(g.connect.len(), 2, "keep-alive: one TLS handshake per client");
    assert_eq!(requests.load(Ordering::Relaxed), 100);

    client["new_connection"] = json!(true);
    let r = run(one_group(2, json!({"total": 20}), client.clone())).unwrap();
    assert_eq!(
        (r.groups[0].counts.outcomes.succeeded, r.groups[0].connect.len()),
        (20, 20)
    );

    // Without `insecure` the self-signed certificate is rejected: class `tls`.
    client["insecure"] = json!(false);
    let r = run(one_group(1, json!({"total": 3}), client)).unwrap();
    assert_eq!(r.groups[0].failures_of(ErrorClass::Tls), 3, "{}", r.summary_json());
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_handshake_past_the_connect_timeout_is_a_tls_failure_handshake_timeout() {
    // The server accepts and then says nothing: the TLS handshake stalls. With a connect timeout it fails
    // (class tls, "handshake timeout", the connect timed apart); without one it is hung at the operation's
    // timeout.
    let addr = silent_server();
    let client = json!({"kind": "http", "url": format!("https://{addr}/"), "insecure": true,
                        "connect_timeout_ms": 200});
    let mut s = one_group(2, json!({"total": 4}), client.clone());
    s.groups[0].timeout_ms = 2000;
    let r = run_within(s, std::time::Duration::from_secs(10));
    let g = &r.groups[0];
    assert_eq!(succeeded_failed_hung(g), (0, 4, 0), "{}", r.summary_json());
    assert_eq!(g.failures_of(ErrorClass::Tls), 4);
    assert_eq!(
        (g.connect.len(), g.tls.len()),
        (4, 0),
        "the connects are timed, no handshake ended"
    );
    let key = first_reason(&r);
    assert_eq!(
        key,
        "TLS handshake with <addr>: handshake timeout (the connection not open within <n> ms, connect_timeout)"
    );

    let mut unlimited = client;
    unlimited.as_object_mut().unwrap().remove("connect_timeout_ms");
    let mut s = one_group(2, json!({"total": 2}), unlimited);
    s.groups[0].timeout_ms = 300;
    assert_eq!(succeeded_failed_hung(&run(s).unwrap().groups[0]), (0, 0, 2));
}
