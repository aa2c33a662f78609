//! HTTP client against a real hyper server on 127.0.0.1:0.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;
use knee_engine::{run, Engine, ErrorClass, Metric, ShardResult};
use serde_json::json;

#[test]
fn keep_alive_total_counts_match_the_server() {
    let server = TestServer::start(ServerOpts::default());
    let r = run(one_group(50, json!({"total": 20000}), http(&server.url()))).unwrap();
    let g = &r.groups[0];
    assert_eq!(succeeded_failed_hung(g), (20000, 0, 0), "{}", r.summary_json());
    assert_eq!(server.requests(), 20000);
    assert!(
        server.connections() <= 50,
        "keep-alive opened {} connections",
        server.connections()
    );
    assert_eq!(g.connect.len(), server.connections());
    assert_eq!(g.latency.len(), 20000);
    assert_eq!(g.ttfb.len(), 20000);
    assert_eq!(g.counts.per_client.iter().sum::<u64>(), 20000);
    assert_eq!(g.series.iter().map(|t| t.succeeded).sum::<u64>(), 20000);
}

#[test]
fn new_connection_opens_one_connection_per_request() {
    let server = TestServer::start(ServerOpts::default());
    let mut client = http(&server.url());
    client["new_connection"] = json!(true);
    let r = run(one_group(50, json!({"total": 20000}), client)).unwrap();
    let g = &r.groups[0];
    assert_eq!(succeeded_failed_hung(g), (20000, 0, 0), "{}", r.summary_json());
    assert_eq!(server.requests(), 20000);
    assert_eq!(server.connections(), 20000);
    assert_eq!(g.connect.len(), 20000);
}

#[test]
fn server_closing_keep_alive_connections_is_transparent() {
    let server = TestServer::start(ServerOpts {
        close: true,
        ..ServerOpts::default()
    });
    let r = run(one_group(4, json!({"total": 400}), http(&server.url()))).unwrap();
    let g = &r.groups[0];
    assert_eq!(succeeded_failed_hung(g), (400, 0, 0), "{}", r.summary_json());
    assert_eq!(server.connections(), 400);
    assert_eq!(g.connect.len(), 400);
}

#[test]
fn per_client_iterations_are_exact() {
    let server = TestServer::start(ServerOpts::default());
    let r = run(one_group(40, json!({"per_client": 25}), http(&server.url()))).unwrap();
    let g = &r.groups[0];
    assert_eq!(g.counts.per_client, vec![25; 40]);
    assert_eq!(g.counts.outcomes.succeeded, 1000);
    assert_eq!(server.requests(), 1000);
}

#[test]
fn duration_stop_ends_on_time() {
    let server = TestServer::delayed(Duration::from_millis(5));
    let t = Instant::now();
    let mut s = one_group(10, json!({"duration_ms": 800}), http(&server.url()));
    s.interval_ms = 200;
    let r = run(s).unwrap();
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(800) && took < Duration::from_millis(1300),
        "took {took:?}"
    );
    let g = &r.groups[0];
    assert!(
        (g.counts.elapsed_s - 0.8).abs() < 1e-6,
        "group elapsed {}",
        g.counts.elapsed_s
    );
    assert!(
        g.counts.outcomes.succeeded > 100,
        "only {} ops in 0.8 s",
        g.counts.outcomes.succeeded
    );
    assert_eq!(g.counts.outcomes.failed + g.counts.outcomes.hung, 0);
    assert_eq!(g.series.len(), 4, "{:?}", g.series);
    assert!(server.requests() >= g.counts.outcomes.succeeded);
}

#[test]
fn fixed_20ms_service_has_p50_just_above_20ms() {
    let server = TestServer::delayed(Duration::from_millis(20));
    let r = run(one_group(4, json!({"total": 120}), http(&server.url()))).unwrap();
    let s = summary(&r);
    let p50 = s["groups"][0]["latency_us"]["p50"].as_u64().unwrap();
    // Never below the server's 20 ms; above it by knee's and the server's overhead, which a busy
    // machine stretches by a few ms (a unit slip or a lost wait would be far outside).
    assert!((20_000..=25_000).contains(&p50), "p50 {p50} µs");
    assert!(s["groups"][0]["ttfb_us"]["p50"].as_u64().unwrap() >= 20_000);
}

