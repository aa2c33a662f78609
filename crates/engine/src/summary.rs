//! The summary of a result (docs/engine-spec.md, "Result"): typed structs, serialized to JSON for
//! Python, whose model (`knee.model.engine_summary.EngineSummary`) a test holds field by field against these.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::class::ErrorClass;
use crate::counts::{class_map, GroupCounts, RequestCounts};
use crate::data::DataUse;
use crate::histo;
use crate::result::{GroupResult, ShardResult, ShardSpan};

/// Latency figures of one histogram, in microseconds (all zero when nothing was recorded).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct LatencySummary {
    pub count: u64,
    pub min: u64,
    pub mean: f64,
    pub stdev: f64,
    pub p50: u64,
    pub p90: u64,
    pub p95: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

impl LatencySummary {
    pub fn of(h: &Histogram<u64>) -> LatencySummary {
        if h.is_empty() {
            return LatencySummary::default();
        }
        LatencySummary {
            count: h.len(),
            min: h.min(),
            mean: h.mean(),
            stdev: h.stdev(),
            p50: h.value_at_quantile(0.50),
            p90: h.value_at_quantile(0.90),
            p95: h.value_at_quantile(0.95),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
        }
    }
}

/// One interval of a group's series.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct SeriesPoint {
    /// Seconds from the start of the measurement to the start of the interval.
    pub t: f64,
    pub succeeded: u64,
    pub failed: u64,
    pub hung: u64,
    /// Open loop: arrivals meant to start in the interval (0 in closed loop), and of those the late (`lagged`: of them,
    /// those issued while a client was free, knee's own lag) and the dropped.
    pub offered: u64,
    pub late: u64,
    pub lagged: u64,
    pub dropped: u64,
    /// The successes' latency in the interval: its median and 99th percentile (null: none succeeded), and its
    /// buckets as (bucket, count) (buckets.rs: a sixteenth of an octave each), to read a run of intervals.
    pub p50_us: Option<u64>,
    pub p99_us: Option<u64>,
    pub latency: Vec<(u16, u32)>,
    /// The interval's failures by class (classes without any left out).
    pub failures: BTreeMap<String, u64>,
}

/// Failures of one class with one normalised message.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ReasonSummary {
    pub class: &'static str,
    pub key: String,
    pub sample: String,
    pub count: u64,
}

/// A named step's durations (worker clients: connect, auth …), beside the operation's total.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct StepSummary {
    pub name: String,
    pub latency_us: LatencySummary,
}

/// One request of a group's mix.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct RequestSummary {
    #[serde(flatten)]
    pub counts: RequestCounts,
    /// succeeded + failed + hung + abandoned.
    pub started: u64,
    pub latency_us: LatencySummary,
    pub failed_latency_us: LatencySummary,
    /// As the group's `percentiles`.
    pub percentiles: Vec<(f64, u64)>,
}

/// One group's figures.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct GroupSummary {
    /// Name, kind, clients and counts, as the wire form carries them (flattened: their keys stand
    /// beside the others).
    #[serde(flatten)]
    pub counts: GroupCounts,
    /// succeeded + failed + hung + abandoned.
    pub started: u64,
    /// Up to 5 messages per class (the most frequent reasons' samples).
    pub error_samples: BTreeMap<String, Vec<String>>,
    /// Failures by class and normalised message, most frequent first.
    pub reasons: Vec<ReasonSummary>,
    /// Succeeded operations' latency (its count is `succeeded`).
    pub latency_us: LatencySummary,
    /// Failed operations' latency (its count is `failed`).
    pub failed_latency_us: LatencySummary,
    /// Every operation that connected, succeeded or not: the TCP connect.
    pub connect_us: LatencySummary,
    /// Every operation that completed a TLS handshake, succeeded or not (resumed ones: `tls_resumed`).
    pub tls_us: LatencySummary,
    /// Every HTTP operation that received a response head, succeeded or not.
    pub ttfb_us: LatencySummary,
    pub latency_uncorrected_us: LatencySummary,
    pub processing_us: LatencySummary,
    /// Open loop: offered arrivals per measured second (None in closed loop).
    pub offered_rate_hz: Option<f64>,
    /// (succeeded + failed + hung) per measured second.
    pub achieved_rate_hz: f64,
    /// `[percent, µs]` of succeeded operations' latency at 50, 66, 75, 80, 90, 95, 98, 99, 99.9,
    /// 99.99 and 100 %; empty when nothing succeeded.
    pub percentiles: Vec<(f64, u64)>,
    pub series: Vec<SeriesPoint>,
    /// Worker clients' named steps, in order of first appearance.
    pub steps: Vec<StepSummary>,
    /// A request mix's requests, in the mix's order (empty without a mix).
    pub requests: Vec<RequestSummary>,
}

