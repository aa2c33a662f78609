//! Results: merge equals one combined recording, lossless bytes, live control.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use knee_engine::{run, Engine, EngineError, ErrorClass, MergeError, ShardResult, Spec, FORMAT_VERSION};
use serde_json::json;

#[test]
fn merge_equals_the_combined_recording_and_bytes_round_trip() {
    let ok = TestServer::start(ServerOpts::default());
    let bad = TestServer::start(ServerOpts {
        status: 503,
        ..ServerOpts::default()
    });
    let mut a = run(one_group(3, json!({"total": 300}), http(&ok.url()))).unwrap();
    let b = run(one_group(2, json!({"total": 50}), http(&bad.url()))).unwrap();

    let bytes = a.to_bytes();
    let back = ShardResult::from_bytes(&bytes).unwrap();
    assert_eq!(back, a, "to_bytes/from_bytes must be lossless");
    assert_eq!(back.to_bytes(), bytes);

    let (ga, gb) = (a.groups[0].clone(), b.groups[0].clone());
    let mut latency = ga.latency.clone();
    latency.add(&gb.latency).unwrap();
    let mut failed_latency = ga.failed_latency.clone();
    failed_latency.add(&gb.failed_latency).unwrap();
    let mut connect = ga.connect.clone();
    connect.add(&gb.connect).unwrap();
    a.merge(&b).unwrap();
    let g = &a.groups[0];
    assert_eq!(a.groups.len(), 1);
    assert_eq!(succeeded_failed_hung(g), (300, 50, 0));
    assert_eq!(g.counts.clients, 5);
    assert_eq!(g.failures_of(ErrorClass::Status), 50);
    assert_eq!(g.latency, latency);
    // Successes are timed apart from failures (and connects of both are kept).
    assert_eq!(g.latency.len(), 300);
    assert_eq!(g.failed_latency, failed_latency);
    assert_eq!(g.failed_latency.len(), 50);
    assert_eq!(g.connect, connect);
    assert_eq!(g.counts.per_client.len(), 5);
    assert_eq!(g.counts.per_client.iter().sum::<u64>(), 300);
    assert_eq!(&g.counts.per_client[..3], &ga.counts.per_client[..]);
    let n = ga.series.len().max(gb.series.len());
    assert_eq!(g.series.len(), n);
    for i in 0..n {
        let (x, y) = (
            ga.series.get(i).cloned().unwrap_or_default(),
            gb.series.get(i).cloned().unwrap_or_default(),
        );
        assert_eq!(g.series[i].succeeded, x.succeeded + y.succeeded);
        assert_eq!(g.series[i].failed, x.failed + y.failed);
        // each interval's latency buckets and failures by class add too
        assert_eq!(g.series[i].latency.count(), x.latency.count() + y.latency.count());
        assert_eq!(g.series[i].latency.count(), g.series[i].succeeded);
        assert_eq!(g.series[i].classes.iter().sum::<u64>(), g.series[i].failed);
    }
    let status: u64 = g
        .series
        .iter()
        .map(|t| t.classes.get(ErrorClass::Status.index()).copied().unwrap_or(0))
        .sum();
    assert_eq!(status, 50);
    assert_eq!(g.counts.elapsed_s, ga.counts.elapsed_s.max(gb.counts.elapsed_s));
    // 50 failures with one message: one reason, counted 50 times, with its sample.
    assert_eq!(g.reasons.list.len(), 1, "{:?}", g.reasons);
    let r = &g.reasons.list[0];
    assert_eq!((r.class, r.count), (ErrorClass::Status, 50));
    assert_eq!(r.key, "HTTP/1.1 503 Service Unavailable: hello knee");
    assert_eq!(g.error_samples(ErrorClass::Status), std::slice::from_ref(&r.sample));

    // The merged result survives bytes too, and summary percentiles come from the merged histogram.
    let merged = ShardResult::from_bytes(&a.to_bytes()).unwrap();
    assert_eq!(merged, a);
    let s = summary(&merged);
    assert_eq!(
        s["groups"][0]["latency_us"]["p99"].as_u64().unwrap(),
        latency.value_at_quantile(0.99)
    );
    assert_eq!(s["groups"][0]["latency_us"]["count"].as_u64().unwrap(), 300);
    assert_eq!(s["groups"][0]["failed_latency_us"]["count"].as_u64().unwrap(), 50);
}