fn decode(b: Vec<u8>) -> Histogram<u64> {
    Deserializer::new().deserialize(&mut std::io::Cursor::new(b)).unwrap()
}

#[test]
fn summary_percentiles_equal_the_decoded_histogram() {
    let server = TestServer::start(ServerOpts::default());
    let r = run(one_group(8, json!({"total": 3000}), http(&server.url()))).unwrap();
    let s = summary(&r);
    let g = &s["groups"][0];
    let h = decode(r.histogram_v2(0, Metric::Latency).unwrap());
    assert_eq!(h.len(), 3000);
    for (key, q) in [
        ("p50", 0.5),
        ("p90", 0.9),
        ("p95", 0.95),
        ("p99", 0.99),
        ("p999", 0.999),
    ] {
        assert_eq!(g["latency_us"][key].as_u64().unwrap(), h.value_at_quantile(q), "{key}");
    }
    assert_eq!(g["latency_us"]["max"].as_u64().unwrap(), h.max());
    assert_eq!(g["latency_us"]["min"].as_u64().unwrap(), h.min());
    for row in g["percentiles"].as_array().unwrap() {
        let (p, v) = (row[0].as_f64().unwrap(), row[1].as_u64().unwrap());
        // The exact decimal quantile (99.9 / 100.0 is 0.9990000000000001, one rank higher).
        let q = (p * 1000.0).round() / 100_000.0;
        assert_eq!(v, h.value_at_quantile(q), "percentile {p}");
    }
    let c = decode(r.histogram_v2(0, Metric::Connect).unwrap());
    assert_eq!(g["connect_us"]["count"].as_u64().unwrap(), c.len());
    assert!(r.histogram_v2(1, Metric::Latency).is_none());
}

#[test]
fn status_failures_are_classed_status() {
    let server = TestServer::start(ServerOpts {
        status: 503,
        ..ServerOpts::default()
    });
    // Every client makes operations of its own: from a shared total, the four clients that connected first can take
    // all 100 before the fifth opens its connection (seen once in a CI run: 4 connections).
    let r = run(one_group(5, json!({"per_client": 20}), http(&server.url()))).unwrap();
    let g = &r.groups[0];
    assert_eq!((g.counts.outcomes.succeeded, g.counts.outcomes.failed), (0, 100));
    assert_eq!(g.failures_of(ErrorClass::Status), 100);
    assert_eq!(server.connections(), 5, "a status failure must keep the connection");
    let s = summary(&r);
    assert_eq!(s["groups"][0]["failures"], json!({"status": 100}));
    // One message, so one reason with one sample: the status line and the body's start.
    let samples = s["groups"][0]["error_samples"]["status"].as_array().unwrap();
    assert_eq!(samples, &[json!("HTTP/1.1 503 Service Unavailable: hello knee")]);
    assert_eq!(s["groups"][0]["reasons"][0]["count"], json!(100));

    let mut client = http(&server.url());
    client["expect_status"] = json!([[500, 503]]);
    let r = run(one_group(2, json!({"total": 10}), client)).unwrap();
    assert_eq!(r.groups[0].counts.outcomes.succeeded, 10);
}

#[test]
fn body_and_length_checks() {
    let server = TestServer::start(ServerOpts::default());
    let body = "hello knee\n";
    let cases = [
        (json!({"expect_body": "knee"}), None),
        (json!({"expect_body": "nope"}), Some(ErrorClass::Body)),
        (json!({"expect_body_regex": "^hel+o k"}), None),
        (json!({"expect_body_regex": "^knee"}), Some(ErrorClass::Body)),
        (json!({"expect_length": body.len()}), None),
        (json!({"expect_length": body.len() + 1}), Some(ErrorClass::Length)),
    ];
    for (extra, class) in cases {
        let mut client = http(&server.url());
        for (k, v) in extra.as_object().unwrap() {
            client[k] = v.clone();
        }
        let r = run(one_group(2, json!({"total": 20}), client)).unwrap();
        let g = &r.groups[0];
        match class {
            None => assert_eq!(g.counts.outcomes.succeeded, 20, "{extra}: {}", r.summary_json()),
            Some(c) => assert_eq!(g.failures_of(c), 20, "{extra}: {}", r.summary_json()),
        }
    }
}

