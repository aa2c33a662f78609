//! Behaviours in time: the queueing worker pool (`workers`) alone and behind `max_connections`,
//! queueing time counted toward `timeout_s`, and the warm-up's clock (from the first request,
//! again after a reset).

use crate::common;

use std::time::{Duration, Instant};

use common::{against, closed_loop, ms, serve, stats, Conn};

#[test]
fn requests_past_the_workers_wait_in_turn_and_are_served() {
    // S = 20 ms flat, 4 workers: 8 clients get 4 / 20 ms = 200/s, none refused, 4 always queued.
    let (server, addr, rt) = serve("lambda = 50.0\nsigma = 0.0\nkappa = 0.0\nworkers = 4\n");
    let run = rt.block_on(closed_loop(addr, "/", 8, ms(200), ms(1000), ms(2000)));
    assert_eq!(run.status_503 + run.status_504 + run.other + run.gave_up, 0, "{run:?}");
    assert!((run.rate() - 200.0).abs() < 20.0, "{run:?}");
    let s = rt.block_on(stats(addr));
    assert_eq!(s["workers"].as_u64(), Some(4), "{s}");
    assert_eq!(s["max_queued"].as_u64(), Some(4), "{s}");
    assert_eq!(s["max_in_flight"].as_u64(), Some(8), "{s}");
    assert_eq!(s["served"].as_u64(), Some(run.ok), "{s}");
    assert!(s["queued_total"].as_u64().unwrap() > run.ok / 2, "{s}");
    assert_eq!((s["queued"].as_u64(), s["serving"].as_u64()), (Some(0), Some(0)), "{s}");
    // A reset zeroes the totals and brings the peak back to the queue now.
    server.reset();
    let s = rt.block_on(stats(addr));
    assert_eq!(
        (s["max_queued"].as_u64(), s["queued_total"].as_u64()),
        (Some(0), Some(0)),
        "{s}"
    );
}

#[test]
fn workers_behind_a_connection_limit_serve_some_queue_some_and_leave_the_rest_unaccepted() {
    // 2 workers, 4 connections: of 8 keep-alive clients 2 are served, 2 queue, 4 wait to be accepted.
    let (server, addr, rt) = serve("lambda = 50.0\nsigma = 0.0\nkappa = 0.0\nworkers = 2\nmax_connections = 4\n");
    let running = rt.spawn(closed_loop(addr, "/", 8, ms(200), ms(1000), ms(1500)));
    // Mid-run, from the server's side (an /admin/stats connection would wait to be accepted too).
    std::thread::sleep(ms(700));
    let s: serde_json::Value = serde_json::from_str(&server.stats_json()).unwrap();
    let now = |k: &str| s[k].as_u64();
    assert_eq!(
        [
            now("serving"),
            now("queued"),
            now("connections_open"),
            now("connections_accepted")
        ],
        [Some(2), Some(2), Some(4), Some(4)],
        "{s}"
    );
    let run = rt.block_on(running).unwrap();
    assert!((run.rate() - 100.0).abs() < 12.0, "{run:?}");
    let s = rt.block_on(stats(addr));
    assert_eq!(s["max_queued"].as_u64(), Some(2), "{s}");
    assert_eq!(s["max_in_flight"].as_u64(), Some(4), "{s}");
}

#[test]
fn time_waiting_for_a_worker_counts_toward_the_timeout() {
    // One worker, S = 100 ms, timeout 150 ms, requests at 0, 10 and 20 ms: the first is served
    // (100 ms); the second waits 90 ms for the worker and would end at 200 ms: 504 at its
    // deadline, 160 ms; the third gets the worker then and would end at 260: 504 at 170.
    // Without the queueing time counted they would be 200 at 200 and 300 ms.
    against(
        "lambda = 10.0\nsigma = 0.0\nkappa = 0.0\nworkers = 1\ntimeout_s = 0.15\n",
        |addr| async move {
            let t0 = Instant::now();
            let one = || async move {
                let mut c = Conn::open(addr).await.unwrap();
                let status = c.request("GET", "/").await.unwrap().0;
                (status, t0.elapsed())
            };
            let first = tokio::spawn(one());
            tokio::time::sleep(ms(10)).await;
            let second = tokio::spawn(one());
            tokio::time::sleep(ms(10)).await;
            let third = tokio::spawn(one());
            let got = [first.await.unwrap(), second.await.unwrap(), third.await.unwrap()];
            let statuses: Vec<u16> = got.iter().map(|g| g.0).collect();
            assert_eq!(statuses, vec![200, 504, 504], "{got:?}");
            let near = |d: Duration, want: u64| d >= ms(want - 5) && d < ms(want + 80);
            assert!(
                near(got[0].1, 100) && near(got[1].1, 160) && near(got[2].1, 170),
                "{got:?}"
            );
            let s = stats(addr).await;
            assert_eq!(s["timed_out"].as_u64(), Some(2), "{s}");
            // Each held the worker until its deadline, which came before the next one's.
            assert_eq!(s["queue_timeouts"].as_u64(), Some(0), "{s}");
            assert_eq!(s["queued_total"].as_u64(), Some(2), "{s}");
            assert_eq!(s["served"].as_u64(), Some(1), "{s}");
        },
    );
}

/// One request's duration on `c`.
async fn took(c: &mut Conn) -> Duration {
    let t = Instant::now();
    assert_eq!(c.request("GET", "/").await.unwrap().0, 200);
    t.elapsed()
}

#[test]
fn the_warm_up_starts_at_the_first_request_and_again_after_a_reset() {
    // S = 20 ms, × 4 for the first 0.5 s after the first request.
    let (server, addr, rt) = serve("lambda = 50.0\nsigma = 0.0\nkappa = 0.0\nwarmup_for = 0.5\nwarmup_factor = 4.0\n");
    rt.block_on(async {
        // The set-up's time does not count: the clock has not started.
        tokio::time::sleep(ms(600)).await;
        assert_eq!(stats(addr).await["clock_s"], serde_json::Value::Null);
        let mut c = Conn::open(addr).await.unwrap();
        let cold = took(&mut c).await;
        assert!(cold >= ms(78) && cold < ms(120), "{cold:?}");
        let s = stats(addr).await;
        assert_eq!(
            (s["warming_up"].as_bool(), s["service_multiplier"].as_f64()),
            (Some(true), Some(4.0)),
            "{s}"
        );
        tokio::time::sleep(ms(500)).await;
        let warm = took(&mut c).await;
        assert!(warm >= ms(19) && warm < ms(40), "{warm:?}");
        assert_eq!(stats(addr).await["warming_up"].as_bool(), Some(false));
        server.reset();
        tokio::time::sleep(ms(300)).await;
        let again = took(&mut c).await;
        assert!(again >= ms(78) && again < ms(120), "after a reset: {again:?}");
    });
}
