//! A request on a reused HTTP/1.1 connection that the server closed: when it is sent again, and when it
//! is not. The server counts what it read; knee's counts must be what it saw.

use crate::common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use knee_engine::{run, ErrorClass};
use serde_json::json;

/// A keep-alive server answering `200 ok`, which reads the request numbered `drop` (from 1, over the
/// whole run) and closes its connection without an answer, reads the one numbered `hang` and never answers it, and
/// closes any connection idle for `idle`.
struct Closing {
    addr: SocketAddr,
    requests: Arc<AtomicU64>,
    connections: Arc<AtomicU64>,
}

impl Closing {
    fn start(drop: u64, hang: u64, idle: Duration) -> Closing {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(AtomicU64::new(0));
        let connections = Arc::new(AtomicU64::new(0));
        let (req, conns) = (requests.clone(), connections.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut s) = stream else { continue };
                conns.fetch_add(1, Ordering::SeqCst);
                let req = req.clone();
                std::thread::spawn(move || {
                    s.set_read_timeout(Some(idle)).unwrap();
                    while read_request(&mut s) {
                        let n = req.fetch_add(1, Ordering::SeqCst) + 1;
                        if n == drop {
                            return;
                        }
                        if n == hang {
                            while read_request(&mut s) {} // until the client gives up on it
                            return;
                        }
                        let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n";
                        if s.write_all(ok).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        Closing {
            addr,
            requests,
            connections,
        }
    }

    fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }
}

/// Reads one request (its head, then Content-Length bytes of body); false when the connection ended or
/// stayed idle past the read timeout.
fn read_request(s: &mut TcpStream) -> bool {
    let mut buf = Vec::new();
    let mut b = [0u8; 4096];
    loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..i]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            if buf.len() >= i + 4 + len {
                return true;
            }
        }
        match s.read(&mut b) {
            Ok(0) | Err(_) => return false,
            Ok(n) => buf.extend_from_slice(&b[..n]),
        }
    }
}

fn client(url: &str, method: &str, think_ms: u64) -> knee_engine::Spec {
    let http = json!({"kind": "http", "url": url, "method": method, "body": "x"});
    let mut s = one_group(1, json!({"total": 3}), http);
    s.groups[0].think_ms = think_ms;
    s
}

/// The server read the second request and closed the connection without answering (a worker that
/// died on it): a POST is not sent again, it failed, and the server saw each operation once. A GET,
/// which a server may take twice, is sent again on a new connection.
#[test]
fn a_post_the_server_read_and_dropped_fails_once() {
    let server = Closing::start(2, 0, Duration::from_secs(30));
    let r = run(client(&server.url(), "POST", 0)).unwrap();
    let g = &r.groups[0];
    assert_eq!(succeeded_failed_hung(g), (2, 1, 0), "{}", r.summary_json());
    assert_eq!(g.failures_of(ErrorClass::Closed), 1, "{}", r.summary_json());
    assert_eq!(
        server.requests.load(Ordering::SeqCst),
        3,
        "the server saw each operation once"
    );
    assert_eq!(server.connections.load(Ordering::SeqCst), 2);

    assert_eq!(g.counts.resent, 0, "{}", r.summary_json());

    let server = Closing::start(2, 0, Duration::from_secs(30));
    let r = run(client(&server.url(), "GET", 0)).unwrap();
    let g = &r.groups[0];
    assert_eq!(succeeded_failed_hung(g), (3, 0, 0), "{}", r.summary_json());
    assert_eq!(
        server.requests.load(Ordering::SeqCst),
        4,
        "the second GET was sent again"
    );
    // counted: the server saw started + resent
    assert_eq!(g.counts.resent, 1, "{}", r.summary_json());
}

/// A GET sent again whose second sending the server then never answers (the next worker stalls on it too) is
/// hung, and still counted as sent again: the server read 3 requests for 2 started.
#[test]
fn a_get_sent_again_and_then_hung_is_counted_resent() {
    let server = Closing::start(2, 3, Duration::from_secs(30));
    let mut s = client(&server.url(), "GET", 0);
    s.groups[0].stop = knee_engine::StopRule::Total(2);
    s.groups[0].timeout_ms = 300;
    let r = run(s).unwrap();
    let g = &r.groups[0];
    assert_eq!(succeeded_failed_hung(g), (1, 0, 1), "{}", r.summary_json());
    assert_eq!(server.requests.load(Ordering::SeqCst), 3);
    assert_eq!(g.counts.resent, 1, "{}", r.summary_json());
}