#[test]
fn post_body_and_headers_reach_the_server() {
    // The server counts requests; a malformed request would fail at its parser and not count.
    let server = TestServer::start(ServerOpts::default());
    let mut client = http(&server.url());
    client["method"] = json!("POST");
    client["body"] = json!("x".repeat(10_000));
    client["headers"] = json!([["Cookie", "a=b"], ["X-Test", "1"]]);
    let r = run(one_group(3, json!({"total": 60}), client)).unwrap();
    assert_eq!(r.groups[0].counts.outcomes.succeeded, 60, "{}", r.summary_json());
    assert_eq!(server.requests(), 60);
}

#[test]
fn refused_connections_are_classed_connect_refused() {
    let url = format!("http://127.0.0.1:{}/", closed_port());
    let r = run(one_group(2, json!({"total": 10}), http(&url))).unwrap();
    let g = &r.groups[0];
    assert_eq!(g.failures_of(ErrorClass::ConnectRefused), 10, "{}", r.summary_json());
    assert_eq!(g.counts.outcomes.succeeded + g.counts.outcomes.hung, 0);
}

#[test]
fn slow_responses_past_the_timeout_are_hung() {
    let server = TestServer::delayed(Duration::from_millis(400));
    let mut s = one_group(3, json!({"per_client": 2}), http(&server.url()));
    s.groups[0].timeout_ms = 100;
    let t = Instant::now();
    let r = run(s).unwrap();
    assert!(t.elapsed() < Duration::from_secs(2), "took {:?}", t.elapsed());
    let g = &r.groups[0];
    assert_eq!(succeeded_failed_hung(g), (0, 0, 6));
    assert_eq!(g.counts.hung_clients, vec![0, 1, 2]);
    assert_eq!(g.latency.len(), 0, "hung operations are not in the latency histogram");
}

#[test]
fn baseload_and_stress_groups_run_together_with_separate_results() {
    let base = TestServer::delayed(Duration::from_millis(2));
    let stress = TestServer::start(ServerOpts {
        status: 500,
        ..ServerOpts::default()
    });
    let s = spec(json!({"threads": 2, "interval_ms": 100, "groups": [
        group("baseload", 5, json!({"duration_ms": 600}), http(&base.url())),
        group("stress", 20, json!({"per_client": 10}), http(&stress.url())),
    ]}));
    let r = run(s).unwrap();
    let (b, st) = (r.group("baseload").unwrap(), r.group("stress").unwrap());
    assert_eq!(b.counts.kind, "http");
    assert_eq!((b.counts.clients, st.counts.clients), (5, 20));
    assert!(
        b.counts.outcomes.succeeded > 50 && b.counts.outcomes.failed == 0,
        "baseload {}",
        r.summary_json()
    );
    // Requests in flight when the window closed reached the server: they are counted abandoned.
    assert!(b.counts.outcomes.abandoned <= 5, "{}", r.summary_json());
    assert_eq!(
        settled(|| base.requests(), b.counts.outcomes.started()),
        b.counts.outcomes.started()
    );
    assert_eq!((st.counts.outcomes.succeeded, st.counts.outcomes.failed), (0, 200));
    assert_eq!(st.counts.per_client, vec![0; 20]);
    assert_eq!(stress.requests(), 200);
    assert!((b.counts.elapsed_s - 0.6).abs() < 1e-6);
    assert!(st.counts.elapsed_s < b.counts.elapsed_s);
    assert!(r.span.elapsed_s >= 0.6);
}

