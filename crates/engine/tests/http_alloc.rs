//! The keep-alive HTTP hot path (HTTP/1.1 and HTTP/2) allocates nothing per request, succeeding or failing: a counting
//! global allocator sees no more allocations for 22 000 requests than for 2 000. Its own test
//! binary; its tests share one lock, so no other test allocates meanwhile.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use common::*;
use knee_engine::run;
use serde_json::json;

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made while running `total` requests of `client` with 4 clients on one thread, the fewest
/// of three runs (thread start-up and timers vary a little from run to run).
fn allocations_for(client: &serde_json::Value, total: u64, succeeded: bool) -> u64 {
    let mut spec = one_group(4, json!({"total": total}), client.clone());
    spec.threads = 1;
    (0..3)
        .map(|_| {
            let before = ALLOCATIONS.load(Ordering::Relaxed);
            let r = run(spec.clone()).unwrap();
            let used = ALLOCATIONS.load(Ordering::Relaxed) - before;
            let g = &r.groups[0];
            assert_eq!(
                if succeeded {
                    g.counts.outcomes.succeeded
                } else {
                    g.counts.outcomes.failed
                },
                total,
                "{}",
                r.summary_json()
            );
            used
        })
        .min()
        .unwrap()
}

/// 20 000 more requests must cost no more allocations than run-to-run noise (a per-request
/// allocation would add 20 000; one per thousand requests would add 20).
fn assert_no_allocation_per_request_of(client: serde_json::Value, succeeded: bool) {
    static SERIAL: Mutex<()> = Mutex::new(());
    let _one_at_a_time = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let small = allocations_for(&client, 2_000, succeeded);
    let large = allocations_for(&client, 22_000, succeeded);
    assert!(
        large <= small + 20,
        "{small} allocations for 2 000 requests, {large} for 22 000"
    );
}

fn assert_no_allocation_per_request(response: &[u8], succeeded: bool) {
    // The raw server allocates nothing per request either (one thread per connection).
    let server = TestServer::raw(response.to_vec(), After::KeepOpen, false);
    let client = json!({"kind": "http", "url": server.url(), "expect_status": [[200, 200]]});
    assert_no_allocation_per_request_of(client, succeeded);
}

/// An h2c server that allocates nothing per request (a thread per connection, buffers made once): it
/// answers every request (a HEADERS frame that ends its stream) with `:status 200` and "ok".
fn raw_h2c_server() -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { break };
            std::thread::spawn(move || serve_h2c(&mut s));
        }
    });
    addr
}

fn serve_h2c(s: &mut std::net::TcpStream) {
    use std::io::{Read, Write};
    let _ = s.set_nodelay(true);
    if h2_prefaces(s).is_err() {
        return;
    }
    let mut buf = vec![0u8; 1 << 16];
    let mut out = Vec::with_capacity(1 << 16);
    let (mut start, mut end) = (0, 0);
    loop {
        while let Some((ty, flags, id, len)) = h2_frame(&buf[start..end]) {
            h2_answer(ty, flags, id, &mut out);
            start += len;
        }
        if !out.is_empty() {
            if s.write_all(&out).is_err() {
                return;
            }
            out.clear();
        }
        if start == end {
            (start, end) = (0, 0);
        } else if end == buf.len() {
            buf.copy_within(start..end, 0);
            (start, end) = (0, end - start);
        }
        match s.read(&mut buf[end..]) {
            Ok(0) | Err(_) => return,
            Ok(n) => end += n,
        }
    }
}

/// HTTP/2 (knee's own client): a stream costs no allocation either, over shared connections, with either body check.
#[test]
fn http2_requests_do_not_allocate() {
    let addr = raw_h2c_server();
    let client = json!({"kind": "http", "url": format!("http://{addr}/"), "http2": true, "streams": 2,
                        "expect_status": [[200, 200]]});
    with_each_check(
        &client,
        &[json!({"expect_body": "ok"}), json!({"expect_body_regex": "^ok$"})],
    );
}

/// `client` with each of `checks` added, succeeding without an allocation per request.
fn with_each_check(client: &serde_json::Value, checks: &[serde_json::Value]) {
    for check in checks {
        let mut c = client.clone();
        let fields = c.as_object_mut().unwrap();
        fields.extend(check.as_object().unwrap().clone());
        assert_no_allocation_per_request_of(c, true);
    }
}

/// HTTP/1.1 with body checks: the substring searched as the body comes, the regex's read of it, and both.
#[test]
fn keep_alive_requests_with_body_checks_do_not_allocate() {
    let response = b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello knee\n".to_vec();
    let server = TestServer::raw(response, After::KeepOpen, false);
    let client = json!({"kind": "http", "url": server.url(), "expect_status": [[200, 200]]});
    let checks = [
        json!({"expect_body": "o kn"}),
        json!({"expect_body_regex": "^hello"}),
        json!({"expect_body": "knee", "expect_body_regex": "knee$"}),
    ];
    with_each_check(&client, &checks);
}

#[test]
fn keep_alive_requests_do_not_allocate() {
    assert_no_allocation_per_request(b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello knee\n", true);
}

/// A collapsing service: every request fails (a status outside expect_status, with a body that is
/// quoted in the reason). Once the failure's reason group exists, failing allocates nothing either.
#[test]
fn failing_requests_do_not_allocate() {
    assert_no_allocation_per_request(
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 27\r\n\r\npool full (600 of 600 busy)",
        false,
    );
}
