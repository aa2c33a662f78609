//! HTTP/2 against a real HTTP/2 server (the `h2` crate's) on 127.0.0.1:0, h2c (prior knowledge) and over
//! TLS (ALPN h2): clients as streams over ⌈clients / streams⌉ connections, and the accounting held against
//! the server's own count through GOAWAY, refused and reset streams, in closed and open loop.

use crate::common;

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use common::pki::Pki;
use common::*;
use knee_engine::{run, ErrorClass};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncWrite};

/// How the server behaves (every n-th stream of a connection, counting from 1).
#[derive(Clone, Copy, Default)]
struct Behaviour {
    /// GOAWAY (graceful: the streams in flight are still answered) after this many requests on a connection.
    goaway_after: Option<u64>,
    /// RST_STREAM REFUSED_STREAM, unprocessed (not counted as a request).
    refuse_every: Option<u64>,
    /// RST_STREAM INTERNAL_ERROR after taking the request (counted).
    reset_every: Option<u64>,
    /// Answer after this long.
    delay_ms: u64,
}

#[derive(Clone, Default)]
struct Counts {
    requests: Arc<AtomicU64>,
    connections: Arc<AtomicU64>,
    /// The addresses connections came from.
    peers: Arc<Mutex<BTreeSet<IpAddr>>>,
}

async fn serve_connection<S: AsyncRead + AsyncWrite + Unpin>(io: S, b: Behaviour, c: Counts) {
    let Ok(mut conn) = h2::server::Builder::new()
        .max_concurrent_streams(250)
        .handshake::<_, Bytes>(io)
        .await
    else {
        return;
    };
    c.connections.fetch_add(1, Ordering::Relaxed);
    let mut seen = 0u64;
    let mut taken = 0u64;
    while let Some(next) = conn.accept().await {
        let Ok((_req, mut respond)) = next else { break };
        seen += 1;
        if b.refuse_every.is_some_and(|n| seen.is_multiple_of(n)) {
            respond.send_reset(h2::Reason::REFUSED_STREAM);
            continue;
        }
        c.requests.fetch_add(1, Ordering::Relaxed);
        taken += 1;
        if b.reset_every.is_some_and(|n| taken.is_multiple_of(n)) {
            respond.send_reset(h2::Reason::INTERNAL_ERROR);
        } else {
            tokio::spawn(async move {
                if b.delay_ms > 0 {
                    tokio::time::sleep(Duration::from_millis(b.delay_ms)).await;
                }
                let resp = hyper::Response::new(());
                if let Ok(mut out) = respond.send_response(resp, false) {
                    let _ = out.send_data(Bytes::from_static(b"hello h2\n"), true);
                }
            });
        }
        if b.goaway_after == Some(taken) {
            conn.graceful_shutdown();
        }
    }
}

/// An h2c server (prior knowledge), or with `tls` an HTTPS one whose ALPN offers `alpn`.
fn server(b: Behaviour, tls: Option<(&Pki, &[&[u8]])>) -> (u16, Counts) {
    let counts = Counts::default();
    let c = counts.clone();
    let acceptor = tls.map(|(pki, alpn)| {
        let mut config =
            rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(
                    vec![CertificateDer::from_pem_file(pki.dir.join("server.pem")).unwrap()],
                    PrivateKeyDer::from_pem_file(pki.dir.join("server.key")).unwrap(),
                )
                .unwrap();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        tokio_rustls::TlsAcceptor::from(Arc::new(config))
    });
    let (addr, _thread) = tokio_server(2, move |listener| async move {
        while let Ok((stream, peer)) = listener.accept().await {
            c.peers.lock().unwrap().insert(peer.ip());
            let _ = stream.set_nodelay(true);
            let (c, acceptor) = (c.clone(), acceptor.clone());
            tokio::spawn(async move {
                match acceptor {
                    None => serve_connection(stream, b, c).await,
                    Some(a) => {
                        if let Ok(tls) = a.accept(stream).await {
                            serve_connection(tls, b, c).await;
                        }
                    }
                }
            });
        }
    });
    (addr.port(), counts)
}

