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
    /// Never answer every n-th stream (its request taken, and counted).
    hang_every: Option<u64>,
    /// SETTINGS_MAX_CONCURRENT_STREAMS (None: 250).
    max_streams: Option<u32>,
    /// The response body's length (0: "hello h2\n").
    body_len: usize,
    /// An `x-filler` response header this long (above 16 KiB it comes in CONTINUATION frames).
    header_len: usize,
}

#[derive(Clone, Default)]
struct Counts {
    requests: Arc<AtomicU64>,
    /// Streams refused (REFUSED_STREAM: not counted in `requests`).
    refused: Arc<AtomicU64>,
    /// TCP connections accepted (whatever came of them).
    accepted: Arc<AtomicU64>,
    /// Connections whose HTTP/2 handshake completed.
    connections: Arc<AtomicU64>,
    /// The addresses connections came from.
    peers: Arc<Mutex<BTreeSet<IpAddr>>>,
    /// Request body bytes read.
    body_bytes: Arc<AtomicU64>,
    /// The requests' `:authority` and `host` fields.
    authorities: Arc<Mutex<BTreeSet<String>>>,
    /// Each connection's streams as the wire and h2 showed them to the server (`Wire`).
    wires: Arc<Mutex<Vec<Arc<Mutex<Wire>>>>>,
}

impl Counts {
    /// The requests the server saw: those it took, and those h2 dropped before `accept` returned them.
    fn seen(&self) -> u64 {
        let wires = self.wires.lock().unwrap();
        let dropped: usize = wires.iter().map(|w| w.lock().unwrap().dropped()).sum();
        self.requests.load(Ordering::Relaxed) + dropped as u64
    }
}