#[test]
fn merge_appends_unknown_groups_and_rejects_mismatches() {
    let ok = TestServer::start(ServerOpts::default());
    let mut a = run(one_group(1, json!({"total": 5}), http(&ok.url()))).unwrap();
    let mut other = one_group(1, json!({"total": 5}), http(&ok.url()));
    other.groups[0].name = "second".into();
    let b = run(other).unwrap();
    a.merge(&b).unwrap();
    assert_eq!(
        a.groups.iter().map(|g| g.counts.name.as_str()).collect::<Vec<_>>(),
        ["main", "second"]
    );

    let mut c = one_group(1, json!({"total": 1}), json!({"kind": "exec", "argv": ["/bin/true"]}));
    c.interval_ms = 500;
    let c = run(c).unwrap();
    assert!(matches!(a.merge(&c), Err(MergeError::Interval(..))));
    let mut d = c.clone();
    d.span.interval_s = 1.0;
    assert!(matches!(a.merge(&d), Err(MergeError::Kind { .. })));
    assert!(ShardResult::from_bytes(b"{}").is_err());
}

#[test]
fn the_snapshot_counts_failures_by_class_as_the_result_does() {
    let url = format!("http://127.0.0.1:{}/", closed_port());
    let engine = Engine::start(one_group(2, json!({"total": 10}), http(&url))).unwrap();
    assert!(engine.wait(Some(Duration::from_secs(10))));
    let snap = engine.snapshot();
    let g = &snap.groups[0];
    assert_eq!(g.failed_by_class.get("connect_refused"), Some(&10), "{snap:?}");
    assert_eq!(g.failed_by_class.values().sum::<u64>(), g.outcomes.failed);
    let r = engine.result().unwrap();
    assert_eq!(r.groups[0].failures_of(ErrorClass::ConnectRefused), 10);
}

#[test]
fn stop_mid_run_ends_promptly_with_partial_counts() {
    let server = TestServer::delayed(Duration::from_millis(2));
    let engine =
        std::sync::Arc::new(Engine::start(one_group(10, json!({"total": 1_000_000}), http(&server.url()))).unwrap());
    std::thread::sleep(Duration::from_millis(1300));
    let snap = engine.snapshot();
    assert!(!snap.finished);
    let v: serde_json::Value = serde_json::from_str(&snap.to_json()).unwrap();
    let keys: Vec<&str> = v["groups"][0].as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "abandoned",
            "failed",
            "failed_by_class",
            "hung",
            "in_flight",
            "lagged",
            "late",
            "name",
            "p50_us",
            "p99_us",
            "succeeded"
        ]
    );
    assert!(v["elapsed_s"].as_f64().unwrap() >= 1.2 && v["finished"] == json!(false));
    assert!(
        snap.groups[0].outcomes.succeeded > 0 && snap.groups[0].p50_us >= 2000,
        "{snap:?}"
    );
    let e2 = engine.clone();
    let t = Instant::now();
    std::thread::spawn(move || e2.stop()).join().unwrap();
    engine.stop();
    assert!(engine.wait(Some(Duration::from_secs(3))));
    assert!(t.elapsed() < Duration::from_millis(500), "stop took {:?}", t.elapsed());
    let r = engine.result().unwrap();
    let g = &r.groups[0];
    assert!(r.span.stopped);
    assert!(
        g.counts.outcomes.succeeded >= snap.groups[0].outcomes.succeeded && g.counts.outcomes.succeeded < 1_000_000
    );
    assert_eq!(g.counts.outcomes.failed + g.counts.outcomes.hung, 0);
    assert!(engine.snapshot().finished);
    assert_eq!(engine.snapshot().groups[0].in_flight, 0);
    assert_eq!(engine.result(), Some(r), "result() can be called again");
}

