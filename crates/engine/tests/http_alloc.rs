//! The keep-alive HTTP hot path allocates nothing per request, succeeding or failing: a counting
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

/// Allocations made while running `total` keep-alive requests with 4 clients on one thread, the
/// fewest of three runs (thread start-up and timers vary a little from run to run).
fn allocations_for(server: &TestServer, total: u64, succeeded: bool) -> u64 {
    let client = json!({"kind": "http", "url": server.url(), "expect_status": [[200, 200]]});
    let mut spec = one_group(4, json!({"total": total}), client);
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
fn assert_no_allocation_per_request(response: &[u8], succeeded: bool) {
    static SERIAL: Mutex<()> = Mutex::new(());
    let _one_at_a_time = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // The raw server allocates nothing per request either (one thread per connection).
    let server = TestServer::raw(response.to_vec(), After::KeepOpen, false);
    let small = allocations_for(&server, 2_000, succeeded);
    let large = allocations_for(&server, 22_000, succeeded);
    assert!(
        large <= small + 20,
        "{small} allocations for 2 000 requests, {large} for 22 000"
    );
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