/// A shard's figures.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Summary {
    #[serde(flatten)]
    pub span: ShardSpan,
    pub groups: Vec<GroupSummary>,
    /// What each data source did.
    pub data: Vec<DataUse>,
}

/// Operations per second over `elapsed_s` (0 when nothing elapsed).
fn rate(n: u64, elapsed_s: f64) -> f64 {
    if elapsed_s > 0.0 {
        n as f64 / elapsed_s
    } else {
        0.0
    }
}

impl GroupSummary {
    pub fn of(g: &GroupResult, interval_s: f64) -> GroupSummary {
        let c = &g.counts;
        let samples: Vec<Vec<String>> = ErrorClass::ALL.iter().map(|c| g.error_samples(*c)).collect();
        let mut reasons: Vec<ReasonSummary> = g
            .reasons
            .list
            .iter()
            .map(|r| ReasonSummary {
                class: r.class.as_str(),
                key: r.key.clone(),
                sample: r.sample.clone(),
                count: r.count,
            })
            .collect();
        reasons.sort_by(|a, b| {
            b.count
                .cmp(&a.count)
                .then_with(|| (a.class, &a.key).cmp(&(b.class, &b.key)))
        });
        GroupSummary {
            counts: g.counts.clone(),
            started: g.counts.outcomes.started(),
            error_samples: class_map(&samples, |v| !v.is_empty()),
            reasons,
            latency_us: LatencySummary::of(&g.latency),
            failed_latency_us: LatencySummary::of(&g.failed_latency),
            connect_us: LatencySummary::of(&g.connect),
            tls_us: LatencySummary::of(&g.tls),
            ttfb_us: LatencySummary::of(&g.ttfb),
            latency_uncorrected_us: LatencySummary::of(&g.latency_uncorrected),
            processing_us: LatencySummary::of(&g.processing),
            offered_rate_hz: c.open_loop.then(|| rate(c.offered, c.elapsed_s)),
            achieved_rate_hz: rate(c.outcomes.total(), c.elapsed_s),
            percentiles: histo::table(&g.latency),
            series: g
                .series
                .iter()
                .enumerate()
                .map(|(i, t)| SeriesPoint {
                    t: i as f64 * interval_s,
                    succeeded: t.succeeded,
                    failed: t.failed,
                    hung: t.hung,
                    offered: t.offered,
                    late: t.late,
                    lagged: t.lagged,
                    dropped: t.dropped,
                    p50_us: t.latency.percentile(50.0),
                    p99_us: t.latency.percentile(99.0),
                    latency: t.latency.sparse(),
                    failures: class_map(&t.classes, |&n| n > 0),
                })
                .collect(),
            steps: g
                .steps
                .iter()
                .map(|(name, h)| StepSummary {
                    name: name.clone(),
                    latency_us: LatencySummary::of(h),
                })
                .collect(),
            requests: (g.requests.iter())
                .map(|r| RequestSummary {
                    counts: r.counts.clone(),
                    started: r.counts.outcomes.started(),
                    latency_us: LatencySummary::of(&r.latency),
                    failed_latency_us: LatencySummary::of(&r.failed_latency),
                    percentiles: histo::table(&r.latency),
                })
                .collect(),
        }
    }
}

impl ShardResult {
    /// The typed summary.
    pub fn summary(&self) -> Summary {
        Summary {
            span: self.span.clone(),
            groups: self
                .groups
                .iter()
                .map(|g| GroupSummary::of(g, self.span.interval_s))
                .collect(),
            data: self.data.clone(),
        }
    }

    /// The summary as JSON: counts, latency stats in µs, percentile table, series, per-client counts.
    pub fn summary_json(&self) -> String {
        serde_json::to_string(&self.summary()).expect("a summary is always serializable")
    }
}