/// The server closes a connection idle for 30 ms (its keep-alive timeout); the client thinks 150 ms
/// between requests. A POST does not go out on the closed connection (a peek finds it closed first):
/// every one succeeds, each on a connection of its own, and the server read each once. A GET is written, met by
/// the close and sent again: counted as `resent`, though this server never read the first (what a server saw lies
/// from `started` to `started + resent`).
#[test]
fn a_post_does_not_go_out_on_a_connection_closed_while_idle_and_a_get_is_resent() {
    for (method, resent) in [("POST", 0), ("GET", 2)] {
        let server = Closing::start(0, 0, Duration::from_millis(30));
        let r = run(client(&server.url(), method, 150)).unwrap();
        let g = &r.groups[0];
        assert_eq!(succeeded_failed_hung(g), (3, 0, 0), "{}", r.summary_json());
        assert_eq!(server.requests.load(Ordering::SeqCst), 3);
        assert_eq!(server.connections.load(Ordering::SeqCst), 3);
        assert_eq!(g.counts.resent, resent, "{method}: {}", r.summary_json());
    }
}

/// A keep-alive server that reads each request's head and answers `200 ok` after reading its body, but closes
/// the connection of request `drop` right after its head, its body unread (a server refusing an upload early),
/// having written `early` (nothing, or an answer such as a 413): the client's write of the rest fails. Counts the
/// heads it read.
fn head_then_close(drop: u64, early: &'static [u8]) -> (SocketAddr, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let heads = Arc::new(AtomicU64::new(0));
    let seen = heads.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let seen = seen.clone();
            std::thread::spawn(move || loop {
                let mut buf = Vec::new();
                let mut b = [0u8; 65536];
                let end = loop {
                    if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        break i + 4;
                    }
                    match s.read(&mut b) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&b[..n]),
                    }
                };
                if seen.fetch_add(1, Ordering::SeqCst) + 1 == drop {
                    let _ = s.write_all(early);
                    return; // closed with the body unread: a reset
                }
                let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                let len: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .map_or(0, |v| v.trim().parse().unwrap());
                let mut left = (end + len).saturating_sub(buf.len());
                while left > 0 {
                    match s.read(&mut b[..left.min(65536)]) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => left -= n,
                    }
                }
                if s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
                    .is_err()
                {
                    return;
                }
            });
        }
    });
    (addr, heads)
}

/// A POST whose body the server stopped reading (it closed after the head) fails where it is, partly written: it
/// was "unsent" and went out again on a new connection, and the server read it twice for one operation.
#[test]
fn a_post_partly_written_when_the_server_closed_is_not_sent_again() {
    let (addr, heads) = head_then_close(2, b"");
    let body = "x".repeat(16 << 20); // more than the sockets' buffers hold: the write is cut off
    let http = json!({"kind": "http", "url": format!("http://{addr}/"), "method": "POST", "body": body});
    let r = run(one_group(1, json!({"total": 3}), http)).unwrap();
    let g = &r.groups[0];
    assert_eq!(succeeded_failed_hung(g), (2, 1, 0), "{}", r.summary_json());
    assert_eq!(heads.load(Ordering::SeqCst), 3, "the server read each operation once");
}

/// A server that answers an upload it refuses before reading its body (413, then it closes): the operation failed
/// with that status, as curl says, not with the write's reset; it is not sent again, and the next operation
/// opens a new connection. An answer whose body is then cut off fails `closed`. Either way the bytes sent are the
/// second request whole and the first as far as it went (an answer whose body was cut counted it whole).
#[test]
fn an_answer_before_the_body_was_read_is_the_operations() {
    let answers: [(&'static [u8], ErrorClass); 2] = [
        (
            b"HTTP/1.1 413 Payload Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            ErrorClass::Status,
        ),
        (
            b"HTTP/1.1 413 Payload Too Large\r\nContent-Length: 10\r\n\r\nab",
            ErrorClass::Closed,
        ),
    ];
    for (early, class) in answers {
        let (addr, heads) = head_then_close(1, early);
        let body = "x".repeat(16 << 20); // more than the sockets' buffers hold: the write is cut off
        let http = json!({"kind": "http", "url": format!("http://{addr}/"), "method": "POST", "body": body});
        let r = run(one_group(1, json!({"total": 2}), http)).unwrap();
        let g = &r.groups[0];
        assert_eq!(succeeded_failed_hung(g), (1, 1, 0), "{}", r.summary_json());
        assert_eq!(g.failures_of(class), 1, "{}", r.summary_json());
        if class == ErrorClass::Status {
            assert_eq!(
                g.reasons.list[0].key, "HTTP/1.1 413 Payload Too Large",
                "{:?}",
                g.reasons
            );
        }
        assert_eq!(heads.load(Ordering::SeqCst), 2, "the server read each operation once");
        let whole = body.len() as u64;
        assert!(
            (whole..2 * whole).contains(&g.counts.bytes_sent),
            "{}",
            r.summary_json()
        );
    }
}
