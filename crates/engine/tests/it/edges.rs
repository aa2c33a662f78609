//! Responses and failures at the edges of HTTP/1.1 a reviewer found misjudged: a head of more than 100 headers, a
//! close-delimited body over TLS without close_notify, a connection closed during the TLS handshake, and a request
//! that could not be made (nothing sent) on a kept-alive connection.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;

use common::pki::Pki;
use common::*;
use knee_engine::{run, ErrorClass};
use serde_json::json;

/// 150 header lines (many Set-Cookie, tracing headers): a valid response curl takes; it failed `protocol`
/// ("too many headers").
#[test]
fn a_head_of_many_headers_is_read() {
    let mut resp = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n".to_vec();
    for i in 0..150 {
        resp.extend_from_slice(format!("Set-Cookie: c{i}=v{i}\r\n").as_bytes());
    }
    resp.extend_from_slice(b"\r\nok");
    let server = TestServer::raw(resp, After::KeepOpen, false);
    let mut client = http(&server.url());
    client["expect_body"] = json!("ok");
    // each client its own 20: from a shared total of 40, one client took all of them when the other's thread started
    // late (a loaded machine), and the server saw 1 connection (http.rs's run_with does the same)
    let r = run(one_group(2, json!({"per_client": 20}), client)).unwrap();
    assert_eq!(succeeded_failed_hung(&r.groups[0]), (40, 0, 0), "{}", r.summary_json());
    assert_eq!(server.connections(), 2, "the connections were kept");
}

/// A data row that makes the URL one no request can carry fails as `request` before anything is sent: the
/// connection is as good as before, and was closed (a reconnect on the next operation, its connect time added to
/// an unrelated operation's, a TIME_WAIT more).
#[test]
fn a_request_that_could_not_be_made_keeps_the_connection() {
    let server = TestServer::raw(
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec(),
        After::KeepOpen,
        false,
    );
    let c = json!({"kind": "http", "url": format!("{}p/${{u.p}}", server.url())});
    let s = spec(json!({
        "threads": 1,
        "data": [{"name": "u", "text": "p\nfine\nnot fine\n", "format": "csv", "order": "circular"}],
        "groups": [group("main", 1, json!({"total": 10}), c)],
    }));
    let r = run(s).unwrap();
    let g = &r.groups[0];
    assert_eq!(succeeded_failed_hung(g), (5, 5, 0), "{}", r.summary_json());
    assert_eq!(g.failures_of(ErrorClass::Request), 5, "{}", r.summary_json());
    assert_eq!(
        (server.requests(), server.connections()),
        (5, 1),
        "{}",
        r.summary_json()
    );
}

/// An HTTPS server whose responses end with the connection, which it closes without a TLS close_notify (rustls
/// says many peers do): every response failed `closed` ("peer closed connection without sending TLS
/// close_notify") though its whole body had arrived; curl takes it, as knee takes it over plain TCP.
#[test]
fn a_close_delimited_body_over_tls_without_close_notify_is_whole() {
    let dir = temp_dir("tls-eof");
    let config = Arc::new(Pki::new(&dir).server_config());
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut tcp) = stream else { continue };
            let config = config.clone();
            std::thread::spawn(move || {
                let mut conn = rustls::ServerConnection::new(config).unwrap();
                let mut tls = rustls::Stream::new(&mut conn, &mut tcp);
                let mut got = Vec::new();
                let mut buf = [0u8; 4096];
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tls.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = tls.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nthe whole body");
                let _ = tls.flush();
                let _ = tcp.shutdown(std::net::Shutdown::Both); // no close_notify
            });
        }
    });
    let client = json!({"kind": "http", "url": format!("https://127.0.0.1:{port}/"), "insecure": true,
                        "expect_body": "the whole body"});
    let r = run(one_group(2, json!({"total": 10}), client)).unwrap();
    assert_eq!(succeeded_failed_hung(&r.groups[0]), (10, 0, 0), "{}", r.summary_json());
    let _ = std::fs::remove_dir_all(dir);
}

/// A connection the service closes during the TLS handshake (an overloaded service's accept queue, a connection
/// cap) is `closed`, as it is over http: it was `tls`, which points at certificates.
#[test]
fn a_connection_closed_during_the_handshake_is_closed_not_tls() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut tcp) = stream else { continue };
            let mut hello = [0u8; 512];
            let _ = tcp.read(&mut hello); // the ClientHello, then the connection ends
        }
    });
    let client = json!({"kind": "http", "url": format!("https://127.0.0.1:{port}/"), "insecure": true});
    let r = run(one_group(1, json!({"total": 3}), client)).unwrap();
    let g = &r.groups[0];
    assert_eq!(g.failures_of(ErrorClass::Closed), 3, "{}", r.summary_json());
    assert_eq!(g.failures_of(ErrorClass::Tls), 0, "{}", r.summary_json());
}

/// A response whose body the server cuts off (it closes after 10 of its 100 bytes): the operation fails `closed`,
/// and what it moved counts as for any operation that got a head: its time to first byte and the bytes sent and
/// read. Both were dropped (ttfb kept to the successes, bytes undercounted exactly at the failing levels).
#[test]
fn a_body_cut_off_counts_its_head_and_bytes() {
    let resp = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789".to_vec();
    let wire = resp.len() as u64;
    let server = TestServer::raw(resp, After::Close, false);
    let r = run(one_group(1, json!({"total": 4}), http(&server.url()))).unwrap();
    let g = &r.groups[0];
    assert_eq!(g.failures_of(ErrorClass::Closed), 4, "{}", r.summary_json());
    assert_eq!(g.ttfb.len(), 4, "{}", r.summary_json());
    assert_eq!(g.counts.bytes_received, 4 * wire, "{}", r.summary_json());
    assert!(g.counts.bytes_sent > 0, "{}", r.summary_json());
}