fn h2c(port: u16, streams: u64) -> Value {
    json!({"kind": "http", "url": format!("http://127.0.0.1:{port}/"), "http2": true, "streams": streams,
           "expect_body": "hello h2"})
}

fn spec_of(threads: usize, clients: u64, stop: Value, client: Value, pacer: Option<Value>) -> knee_engine::Spec {
    let mut g = group("main", clients, stop, client);
    if let Some(p) = pacer {
        g["pacer"] = p;
    }
    spec(json!({"threads": threads, "groups": [g]}))
}

/// started = succeeded + failed + hung + abandoned, and the server took exactly the started ones.
fn holds(r: &knee_engine::ShardResult, counts: &Counts) -> u64 {
    let o = &r.groups[0].counts.outcomes;
    let started = o.started();
    assert_eq!(started, o.succeeded + o.failed + o.hung + o.abandoned);
    assert_eq!(
        settled(|| counts.requests.load(Ordering::Relaxed), started),
        started,
        "{}",
        r.summary_json()
    );
    started
}

#[test]
fn clients_are_streams_over_shared_connections() {
    // One stream per connection: a connection per client.
    let (port, counts) = server(Behaviour::default(), None);
    let r = run(spec_of(2, 4, json!({"total": 200}), h2c(port, 1), None)).unwrap();
    assert_eq!(succeeded_failed_hung(&r.groups[0]), (200, 0, 0), "{}", r.summary_json());
    assert_eq!(holds(&r, &counts), 200);
    assert_eq!(
        (counts.connections.load(Ordering::Relaxed), r.groups[0].connect.len()),
        (4, 4)
    );

    // 100 streams per connection: 200 clients over 2 connections, one per thread; 150 over 2 as well.
    let (port, counts) = server(
        Behaviour {
            delay_ms: 2,
            ..Behaviour::default()
        },
        None,
    );
    let r = run(spec_of(2, 200, json!({"duration_ms": 500}), h2c(port, 100), None)).unwrap();
    let g = &r.groups[0];
    assert_eq!(
        (g.counts.outcomes.failed, g.counts.outcomes.hung),
        (0, 0),
        "{}",
        r.summary_json()
    );
    assert!(g.counts.outcomes.succeeded > 2000, "{}", r.summary_json());
    holds(&r, &counts);
    assert_eq!((counts.connections.load(Ordering::Relaxed), g.connect.len()), (2, 2));
    let r = run(spec_of(2, 150, json!({"total": 1500}), h2c(port, 100), None)).unwrap();
    assert_eq!(r.groups[0].connect.len(), 2);

    // Open loop over shared connections.
    let (port, counts) = server(Behaviour::default(), None);
    let pacer = json!({"kind": "rate", "rate_hz": 2000.0, "max_in_flight": 1000});
    let r = run(spec_of(2, 50, json!({"duration_ms": 500}), h2c(port, 25), Some(pacer))).unwrap();
    let g = &r.groups[0];
    assert!(g.counts.outcomes.succeeded >= 900, "{}", r.summary_json());
    assert_eq!(g.counts.outcomes.failed, 0);
    holds(&r, &counts);
    assert_eq!(g.connect.len(), 2);
}

#[test]
fn shared_connections_spread_over_the_source_addresses() {
    // 8 clients, 2 streams each: 4 connections, connection k from source k % 2, as the server sees it.
    let (port, counts) = server(Behaviour::default(), None);
    let mut client = h2c(port, 2);
    client["source_addrs"] = json!(["127.0.0.2", "127.0.0.3"]);
    let r = run(spec_of(2, 8, json!({"total": 400}), client, None)).unwrap();
    assert_eq!(succeeded_failed_hung(&r.groups[0]), (400, 0, 0), "{}", r.summary_json());
    assert_eq!(holds(&r, &counts), 400);
    assert_eq!(counts.connections.load(Ordering::Relaxed), 4);
    let peers: Vec<String> = counts.peers.lock().unwrap().iter().map(ToString::to_string).collect();
    assert_eq!(peers, ["127.0.0.2", "127.0.0.3"]);
}

