//! Data sources that run out, end to end: what ends, and the seconds a group is measured over.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use knee_engine::{run, PacerSpec, Spec};
use serde_json::json;

/// 4 clients, each its own slice of 8 rows (2 each), `stop_client`, in a 5 s window: each client stops after
/// its slice. The group's `ran_out` stays unset (the rule that ends a group is `stop`), and with every client
/// stopped the group has ended: it is measured to its last operation, not over the 5 s window. Each of the 8
/// rows was one request the server saw. Gives the group's counts, the summary's text and the run's wall time.
fn sliced(open: bool) -> (knee_engine::GroupResult, String, Duration) {
    let server = TestServer::start(ServerOpts::default());
    let client = json!({"kind": "http", "url": format!("{}u/${{u.id}}", server.url())});
    let mut s: Spec = spec(json!({
        "threads": 2,
        "data": [{"name": "u", "text": "id\n1\n2\n3\n4\n5\n6\n7\n8\n", "format": "csv", "order": "queue",
                  "scope": "client", "on_exhausted": "stop_client"}],
        "groups": [group("main", 4, json!({"duration_ms": 5000}), client)],
    }));
    if open {
        s.groups[0].pacer = PacerSpec::Rate {
            rate_hz: Some(100.0),
            profile: None,
            poisson: false,
            max_in_flight: None,
        };
    }
    let t = Instant::now();
    let r = run(s).unwrap();
    let took = t.elapsed();
    let (g, text) = (r.groups[0].clone(), r.summary_json());
    assert_eq!(succeeded_failed_hung(&g), (8, 0, 0), "{text}");
    assert_eq!(g.counts.ran_out, None, "{text}");
    assert!(g.counts.elapsed_s < 1.0, "{text}");
    assert_eq!(server.requests(), 8);
    (g, text, took)
}

#[test]
fn clients_that_stop_for_want_of_rows_end_the_group_without_ending_it_for_all() {
    let (_, _, took) = sliced(false);
    assert!(
        took < Duration::from_secs(3),
        "the group ran on after its last client stopped: {took:?}"
    );
}

/// The same in an open loop: once a thread's clients have all stopped, its arrivals are no longer offered
/// (they were, and every one was dropped: 100 a second for the rest of the window, read as an overload).
#[test]
fn an_open_loop_whose_clients_all_stopped_for_want_of_rows_offers_no_more() {
    let (g, text, _) = sliced(true);
    // Arrivals offered while a thread's last clients were finding no row are dropped: a few, not the ~490 of
    // the window's rest.
    assert!(g.counts.dropped < 20, "{text}");
    assert_eq!(g.counts.offered, 8 + g.counts.dropped, "{text}");
}
