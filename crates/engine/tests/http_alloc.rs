//! The keep-alive HTTP hot path allocates nothing per request: a counting global allocator sees
//! (almost) the same number of allocations for 2 000 and for 22 000 requests. Its own test binary,
//! so no other test allocates meanwhile.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

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

/// Allocations made while running `total` keep-alive requests with 4 clients.
fn allocations_for(server: &RawServer, total: u64) -> u64 {
    let client = json!({"kind": "http", "url": server.url(), "expect_status": [[200, 200]]});
    let spec = one_group(4, json!({"total": total}), client);
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    let r = run(spec).unwrap();
    let used = ALLOCATIONS.load(Ordering::Relaxed) - before;
    assert_eq!(r.groups[0].succeeded, total, "{}", r.summary_json());
    used
}

#[test]
fn keep_alive_requests_do_not_allocate() {
    // The raw server allocates nothing per request either (one thread per connection).
    let server = RawServer::start(
        b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello knee\n".to_vec(),
        After::KeepOpen,
        false,
    );
    let small = allocations_for(&server, 2_000);
    let large = allocations_for(&server, 22_000);
    // 20 000 more requests; a per-request allocation would add ≥ 20 000.
    assert!(
        large < small + 500,
        "{small} allocations for 2 000 requests, {large} for 22 000"
    );
}