#[test]
fn goaway_refused_and_reset_streams_keep_the_accounting() {
    // GOAWAY every 50 requests of a connection: the streams it did not process go again on a new
    // connection; nothing is lost, nothing counted twice.
    let (port, counts) = server(
        Behaviour {
            goaway_after: Some(50),
            ..Behaviour::default()
        },
        None,
    );
    let r = run(spec_of(2, 20, json!({"total": 2000}), h2c(port, 10), None)).unwrap();
    assert_eq!(
        succeeded_failed_hung(&r.groups[0]),
        (2000, 0, 0),
        "{}",
        r.summary_json()
    );
    assert_eq!(holds(&r, &counts), 2000);
    // About 2000 / 50 connections (a connection also answers the streams in flight at its GOAWAY).
    let conns = counts.connections.load(Ordering::Relaxed);
    assert!(
        conns >= 30 && conns == r.groups[0].connect.len(),
        "{conns} connections, knee opened {}",
        r.groups[0].connect.len()
    );

    // REFUSED_STREAM: never processed, sent again.
    let (port, counts) = server(
        Behaviour {
            refuse_every: Some(7),
            ..Behaviour::default()
        },
        None,
    );
    let r = run(spec_of(2, 20, json!({"total": 1000}), h2c(port, 10), None)).unwrap();
    assert_eq!(
        succeeded_failed_hung(&r.groups[0]),
        (1000, 0, 0),
        "{}",
        r.summary_json()
    );
    assert_eq!(holds(&r, &counts), 1000);

    // RST_STREAM INTERNAL_ERROR after taking the request: a failure of its own class, with its code.
    let (port, counts) = server(
        Behaviour {
            reset_every: Some(10),
            ..Behaviour::default()
        },
        None,
    );
    let r = run(spec_of(1, 10, json!({"total": 500}), h2c(port, 10), None)).unwrap();
    let g = &r.groups[0];
    assert_eq!(g.failures_of(ErrorClass::StreamReset), 50, "{}", r.summary_json());
    assert_eq!(g.counts.outcomes.succeeded, 450);
    assert_eq!(holds(&r, &counts), 500);
    assert_eq!(g.connect.len(), 1, "a reset ends the stream, not the connection");
    let s = summary(&r);
    assert_eq!(
        s["groups"][0]["reasons"][0]["key"],
        "RST_STREAM INTERNAL_ERROR from the server"
    );
}

#[test]
fn http2_over_tls_by_alpn() {
    let dir = temp_dir("h2-tls");
    let pki = Pki::new(&dir);
    let client = |port: u16| {
        json!({"kind": "http", "url": format!("https://127.0.0.1:{port}/"), "http2": true, "streams": 10,
               "tls": {"ca_pem": pki.read("root.pem"), "webpki_roots": false}})
    };
    let (port, counts) = server(Behaviour::default(), Some((&pki, &[b"h2"])));
    let r = run(spec_of(1, 20, json!({"total": 400}), client(port), None)).unwrap();
    let g = &r.groups[0];
    assert_eq!(succeeded_failed_hung(g), (400, 0, 0), "{}", r.summary_json());
    assert_eq!((g.connect.len(), g.tls.len()), (2, 2));
    holds(&r, &counts);

    // A server that speaks only HTTP/1.1 refuses the handshake with its alert; one without ALPN at all
    // (HTTP/1.1 by default) is told apart by knee.
    let (port, _) = server(Behaviour::default(), Some((&pki, &[b"http/1.1"])));
    let r = run(spec_of(1, 1, json!({"total": 2}), client(port), None)).unwrap();
    assert_eq!(r.groups[0].failures_of(ErrorClass::Tls), 2, "{}", r.summary_json());
    let key = summary(&r)["groups"][0]["reasons"][0]["key"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        key.ends_with("TLS alert from the server: no application protocol"),
        "{key}"
    );
    let (port, _) = server(Behaviour::default(), Some((&pki, &[])));
    let r = run(spec_of(1, 1, json!({"total": 2}), client(port), None)).unwrap();
    assert_eq!(r.groups[0].failures_of(ErrorClass::Protocol), 2, "{}", r.summary_json());
    let key = summary(&r)["groups"][0]["reasons"][0]["key"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        key,
        "HTTP/2 not agreed by ALPN: the server chose none; drop http2 for this service"
    );
    let _ = std::fs::remove_dir_all(dir);
}