#[test]
fn a_while_others_baseload_runs_exactly_as_long_as_the_stress_group() {
    let base = TestServer::delayed(Duration::from_millis(2));
    let stress = TestServer::delayed(Duration::from_millis(5));
    // Both kinds of foreground task: closed-loop clients and an open-loop scheduler.
    for stress_pacer in [json!({"kind": "rate", "rate_hz": 400.0}), json!({"kind": "closed"})] {
        let mut stress_group = group("stress", 4, json!({"total": 160}), http(&stress.url()));
        stress_group["pacer"] = stress_pacer;
        let s = spec(json!({"threads": 2, "interval_ms": 100, "groups": [
            group("baseload", 3, json!({"while_others": true}), http(&base.url())),
            stress_group,
        ]}));
        let (before, started) = (base.requests(), Instant::now());
        let r = run(s).unwrap();
        let took = started.elapsed();
        let (b, st) = (r.group("baseload").unwrap(), r.group("stress").unwrap());
        assert_eq!(st.counts.outcomes.succeeded, 160);
        assert!(!r.span.stopped, "the baseload's end is not a stop() of the run");
        // The run ends with the stress group (160 × 5 ms over 4 clients ≈ 0.2 s; 0.4 s open loop),
        // not with some fixed baseload window.
        assert!(took < Duration::from_secs(3), "{took:?}");
        assert!(
            b.counts.outcomes.succeeded > 30 && b.counts.outcomes.failed == 0 && b.counts.outcomes.hung == 0,
            "{}",
            r.summary_json()
        );
        assert!(
            (b.counts.elapsed_s - st.counts.elapsed_s).abs() < 0.05,
            "{} vs {}",
            b.counts.elapsed_s,
            st.counts.elapsed_s
        );
        // Every request the server saw is one knee counted: succeeded, or abandoned when the
        // stress group ended (at most one per baseload client).
        assert!(b.counts.outcomes.abandoned <= 3, "{}", r.summary_json());
        assert_eq!(
            settled(|| base.requests() - before, b.counts.outcomes.started()),
            b.counts.outcomes.started()
        );
    }
}

#[test]
fn a_shard_of_background_groups_runs_until_stopped_and_cuts_into_windows() {
    let base = TestServer::delayed(Duration::from_millis(2));
    let s = spec(json!({"threads": 2, "interval_ms": 100, "groups": [
        group("baseload", 4, json!({"while_others": true}), http(&base.url())),
    ]}));
    let engine = Engine::start(s).unwrap();
    // A cut right after start (before the threads have run at all) is answered too.
    let mut windows = vec![engine.cut().unwrap()];
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(250));
        windows.push(engine.cut().unwrap());
    }
    assert!(!engine.wait(Some(Duration::from_millis(100))), "it runs until stop()");
    engine.stop();
    assert!(engine.wait(Some(Duration::from_secs(3))));
    windows.push(engine.result().unwrap());
    let mut whole = windows[0].clone();
    for w in &windows[1..] {
        whole.merge(w).unwrap();
    }
    let g = &whole.groups[0];
    // The windows add up to every request the server saw; the connections stay open across cuts.
    assert_eq!(
        settled(|| base.requests(), g.counts.outcomes.started()),
        g.counts.outcomes.started(),
        "{}",
        whole.summary_json()
    );
    assert_eq!(base.connections(), 4);
    assert!(
        g.counts.outcomes.abandoned <= 4 && g.counts.outcomes.failed == 0 && g.counts.outcomes.hung == 0,
        "{}",
        whole.summary_json()
    );
    for (i, w) in windows[1..4].iter().enumerate() {
        let wg = &w.groups[0];
        assert!(wg.counts.outcomes.succeeded > 50, "window {i}: {}", w.summary_json());
        assert!(
            (wg.counts.elapsed_s - 0.25).abs() < 0.1,
            "window {i} lasted {} s",
            wg.counts.elapsed_s
        );
        assert_eq!(wg.counts.per_client.iter().sum::<u64>(), wg.counts.outcomes.succeeded);
        assert!(
            wg.series.len() <= 4,
            "window {i}'s series restarts at its cut: {}",
            wg.series.len()
        );
        assert!(!w.span.stopped);
    }
    assert!(windows[2].span.started_unix > windows[1].span.started_unix + 0.2);
    // Followed one after another (a soak's windows), they are the whole run: the same counts as merged, each
    // client's count its own, the elapsed times added and the series going on interval by interval.
    let mut run = windows[0].clone();
    for w in &windows[1..] {
        run.follow(w).unwrap();
    }
    let r = &run.groups[0];
    assert_eq!(r.counts.outcomes, g.counts.outcomes);
    assert_eq!(r.counts.clients, 4);
    assert_eq!(r.counts.per_client.len(), 4);
    assert_eq!(r.counts.per_client.iter().sum::<u64>(), r.counts.outcomes.succeeded);
    let lasted: f64 = windows.iter().map(|w| w.groups[0].counts.elapsed_s).sum();
    assert!(
        (r.counts.elapsed_s - lasted).abs() < 1e-9 && r.counts.elapsed_s > 0.7,
        "{}",
        r.counts.elapsed_s
    );
    let ticks: u64 = r.series.iter().map(|t| t.succeeded).sum();
    assert_eq!(ticks, r.counts.outcomes.succeeded);
    let expected = (r.counts.elapsed_s / 0.1).round() as usize;
    assert!(
        r.series.len().abs_diff(expected) <= 1,
        "{} intervals for {} s",
        r.series.len(),
        r.counts.elapsed_s
    );
    assert!(r.series.len() > windows[1..].iter().map(|w| w.groups[0].series.len()).max().unwrap());
    let e = Engine::start(one_group(1, json!({"total": 1}), http(&base.url()))).unwrap();
    assert!(e.cut().unwrap_err().to_string().contains("while_others"));
}

