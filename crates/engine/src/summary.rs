//! The summary JSON of a result (docs/engine-spec.md, "Result").

use serde_json::{json, Value};

use crate::histo;
use crate::result::{class_map, GroupResult, ShardResult};

/// Operations per second over `elapsed_s` (0 when nothing elapsed).
fn rate(n: u64, elapsed_s: f64) -> f64 {
    if elapsed_s > 0.0 {
        n as f64 / elapsed_s
    } else {
        0.0
    }
}

fn group_json(g: &GroupResult, interval_s: f64) -> Value {
    let series: Vec<Value> = g
        .series
        .iter()
        .enumerate()
        .map(|(i, t)| json!({"t": i as f64 * interval_s, "succeeded": t.succeeded, "failed": t.failed, "hung": t.hung}))
        .collect();
    json!({
        "name": g.name,
        "kind": g.kind,
        "clients": g.clients,
        "succeeded": g.succeeded,
        "failed": g.failed,
        "hung": g.hung,
        "warmup_ops": g.warmup_ops,
        "elapsed_s": g.elapsed_s,
        "failures": class_map(&g.failures, |n| *n > 0),
        "error_samples": class_map(&g.error_samples, |v| !v.is_empty()),
        "latency_us": histo::stats(&g.latency),
        "connect_us": histo::stats(&g.connect),
        "ttfb_us": histo::stats(&g.ttfb),
        "latency_uncorrected_us": histo::stats(&g.latency_uncorrected),
        "processing_us": histo::stats(&g.processing),
        "open_loop": g.open_loop,
        "offered": g.offered,
        "late": g.late,
        "dropped": g.dropped,
        "offered_rate_hz": if g.open_loop { json!(rate(g.offered, g.elapsed_s)) } else { Value::Null },
        "achieved_rate_hz": rate(g.succeeded + g.failed + g.hung, g.elapsed_s),
        "percentiles": histo::table(&g.latency),
        "series": series,
        "per_client": g.per_client,
        "hung_clients": g.hung_clients,
    })
}

impl ShardResult {
    /// The summary JSON: counts, latency stats in µs, percentile table, series, per-client counts.
    pub fn summary_json(&self) -> String {
        let groups: Vec<Value> = self.groups.iter().map(|g| group_json(g, self.interval_s)).collect();
        json!({
            "elapsed_s": self.elapsed_s,
            "started_unix": self.started_unix,
            "interval_s": self.interval_s,
            "stopped": self.stopped,
            "groups": groups,
        })
        .to_string()
    }
}