#[test]
fn start_errors_name_the_key_and_the_fix() {
    let mut client = http("http://127.0.0.1:1/");
    client["body_file"] = json!("/nonexistent/knee-body");
    let e = Engine::start(one_group(1, json!({"total": 1}), client)).err().unwrap();
    assert!(matches!(e, EngineError::BodyFile { .. }));
    assert!(
        e.to_string()
            .starts_with("groups[0].client.body_file: cannot read body_file \"/nonexistent/knee-body\""),
        "{e}"
    );

    let e = Engine::start(one_group(100_000_000, json!({"total": 1}), http("http://127.0.0.1:1/")))
        .err()
        .unwrap();
    // One socket per client, 64 to spare, and a few per runtime thread for spawns.
    let need: u64 = e
        .to_string()
        .split("ulimit -n ")
        .nth(1)
        .and_then(|t| t.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!((100_000_064..=100_000_064 + 64 * 8).contains(&need), "{e}");

    let e = Spec::from_json(
        r#"{"groups": [{"name": "g", "clients": 1, "stop": {"total": 0}, "client": {"kind": "exec", "argv": ["x"]}}]}"#,
    )
    .unwrap_err();
    assert_eq!(e.to_string(), "groups[0].stop.total must be at least 1 (got 0)");
}

#[test]
fn body_file_is_sent() {
    let dir = temp_dir("bodyfile");
    let path = dir.join("body");
    std::fs::write(&path, vec![b'z'; 50_000]).unwrap();
    let server = TestServer::start(ServerOpts::default());
    let mut client = http(&server.url());
    client["method"] = json!("PUT");
    client["body_file"] = json!(path.display().to_string());
    let r = run(one_group(2, json!({"total": 20}), client)).unwrap();
    assert_eq!(r.groups[0].counts.outcomes.succeeded, 20, "{}", r.summary_json());
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn open_loop_rate_paces_the_group() {
    let server = TestServer::start(ServerOpts::default());
    let mut s = one_group(4, json!({"duration_ms": 1000}), http(&server.url()));
    s.groups[0].pacer = knee_engine::PacerSpec::Rate {
        rate_hz: Some(200.0),
        profile: None,
        poisson: false,
        max_in_flight: None,
    };
    let r = run(s).unwrap();
    let n = r.groups[0].counts.outcomes.succeeded;
    assert!((180..=201).contains(&n), "200/s for 1 s gave {n}");
    // Every arrival completed, except at most one in flight when the window closed.
    let g = &r.groups[0];
    assert!(
        g.counts.offered >= n && g.counts.offered <= n + g.counts.dropped + 1,
        "{}",
        r.summary_json()
    );
}

#[test]
fn open_loop_counts_merge_exactly_and_other_format_versions_are_named() {
    let server = TestServer::start(ServerOpts::default());
    let shard = |offset: u64| {
        let mut s = one_group(2, json!({"duration_ms": 500}), http(&server.url()));
        s.groups[0].client_offset = offset;
        s.groups[0].pacer = knee_engine::PacerSpec::Rate {
            rate_hz: Some(100.0),
            profile: None,
            poisson: false,
            max_in_flight: Some(1),
        };
        run(s).unwrap()
    };
    let (a, b) = (shard(0), shard(2));
    let mut m = a.clone();
    m.merge(&b).unwrap();
    let (ga, gb, gm) = (&a.groups[0], &b.groups[0], &m.groups[0]);
    assert!(ga.counts.offered > 0 && gm.counts.open_loop);
    assert_eq!(gm.counts.offered, ga.counts.offered + gb.counts.offered);
    assert_eq!(gm.counts.late, ga.counts.late + gb.counts.late);
    assert_eq!(gm.counts.dropped, ga.counts.dropped + gb.counts.dropped);
    assert_eq!(
        gm.latency_uncorrected.len(),
        ga.latency_uncorrected.len() + gb.latency_uncorrected.len()
    );
    assert_eq!(ShardResult::from_bytes(&m.to_bytes()).unwrap(), m);
    // Bytes of another format version are refused with both versions named.
    let mut old: serde_json::Value = serde_json::from_slice(&a.to_bytes()).unwrap();
    old["version"] = json!(1);
    let e = ShardResult::from_bytes(old.to_string().as_bytes()).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("the result has format version 1, this engine reads version {FORMAT_VERSION}")
    );
}

/// A shard that started late (it joined after the common start) has its intervals added to the ones they happened
/// in: `merge_at` with its lag; one that started earlier moves this one's intervals on.
#[test]
fn a_late_shards_series_is_placed_by_its_start() {
    let server = TestServer::start(ServerOpts::default());
    let mut s = one_group(2, json!({"duration_ms": 1000}), http(&server.url()));
    s.interval_ms = 250;
    let a = run(s).unwrap();
    let ticks = |r: &ShardResult| r.groups[0].series.iter().map(|t| t.succeeded).collect::<Vec<u64>>();
    let one = ticks(&a);
    assert!(one.len() >= 4 && one.iter().all(|&n| n > 0), "{one:?}");
    let shifted = |by: usize| {
        let mut v = vec![0; by];
        v.extend(&one);
        v
    };
    let add = |x: &[u64], y: &[u64]| {
        let mut v = vec![0; x.len().max(y.len())];
        for (i, n) in x.iter().enumerate() {
            v[i] += n;
        }
        for (i, n) in y.iter().enumerate() {
            v[i] += n;
        }
        v
    };
    let mut late = a.clone();
    late.merge_at(&a, 0.55).unwrap(); // 2.2 intervals: the nearest, 2
    assert_eq!(ticks(&late), add(&one, &shifted(2)));
    let mut early = a.clone();
    early.merge_at(&a, -0.55).unwrap();
    assert_eq!(ticks(&early), add(&shifted(2), &one));
    let mut together = a.clone();
    together.merge(&a).unwrap();
    assert_eq!(ticks(&together), add(&one, &one));
    assert_eq!(
        late.groups[0].counts.outcomes.succeeded,
        2 * a.groups[0].counts.outcomes.succeeded
    );
}