#[test]
fn while_others_must_be_true() {
    let e = knee_engine::Spec::from_json(
        &json!({"groups": [
            group("g", 1, json!({"while_others": false}), http("http://127.0.0.1:9/")),
            group("h", 1, json!({"total": 1}), http("http://127.0.0.1:9/")),
        ]})
        .to_string(),
    )
    .expect_err("refused")
    .to_string();
    assert!(e.contains("groups[0].stop.while_others must be true"), "{e}");
}

/// `clients` clients GET a server that answers after `delay_ms` for `duration_ms`, the first `warmup_ms` of
/// them a warm-up: the server and the result.
fn run_with_warmup(delay_ms: u64, clients: u64, duration_ms: u64, warmup_ms: u64) -> (TestServer, ShardResult) {
    let server = TestServer::delayed(Duration::from_millis(delay_ms));
    let mut s = one_group(clients, json!({"duration_ms": duration_ms}), http(&server.url()));
    s.groups[0].warmup_ms = warmup_ms;
    let r = run(s).unwrap();
    (server, r)
}

#[test]
fn warmup_operations_are_not_recorded() {
    let (server, r) = run_with_warmup(5, 2, 300, 200);
    let g = &r.groups[0];
    assert!(g.counts.warmup_ops > 10, "{}", r.summary_json());
    assert!(g.counts.outcomes.succeeded > 10);
    assert!(server.requests() >= g.counts.warmup_ops + g.counts.outcomes.succeeded);
    assert_eq!(g.latency.len(), g.counts.outcomes.succeeded);
}

#[test]
fn a_total_after_a_warm_up_is_made_in_full() {
    // More clients than the total: the claims refused at the start kept tickets that the warm-up operations gave
    // back, so each client's next claim was refused and the group measured no operation at all.
    let server = TestServer::delayed(Duration::from_millis(5));
    let mut s = one_group(5, json!({"total": 3}), http(&server.url()));
    s.groups[0].warmup_ms = 100;
    let r = run_within(s, Duration::from_secs(10));
    let g = &r.groups[0];
    assert!(g.counts.warmup_ops > 0, "{}", r.summary_json());
    assert_eq!(succeeded_failed_hung(g), (3, 0, 0), "{}", r.summary_json());
    assert_eq!(
        settled(|| server.requests(), g.counts.warmup_ops + 3),
        g.counts.warmup_ops + 3
    );
}

#[test]
fn operations_a_stop_cuts_short_during_the_warm_up_are_warm_up() {
    // They end before the measurement begins: warm-up, as docs/engine-spec.md says, not measured abandoned ones.
    let server = TestServer::delayed(Duration::from_millis(1000));
    let mut s = one_group(2, json!({"duration_ms": 5000}), http(&server.url()));
    s.groups[0].warmup_ms = 3000;
    let engine = Engine::start(s).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    engine.stop();
    assert!(engine.wait(Some(Duration::from_secs(3))));
    let r = engine.result().unwrap();
    let g = &r.groups[0];
    assert_eq!(
        (g.counts.warmup_ops, g.counts.outcomes.started()),
        (2, 0),
        "{}",
        r.summary_json()
    );
}