async fn serve_connection<S: AsyncRead + AsyncWrite + Unpin>(io: S, b: Behaviour, c: Counts) {
    let wire = Arc::new(Mutex::new(Wire::default()));
    c.wires.lock().unwrap().push(wire.clone());
    let Ok(mut conn) = h2::server::Builder::new()
        .max_concurrent_streams(b.max_streams.unwrap_or(250))
        .handshake::<_, Bytes>(Tap::new(io, wire.clone()))
        .await
    else {
        return;
    };
    c.connections.fetch_add(1, Ordering::Relaxed);
    let mut seen = 0u64;
    let mut taken = 0u64;
    while let Some(next) = conn.accept().await {
        let Ok((req, mut respond)) = next else { break };
        wire.lock().unwrap().accepted.insert(respond.stream_id().as_u32());
        let host = req.headers().get("host").map(|h| h.to_str().unwrap_or("?").to_string());
        let authority = req.uri().authority().map(ToString::to_string);
        c.authorities.lock().unwrap().insert(format!("{authority:?} {host:?}"));
        seen += 1;
        if b.refuse_every.is_some_and(|n| seen.is_multiple_of(n)) {
            c.refused.fetch_add(1, Ordering::Relaxed);
            respond.send_reset(h2::Reason::REFUSED_STREAM);
            continue;
        }
        c.requests.fetch_add(1, Ordering::Relaxed);
        taken += 1;
        if b.reset_every.is_some_and(|n| taken.is_multiple_of(n)) {
            respond.send_reset(h2::Reason::INTERNAL_ERROR);
        } else {
            let hang = b.hang_every.is_some_and(|n| taken.is_multiple_of(n));
            let body_bytes = c.body_bytes.clone();
            tokio::spawn(async move {
                let mut body = req.into_body();
                while let Some(Ok(chunk)) = body.data().await {
                    body_bytes.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                    let _ = body.flow_control().release_capacity(chunk.len());
                }
                if hang {
                    tokio::time::sleep(Duration::from_secs(30)).await;
                    return;
                }
                if b.delay_ms > 0 {
                    tokio::time::sleep(Duration::from_millis(b.delay_ms)).await;
                }
                let mut resp = hyper::Response::new(());
                if b.header_len > 0 {
                    let filler = "f".repeat(b.header_len);
                    resp.headers_mut().insert("x-filler", filler.parse().unwrap());
                }
                let data = if b.body_len == 0 {
                    Bytes::from_static(b"hello h2\n")
                } else {
                    Bytes::from(vec![b'x'; b.body_len])
                };
                if let Ok(mut out) = respond.send_response(resp, false) {
                    let _ = out.send_data(data, true);
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
        let mut config = pki.server_config();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        tokio_rustls::TlsAcceptor::from(Arc::new(config))
    });
    let (addr, _thread) = tokio_server(2, move |listener| async move {
        while let Ok((stream, peer)) = listener.accept().await {
            c.accepted.fetch_add(1, Ordering::Relaxed);
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

/// An h2c server behaving as the default but for what `edit` sets.
fn h2c_server(edit: impl FnOnce(&mut Behaviour)) -> (u16, Counts) {
    let mut b = Behaviour::default();
    edit(&mut b);
    server(b, None)
}

/// Every one of the run's `total` operations succeeded, each a request the server answered.
fn all_succeeded(r: &knee_engine::ShardResult, counts: &Counts, total: u64) {
    assert_eq!(
        succeeded_failed_hung(&r.groups[0]),
        (total, 0, 0),
        "{}",
        r.summary_json()
    );
    assert_eq!(holds(r, counts), total);
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

/// The server's own count of connections, (accepted, handshaken), once it has accepted `want` (a connection
/// knee closed at once may be accepted a moment after the run).
fn server_connections(counts: &Counts, want: u64) -> (u64, u64) {
    let accepted = settled(|| counts.accepted.load(Ordering::Relaxed), want);
    (accepted, counts.connections.load(Ordering::Relaxed))
}

/// started = succeeded + failed + hung + abandoned, and the server took exactly the started ones.
fn holds(r: &knee_engine::ShardResult, counts: &Counts) -> u64 {
    let o = &r.groups[0].counts.outcomes;
    let started = o.started();
    assert_eq!(started, o.succeeded + o.failed + o.hung + o.abandoned);
    assert_eq!(settled(|| counts.seen(), started), started, "{}", r.summary_json());
    started
}

#[test]
fn clients_are_streams_over_shared_connections() {
    // One stream per connection: a connection per client.
    let (port, counts) = server(Behaviour::default(), None);
    let r = run(spec_of(2, 4, json!({"total": 200}), h2c(port, 1), None)).unwrap();
    let authorities: Vec<String> = counts.authorities.lock().unwrap().iter().cloned().collect();
    assert_eq!(authorities, [format!("Some(\"127.0.0.1:{port}\") None")]);
    all_succeeded(&r, &counts, 200);
    assert_eq!((server_connections(&counts, 4), r.groups[0].connect.len()), ((4, 4), 4));

    // 100 streams per connection: 200 clients over 2 connections, one per thread; 150 over 2 as well.
    let (port, counts) = h2c_server(|b| b.delay_ms = 2);
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
    assert_eq!((server_connections(&counts, 2), g.connect.len()), ((2, 2), 2));
    let r = run(spec_of(2, 150, json!({"total": 1500}), h2c(port, 100), None)).unwrap();
    assert_eq!((server_connections(&counts, 4), r.groups[0].connect.len()), ((4, 4), 2));

    // Open loop over shared connections.
    let (port, counts) = server(Behaviour::default(), None);
    let pacer = json!({"kind": "rate", "rate_hz": 2000.0, "max_in_flight": 1000});
    let r = run(spec_of(2, 50, json!({"duration_ms": 500}), h2c(port, 25), Some(pacer))).unwrap();
    let g = &r.groups[0];
    assert!(g.counts.outcomes.succeeded >= 900, "{}", r.summary_json());
    assert_eq!(g.counts.outcomes.failed, 0);
    holds(&r, &counts);
    assert_eq!((server_connections(&counts, 2), g.connect.len()), ((2, 2), 2));

    // A number of connections instead: 30 clients on 3, and 2 clients on 2 (no more than one a client). Every
    // client makes operations of its own (a total could all go to the first client, whose connection is then the one
    // opened: seen once in a CI run).
    let (port, counts) = server(Behaviour::default(), None);
    let mut client = h2c(port, 1);
    client["connections"] = json!(3);
    let r = run(spec_of(2, 30, json!({"per_client": 20}), client.clone(), None)).unwrap();
    all_succeeded(&r, &counts, 600);
    assert_eq!((server_connections(&counts, 3), r.groups[0].connect.len()), ((3, 3), 3));
    let r = run(spec_of(2, 2, json!({"per_client": 10}), client, None)).unwrap();
    assert_eq!((server_connections(&counts, 5), r.groups[0].connect.len()), ((5, 5), 2));
}

#[test]
fn shared_connections_spread_over_the_source_addresses() {
    // 8 clients, 2 streams each: 4 connections, connection k from source k % 2, as the server sees it.
    let (port, counts) = server(Behaviour::default(), None);
    let mut client = h2c(port, 2);
    client["source_addrs"] = json!(["127.0.0.2", "127.0.0.3"]);
    // A Host header is the request's :authority (RFC 9113 §8.3.1), not a field of its own.
    client["headers"] = json!([["Host", "knee.example"], ["x-run", "1"]]);
    let r = run(spec_of(2, 8, json!({"total": 400}), client, None)).unwrap();
    all_succeeded(&r, &counts, 400);
    assert_eq!((server_connections(&counts, 4), r.groups[0].connect.len()), ((4, 4), 4));
    let peers: Vec<String> = counts.peers.lock().unwrap().iter().map(ToString::to_string).collect();
    assert_eq!(peers, ["127.0.0.2", "127.0.0.3"]);
    let authorities: Vec<String> = counts.authorities.lock().unwrap().iter().cloned().collect();
    assert_eq!(authorities, ["Some(\"knee.example\") None"]);
}

#[test]
fn goaway_refused_and_reset_streams_keep_the_accounting() {
    // GOAWAY every 50 requests of a connection: the streams it did not process go again on a new
    // connection; nothing is lost, nothing counted twice.
    let (port, counts) = h2c_server(|b| b.goaway_after = Some(50));
    let r = run(spec_of(2, 20, json!({"total": 2000}), h2c(port, 10), None)).unwrap();
    all_succeeded(&r, &counts, 2000);
    // About 2000 / 50 connections (a connection also answers the streams in flight at its GOAWAY).
    let opened = r.groups[0].connect.len();
    let (accepted, conns) = server_connections(&counts, opened);
    assert!(
        conns >= 30 && accepted == conns && conns == opened,
        "{accepted} connections accepted, {conns} handshaken, knee opened {opened}"
    );

    // REFUSED_STREAM: never processed, sent again, at most MAX_REFUSED (3) times more. Every 7th stream of a
    // connection refused: now and then a stream sent again is a 7th again, and rarely a fourth time (once in
    // about 60 runs here), which fails its operation; whatever their number, the server took exactly the
    // operations that succeeded.
    let (port, counts) = h2c_server(|b| b.refuse_every = Some(7));
    let r = run(spec_of(2, 20, json!({"total": 1000}), h2c(port, 10), None)).unwrap();
    let (g, refused_4) = (
        &r.groups[0],
        "RST_STREAM REFUSED_STREAM from the server (not processed by the server: sent <n> times)",
    );
    let o = &g.counts.outcomes;
    assert_eq!(
        (o.succeeded + o.failed, o.hung, o.abandoned),
        (1000, 0, 0),
        "{}",
        r.summary_json()
    );
    assert!(o.succeeded >= 990, "{}", r.summary_json());
    assert_eq!(g.failures_of(ErrorClass::StreamReset), o.failed);
    assert!(o.failed == 0 || first_reason(&r) == refused_4, "{}", r.summary_json());
    assert_eq!(
        settled(|| counts.requests.load(Ordering::Relaxed), o.succeeded),
        o.succeeded
    );
    // Every stream refused: each operation is sent four times, then fails; the server took none.
    let (port, counts) = h2c_server(|b| b.refuse_every = Some(1));
    let r = run(spec_of(1, 5, json!({"total": 20}), h2c(port, 5), None)).unwrap();
    assert_eq!(
        r.groups[0].failures_of(ErrorClass::StreamReset),
        20,
        "{}",
        r.summary_json()
    );
    assert_eq!(first_reason(&r), refused_4);
    assert!(
        r.groups[0].error_samples(ErrorClass::StreamReset)[0].ends_with("(not processed by the server: sent 4 times)")
    );
    assert_eq!(settled(|| counts.refused.load(Ordering::Relaxed), 80), 80);
    assert_eq!(counts.requests.load(Ordering::Relaxed), 0);

    // RST_STREAM INTERNAL_ERROR after taking the request: a failure of its own class, with its code.
    let (port, counts) = h2c_server(|b| b.reset_every = Some(10));
    let r = run(spec_of(1, 10, json!({"total": 500}), h2c(port, 10), None)).unwrap();
    let g = &r.groups[0];
    assert_eq!(g.failures_of(ErrorClass::StreamReset), 50, "{}", r.summary_json());
    assert_eq!(g.counts.outcomes.succeeded, 450);
    assert_eq!(holds(&r, &counts), 500);
    assert_eq!(
        (server_connections(&counts, 1), g.connect.len()),
        ((1, 1), 1),
        "a reset ends the stream, not the connection"
    );
    assert_eq!(first_reason(&r), "RST_STREAM INTERNAL_ERROR from the server");
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
    assert_eq!(server_connections(&counts, 2), (2, 2));
    holds(&r, &counts);

    // A server that speaks only HTTP/1.1 refuses the handshake with its alert; one without ALPN at all
    // (HTTP/1.1 by default) is told apart by knee.
    let (port, _) = server(Behaviour::default(), Some((&pki, &[b"http/1.1"])));
    let r = run(spec_of(1, 1, json!({"total": 2}), client(port), None)).unwrap();
    assert_eq!(r.groups[0].failures_of(ErrorClass::Tls), 2, "{}", r.summary_json());
    let key = first_reason(&r);
    assert!(
        key.ends_with("TLS alert from the server: no application protocol"),
        "{key}"
    );
    let (port, _) = server(Behaviour::default(), Some((&pki, &[])));
    let r = run(spec_of(1, 1, json!({"total": 2}), client(port), None)).unwrap();
    assert_eq!(r.groups[0].failures_of(ErrorClass::Protocol), 2, "{}", r.summary_json());
    let key = first_reason(&r);
    assert_eq!(
        key,
        "HTTP/2 not agreed by ALPN: the server chose none; drop http2 for this service"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_goaway_with_an_error_fails_the_streams_it_took_with_its_code() {
    // A server that answers two requests a connection, and on the third sends GOAWAY ENHANCE_YOUR_CALM
    // naming that stream as the last it took, then closes: the stream fails in the GOAWAY class with the
    // code's name (the server had it, so it is not sent again), and the next operation opens a new connection.
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let requests = Arc::new(AtomicU64::new(0));
    let accepted = Arc::new(AtomicU64::new(0));
    let (seen, taken) = (requests.clone(), accepted.clone());
    std::thread::spawn(move || {
        for s in listener.incoming() {
            taken.fetch_add(1, Ordering::Relaxed);
            let (Ok(mut s), seen) = (s, seen.clone()) else { break };
            std::thread::spawn(move || -> std::io::Result<()> {
                h2_prefaces(&mut s)?;
                let (mut buf, mut chunk, mut out, mut taken) = (Vec::new(), [0u8; 4096], Vec::new(), 0);
                loop {
                    let n = s.read(&mut chunk)?;
                    if n == 0 {
                        return Ok(());
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    while let Some((ty, flags, id, len)) = h2_frame(&buf) {
                        buf.drain(..len);
                        if ty == 0x1 {
                            seen.fetch_add(1, Ordering::Relaxed);
                            taken += 1;
                            if taken == 3 {
                                // GOAWAY: last stream id, then ENHANCE_YOUR_CALM (0xb).
                                s.write_all(&[0, 0, 8, 7, 0, 0, 0, 0, 0])?;
                                s.write_all(&id)?;
                                s.write_all(&[0, 0, 0, 0xb])?;
                                s.shutdown(std::net::Shutdown::Write)?;
                                while s.read(&mut chunk)? > 0 {}
                                return Ok(());
                            }
                        }
                        h2_answer(ty, flags, id, &mut out);
                        s.write_all(&out)?;
                        out.clear();
                    }
                }
            });
        }
    });
    let mut client = h2c(port, 1);
    client["expect_body"] = json!("ok");
    let r = run(spec_of(1, 1, json!({"total": 6}), client, None)).unwrap();
    let g = &r.groups[0];
    assert_eq!(succeeded_failed_hung(g), (4, 2, 0), "{}", r.summary_json());
    assert_eq!(g.failures_of(ErrorClass::GoAway), 2, "{}", r.summary_json());
    assert_eq!(first_reason(&r), "GOAWAY ENHANCE_YOUR_CALM from the server");
    assert_eq!(
        settled(|| requests.load(Ordering::Relaxed), 6),
        6,
        "the server took each once"
    );
    assert_eq!(
        (settled(|| accepted.load(Ordering::Relaxed), 2), g.connect.len()),
        (2, 2),
        "a connection for every three requests, as the server accepted them"
    );
}

#[test]
fn streams_waiting_for_a_connection_that_cannot_open_fail_with_it() {
    // A listener whose accept queue is full drops the SYNs: each connection's dial ends at the connect
    // timeout, and the streams that waited for it fail with it then, rather than each dialing in turn
    // (the tenth would wait ten limits, past the operation's timeout).
    let (l, _queued) = full_listener();
    let mut client = h2c(l.local_addr().unwrap().port(), 10);
    client["connect_timeout_ms"] = json!(150);
    let mut s = spec_of(1, 10, json!({"total": 30}), client, None);
    s.groups[0].timeout_ms = 1000;
    let r = run_within(s, Duration::from_secs(10));
    let g = &r.groups[0];
    assert_eq!(succeeded_failed_hung(g), (0, 30, 0), "{}", r.summary_json());
    assert_eq!(g.failures_of(ErrorClass::ConnectTimeout), 30);
    assert_eq!(
        first_reason(&r),
        "connect to <addr>: no connection within <n> ms (connect_timeout)"
    );
}

#[test]
fn bodies_larger_than_the_windows_go_both_ways() {
    // A 300 KB request body (the server's windows are 64 KiB, given back as it reads) and a 20 MiB response
    // (above knee's 16 MiB stream window: knee gives the credit back as it reads).
    let (port, counts) = h2c_server(|b| b.body_len = 20 << 20);
    let mut client = h2c(port, 1);
    client["expect_body"] = Value::Null;
    client["method"] = json!("POST");
    client["body"] = json!("b".repeat(300_000));
    let r = run(spec_of(1, 2, json!({"total": 4}), client, None)).unwrap();
    let g = &r.groups[0];
    all_succeeded(&r, &counts, 4);
    assert_eq!(g.counts.payload_bytes, 4 * (20 << 20));
    assert_eq!(counts.body_bytes.load(Ordering::Relaxed), 4 * 300_000);
}

/// A fixed body's `$${` is a literal `${` over HTTP/2 as over HTTP/1.1: `{"t":"${x}"}`, 12 bytes (it went out as
/// written, 13).
#[test]
fn a_fixed_body_s_escape_is_written_as_http1_writes_it() {
    let (port, counts) = h2c_server(|_| {});
    let mut client = h2c(port, 1);
    client["method"] = json!("POST");
    client["body"] = json!("{\"t\":\"$${x}\"}");
    let r = run(spec_of(1, 1, json!({"total": 3}), client, None)).unwrap();
    all_succeeded(&r, &counts, 3);
    assert_eq!(counts.body_bytes.load(Ordering::Relaxed), 3 * 12);
}

#[test]
fn the_server_s_stream_limit_makes_streams_wait_not_fail() {
    // 30 clients on one connection, the server takes 3 streams at a time: the others wait for a stream to
    // close; none is refused, none fails.
    let (port, counts) = h2c_server(|b| {
        b.max_streams = Some(3);
        b.delay_ms = 1;
    });
    let r = run(spec_of(1, 30, json!({"total": 600}), h2c(port, 30), None)).unwrap();
    let g = &r.groups[0];
    all_succeeded(&r, &counts, 600);
    assert_eq!((g.connect.len(), server_connections(&counts, 1)), (1, (1, 1)));
}

#[test]
fn large_response_headers_come_in_continuation_frames() {
    let (port, counts) = h2c_server(|b| b.header_len = 40_000);
    // The request's header block too (a 40 KB header: HEADERS and CONTINUATION frames of 16 KiB).
    let mut client = h2c(port, 2);
    client["headers"] = json!([["x-filler", "g".repeat(40_000)]]);
    let r = run(spec_of(1, 4, json!({"total": 40}), client, None)).unwrap();
    all_succeeded(&r, &counts, 40);
}

#[test]
fn a_server_that_stops_reading_hangs_the_streams_not_knee() {
    // The server takes the connection and never reads: knee's writes block (20 streams with 200 KB header
    // blocks, more than the socket buffers hold), every operation hangs at its timeout with its reset queued
    // behind the blocked write, and the run ends on time.
    let (addr, _thread) = tokio_server(1, |listener| async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    let mut client = h2c(addr.port(), 20);
    client["headers"] = json!([["x-filler", "f".repeat(200_000)]]);
    let mut s = spec_of(1, 20, json!({"duration_ms": 1000}), client, None);
    s.groups[0].timeout_ms = 300;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(run(s));
    });
    let r = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the run ends although its connection's writes block")
        .unwrap();
    let o = &r.groups[0].counts.outcomes;
    assert_eq!(o.succeeded + o.failed, 0, "{}", r.summary_json());
    assert!(o.hung >= 40, "{}", r.summary_json());
}

#[test]
fn a_hung_stream_is_reset_and_its_connection_carries_on() {
    // Every 10th request is never answered: it hangs (300 ms timeout), knee resets that stream (CANCEL),
    // and the connection goes on carrying the others.
    let (port, counts) = h2c_server(|b| b.hang_every = Some(10));
    let mut s = spec_of(1, 5, json!({"total": 200}), h2c(port, 5), None);
    s.groups[0].timeout_ms = 300;
    let r = run(s).unwrap();
    let g = &r.groups[0];
    assert_eq!(succeeded_failed_hung(g), (180, 0, 20), "{}", r.summary_json());
    assert_eq!(holds(&r, &counts), 200);
    assert_eq!((g.connect.len(), server_connections(&counts, 1)), (1, (1, 1)));
}

#[test]
fn h2c_to_a_server_that_speaks_only_http1_is_one_sentence() {
    let reason = |reply: &'static [u8]| {
        let (addr, _thread) = tokio_server(1, move |listener| async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            while let Ok((mut stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 1024];
                    let _ = stream.read(&mut buf).await;
                    let _ = stream.write_all(reply).await;
                });
            }
        });
        let r = run(spec_of(1, 1, json!({"total": 2}), h2c(addr.port(), 1), None)).unwrap();
        assert_eq!(r.groups[0].failures_of(ErrorClass::Protocol), 2, "{}", r.summary_json());
        first_reason(&r)
    };
    assert_eq!(
        reason(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"),
        "HTTP/2: the server answered in HTTP/1.x: it does not speak HTTP/2 with prior knowledge (h2c) here"
    );
    assert_eq!(
        reason(b"<html><body>not here</body></html>\n"),
        "HTTP/2: the server answered with text, not HTTP/2 frames (\"<html><body>not here</body></html>\"): is it \
         an HTTP/2 server?"
    );
}

#[test]
fn knee_closes_its_connections_without_resetting_them() {
    // A server that answers, and when knee's GOAWAY comes sends more (PINGs), and more 50 ms later: knee reads
    // until the server closes, so the server can still send and then finds knee's orderly end. A connection
    // dropped with unread bytes is reset, and a reset drops what the server had not read yet: the last
    // requests, which knee counted as sent.
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || -> std::io::Result<usize> {
        let (mut s, _) = listener.accept()?;
        h2_prefaces(&mut s)?;
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        let mut out = Vec::new();
        loop {
            let n = s.read(&mut chunk)?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            buf.extend_from_slice(&chunk[..n]);
            while let Some((ty, flags, id, len)) = h2_frame(&buf) {
                buf.drain(..len);
                h2_answer(ty, flags, id, &mut out); // knee's GET: a HEADERS frame that ends its stream
                s.write_all(&out)?;
                out.clear();
                if ty == 0x7 {
                    for _ in 0..200 {
                        s.write_all(&[0, 0, 8, 6, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8])?;
                    }
                    // 50 ms later knee still takes what comes (a reset connection refuses it), and its end
                    // is an orderly one.
                    std::thread::sleep(Duration::from_millis(50));
                    s.write_all(&[0, 0, 8, 6, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8])?;
                    return s.read(&mut chunk);
                }
            }
        }
    });
    let mut client = h2c(port, 1);
    client["expect_body"] = json!("ok");
    let r = run(spec_of(1, 1, json!({"total": 3}), client, None)).unwrap();
    assert_eq!(succeeded_failed_hung(&r.groups[0]), (3, 0, 0), "{}", r.summary_json());
    let end = server.join().unwrap();
    assert!(matches!(end, Ok(0)), "the server saw {end:?}, not knee's orderly end");
}

#[test]
fn a_background_group_on_one_shared_connection_cuts_into_windows() {
    // Four clients share one connection, so they run on one of the two threads and the other has none: a cut
    // waited for that thread's answer, which never came ("a runtime thread did not answer the cut within 10 s").
    let (port, counts) = h2c_server(|b| b.delay_ms = 2);
    let engine = knee_engine::Engine::start(spec_of(2, 4, json!({"while_others": true}), h2c(port, 4), None)).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let first = engine.cut().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let second = engine.cut().unwrap();
    engine.stop();
    assert!(engine.wait(Some(Duration::from_secs(3))));
    assert!(
        second.groups[0].counts.outcomes.succeeded > 0,
        "{}",
        second.summary_json()
    );
    let mut whole = first;
    whole.merge(&second).unwrap();
    whole.merge(&engine.result().unwrap()).unwrap();
    holds(&whole, &counts);
    assert_eq!(server_connections(&counts, 1), (1, 1));
}