#[test]
fn think_time_paces_clients_and_never_outlasts_the_window() {
    let server = TestServer::start(ServerOpts::default());
    let mut s = one_group(2, json!({"duration_ms": 450}), http(&server.url()));
    s.groups[0].think_ms = 100;
    let r = run(s).unwrap();
    // Each client starts at 0, 100, 200, 300, 400 ms (plus the tiny service time).
    assert!(
        (8..=10).contains(&r.groups[0].counts.outcomes.succeeded),
        "{}",
        r.summary_json()
    );

    let mut s = one_group(2, json!({"duration_ms": 300}), http(&server.url()));
    s.groups[0].think_ms = 5000;
    let t = Instant::now();
    let r = run(s).unwrap();
    assert!(
        t.elapsed() < Duration::from_millis(800),
        "a long think time outlasted the window: {:?}",
        t.elapsed()
    );
    assert_eq!(r.groups[0].counts.outcomes.succeeded, 2);
}

/// Run `clients` clients for `total` requests against `url` with extra client keys.
/// `total` operations as `total / clients` per client, so every client opens its own connection
/// whichever thread happens to run first.
fn run_with(url: &str, clients: u64, total: u64, extra: serde_json::Value) -> knee_engine::ShardResult {
    let mut client = http(url);
    for (k, v) in extra.as_object().unwrap() {
        client[k] = v.clone();
    }
    assert_eq!(total % clients, 0, "run_with splits total evenly over the clients");
    run(one_group(clients, json!({"per_client": total / clients}), client)).unwrap()
}

#[test]
fn chunked_bodies_are_decoded_whole_or_split_across_reads() {
    let resp = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n6\r\n knee\n\r\n0\r\nX-Trailer: 1\r\n\r\n";
    for split in [false, true] {
        let server = TestServer::raw(resp.to_vec(), After::KeepOpen, split);
        let total = if split { 20 } else { 400 };
        let r = run_with(
            &server.url(),
            2,
            total,
            json!({"expect_body": "hello knee\n", "expect_length": 11}),
        );
        let g = &r.groups[0];
        assert_eq!(succeeded_failed_hung(g), (total, 0, 0), "{}", r.summary_json());
        assert_eq!(server.requests(), total);
        assert_eq!(server.connections(), 2, "chunked responses keep the connection");
        let r = run_with(&server.url(), 1, 5, json!({"expect_length": 10}));
        assert_eq!(r.groups[0].failures_of(ErrorClass::Length), 5, "{}", r.summary_json());
    }
}

#[test]
fn connection_close_responses_reconnect_without_errors() {
    let server = TestServer::raw(
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 3\r\n\r\nok\n".to_vec(),
        After::Close,
        false,
    );
    let r = run_with(&server.url(), 4, 200, json!({"expect_body": "ok"}));
    let g = &r.groups[0];
    assert_eq!(succeeded_failed_hung(g), (200, 0, 0), "{}", r.summary_json());
    assert_eq!((server.requests(), server.connections()), (200, 200));
    assert_eq!(g.connect.len(), 200);
}

#[test]
fn silently_closed_keep_alive_connections_are_retried_once() {
    // No `Connection: close`: the client learns of the close only when it reuses the connection.
    let server = TestServer::raw(
        b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n".to_vec(),
        After::Close,
        false,
    );
    let r = run_with(&server.url(), 2, 100, json!({}));
    let g = &r.groups[0];
    assert_eq!(succeeded_failed_hung(g), (100, 0, 0), "{}", r.summary_json());
    assert_eq!((server.requests(), server.connections()), (100, 100));
}

#[test]
fn http10_close_delimited_bodies_are_read_to_the_end() {
    let server = TestServer::raw(b"HTTP/1.0 200 OK\r\n\r\nhello 1.0 body".to_vec(), After::Close, false);
    let r = run_with(
        &server.url(),
        3,
        90,
        json!({"expect_length": 14, "expect_body_regex": "^hello 1\\.0 body$"}),
    );
    let g = &r.groups[0];
    assert_eq!(succeeded_failed_hung(g), (90, 0, 0), "{}", r.summary_json());
    assert_eq!((server.requests(), server.connections()), (90, 90));
}

#[test]
fn a_1mb_body_is_counted_and_length_checked() {
    let n = 1 << 20;
    let mut resp = format!("HTTP/1.1 200 OK\r\nContent-Length: {n}\r\n\r\n").into_bytes();
    resp.extend(std::iter::repeat_n(b'x', n - 4));
    resp.extend_from_slice(b"END\n");
    let server = TestServer::raw(resp, After::KeepOpen, false);
    let r = run_with(&server.url(), 2, 30, json!({"expect_length": n}));
    let g = &r.groups[0];
    assert_eq!(succeeded_failed_hung(g), (30, 0, 0), "{}", r.summary_json());
    assert_eq!((server.requests(), server.connections()), (30, 2));
    let r = run_with(
        &server.url(),
        2,
        10,
        json!({"expect_length": n + 1, "expect_body_regex": "xEND\n$"}),
    );
    assert_eq!(r.groups[0].failures_of(ErrorClass::Length), 10, "{}", r.summary_json());
    let r = run_with(&server.url(), 2, 10, json!({"expect_body_regex": "xEND\n$"}));
    assert_eq!(r.groups[0].counts.outcomes.succeeded, 10, "{}", r.summary_json());
}

#[test]
fn head_and_204_responses_have_no_body() {
    // A HEAD response announces a length but sends no body; waiting for it would hang.
    let server = TestServer::raw(
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n".to_vec(),
        After::KeepOpen,
        false,
    );
    let r = run_with(&server.url(), 2, 100, json!({"method": "HEAD", "expect_length": 0}));
    let g = &r.groups[0];
    assert_eq!(succeeded_failed_hung(g), (100, 0, 0), "{}", r.summary_json());
    assert_eq!((server.requests(), server.connections()), (100, 2));

    let server = TestServer::raw(b"HTTP/1.1 204 No Content\r\n\r\n".to_vec(), After::KeepOpen, false);
    let r = run_with(&server.url(), 2, 100, json!({"expect_status": [[204, 204]]}));
    let g = &r.groups[0];
    assert_eq!(succeeded_failed_hung(g), (100, 0, 0), "{}", r.summary_json());
    assert_eq!((server.requests(), server.connections()), (100, 2));
}

#[test]
fn interim_100_continue_responses_are_skipped() {
    let server = TestServer::raw(
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok".to_vec(),
        After::KeepOpen,
        true,
    );
    let mut extra = json!({"method": "POST", "body": "data", "expect_status": [[201, 201]], "expect_body": "ok"});
    extra["headers"] = json!([["Expect", "100-continue"]]);
    let r = run_with(&server.url(), 2, 20, extra);
    let g = &r.groups[0];
    assert_eq!(succeeded_failed_hung(g), (20, 0, 0), "{}", r.summary_json());
    assert_eq!(server.requests(), 20);
}

/// 20 GETs from 2 clients to `server` all fail as `class`: the first error sample of that class in the summary.
fn all_fail_as(server: &TestServer, class: ErrorClass) -> String {
    let r = run_with(&server.url(), 2, 20, json!({}));
    let g = &r.groups[0];
    assert_eq!(g.failures_of(class), 20, "{}", r.summary_json());
    let s = summary(&r);
    s["groups"][0]["error_samples"][class.as_str()][0]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn garbage_responses_are_classed_protocol() {
    let server = TestServer::raw(b"SSH-2.0-OpenSSH_9.6\r\n\r\n".to_vec(), After::KeepOpen, false);
    let sample = all_fail_as(&server, ErrorClass::Protocol);
    assert!(sample.starts_with("invalid response head"), "{sample}");
}

#[test]
fn cut_off_responses_are_classed_reset_or_closed() {
    let resp = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial".to_vec();
    let server = TestServer::raw(resp.clone(), After::Reset, false);
    let r = run_with(&server.url(), 2, 20, json!({}));
    let g = &r.groups[0];
    let (reset, closed) = (g.failures_of(ErrorClass::Reset), g.failures_of(ErrorClass::Closed));
    assert_eq!(
        (reset + closed, g.counts.outcomes.succeeded),
        (20, 0),
        "{}",
        r.summary_json()
    );
    assert!(reset > 0, "an RST mid-body is a reset: {}", r.summary_json());

    let server = TestServer::raw(resp, After::Close, false);
    let sample = all_fail_as(&server, ErrorClass::Closed);
    assert!(sample.contains("after 7 of 100 body bytes"), "{sample}");
}

/// Every request that started ends as exactly one of succeeded, failed, hung or abandoned, and
/// the sum is what the server saw: requests in flight when a duration window closes are abandoned,
/// not lost.
#[test]
fn started_equals_what_the_server_saw() {
    let (server, r) = run_with_warmup(3, 8, 400, 100);
    let g = &r.groups[0];
    assert!(
        g.counts.outcomes.abandoned > 0 && g.counts.outcomes.abandoned <= 8,
        "{}",
        r.summary_json()
    );
    assert_eq!(
        g.counts.outcomes.started(),
        g.counts.outcomes.succeeded + g.counts.outcomes.failed + g.counts.outcomes.hung + g.counts.outcomes.abandoned
    );
    let seen = g.counts.outcomes.started() + g.counts.warmup_ops;
    assert_eq!(settled(|| server.requests(), seen), seen, "{}", r.summary_json());
    let s = summary(&r);
    assert_eq!(s["groups"][0]["started"], json!(g.counts.outcomes.started()));
    assert_eq!(s["groups"][0]["abandoned"], json!(g.counts.outcomes.abandoned));
}

/// Bytes on the wire: the whole request and response per operation, and the document (body).
#[test]
fn bytes_sent_and_received_are_counted_exactly() {
    let resp = b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello knee\n";
    let server = TestServer::raw(resp.to_vec(), After::KeepOpen, false);
    let r = run_with(&server.url(), 2, 100, json!({"method": "POST", "body": "0123456789"}));
    let g = &r.groups[0];
    let host = server
        .url()
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let request = format!("POST / HTTP/1.1\r\nHost: {host}\r\nContent-Length: 10\r\n\r\n0123456789");
    assert_eq!(g.counts.outcomes.succeeded, 100);
    assert_eq!(g.counts.bytes_sent, 100 * request.len() as u64);
    assert_eq!(g.counts.bytes_received, 100 * resp.len() as u64);
    assert_eq!(g.counts.payload_bytes, 100 * 11);
    // Chunked: the wire bytes include the framing, the payload is the decoded body.
    let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
    let server = TestServer::raw(chunked.to_vec(), After::KeepOpen, false);
    let r = run_with(&server.url(), 1, 10, json!({}));
    let g = &r.groups[0];
    assert_eq!(
        (g.counts.bytes_received, g.counts.payload_bytes),
        (10 * chunked.len() as u64, 50)
    );
}

/// `mix_order = "in_turn"`: each operation the next request of the list, across the clients and threads, the
/// first again after the last: every request sent as often, give or take one, the first ones first. A weight is
/// refused with it (the turn has none); at random by weight (the default) a run of 3 × 400 is not that even.
#[test]
fn a_mix_in_turn_sends_each_request_in_turn_across_the_clients() {
    let server = TestServer::start(ServerOpts::default());
    let mix = |order: &str, total: u64, clients: u64, weight: f64| {
        let requests: Vec<serde_json::Value> = ["a", "b", "c"]
            .iter()
            .map(|n| json!({"name": n, "url": format!("{}{n}", server.url()), "weight": weight}))
            .collect();
        let client = json!({"kind": "http", "url": server.url(), "requests": requests, "mix_order": order});
        let s = json!({"threads": 2, "seed": 7, "groups": [group("main", clients, json!({"total": total}), client)]});
        knee_engine::Spec::from_json(&s.to_string()).map(|s| run(s).unwrap())
    };
    let sent = |r: &knee_engine::ShardResult| -> Vec<u64> {
        let g = &r.groups[0];
        ["a", "b", "c"]
            .iter()
            .map(|n| {
                g.requests
                    .iter()
                    .find(|q| q.counts.name == *n)
                    .map_or(0, |q| q.counts.outcomes.succeeded)
            })
            .collect()
    };
    let one = mix("in_turn", 7, 1, 1.0).unwrap();
    assert_eq!(sent(&one), [3, 2, 2], "{}", one.summary_json());
    let many = mix("in_turn", 1200, 8, 1.0).unwrap();
    assert_eq!(sent(&many), [400, 400, 400], "{}", many.summary_json());
    let random = mix("random", 1200, 8, 1.0).unwrap();
    assert_eq!(sent(&random).iter().sum::<u64>(), 1200);
    assert_ne!(sent(&random), [400, 400, 400], "{}", random.summary_json());
    let Err(err) = mix("in_turn", 3, 1, 2.0) else {
        panic!("a weight in turn is refused")
    };
    let err = err.to_string();
    assert!(err.contains("weight is 2, but mix_order \"in_turn\""), "{err}");
}
