//! The shard result: plain, serializable, mergeable data.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::buckets::{add_counts, Buckets};
use crate::class::ErrorClass;
use crate::counts::{GroupCounts, RequestCounts};
use crate::data::DataUse;
use crate::error::{DecodeError, MergeError};
use crate::histo;
use crate::reason::{Reason, Reasons};

/// Format version of `to_bytes`.
pub const FORMAT_VERSION: u32 = 4;
/// Sampled error messages per class in the summary's `error_samples`.
pub const MAX_SAMPLES: usize = 5;

/// Which histogram of a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// Whole operation (HTTP: including the full body), of succeeded operations.
    Latency,
    /// Whole operation, of failed operations (kept apart: a failure that comes at once must not pass
    /// for a fast service).
    FailedLatency,
    /// TCP connect, when the operation opened a connection.
    Connect,
    /// TLS handshake, when the operation opened a TLS connection and the handshake completed.
    Tls,
    /// HTTP time to first byte: request handed to the connection → response head received.
    Ttfb,
    /// Whole operation less its connect time (ab's "Processing"), from the actual start; succeeded
    /// operations.
    Processing,
    /// Open loop: whole operation from its *actual* start (what a closed-loop tool would report;
    /// `Latency` counts from the intended start), of succeeded operations. Empty in closed loop.
    Uncorrected,
}

impl Metric {
    pub fn from_name(s: &str) -> Option<Metric> {
        match s {
            "latency" => Some(Metric::Latency),
            "failed_latency" => Some(Metric::FailedLatency),
            "connect" => Some(Metric::Connect),
            "tls" => Some(Metric::Tls),
            "ttfb" => Some(Metric::Ttfb),
            "latency_uncorrected" => Some(Metric::Uncorrected),
            "processing" => Some(Metric::Processing),
            _ => None,
        }
    }
}

/// One interval of a group's series.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tick {
    /// Operations that ended in the interval, by outcome.
    pub succeeded: u64,
    pub failed: u64,
    pub hung: u64,
    /// Open loop: arrivals meant to start in the interval (by intended start; dropped ones included).
    #[serde(default)]
    pub offered: u64,
    /// Open loop: of those, the ones that started late and the ones dropped (by intended start, as `offered`).
    #[serde(default)]
    pub late: u64,
    /// Of the late, those issued while a client was free for them (knee's own lag, `Counts::lagged`).
    #[serde(default)]
    pub lagged: u64,
    #[serde(default)]
    pub dropped: u64,
    /// The latency of the operations that succeeded in the interval.
    #[serde(default)]
    pub latency: Buckets,
    /// The failures by class (`ErrorClass::index`; empty: none failed).
    #[serde(default)]
    pub classes: Vec<u64>,
}

impl Tick {
    fn add(&mut self, o: &Tick) {
        self.succeeded += o.succeeded;
        self.failed += o.failed;
        self.hung += o.hung;
        self.offered += o.offered;
        self.late += o.late;
        self.lagged += o.lagged;
        self.dropped += o.dropped;
        self.latency.add(&o.latency);
        add_counts(&mut self.classes, &o.classes);
    }

    /// Count a failure of `class` in the interval.
    pub fn fail(&mut self, class: ErrorClass) {
        self.failed += 1;
        if self.classes.is_empty() {
            self.classes = vec![0; ErrorClass::COUNT];
        }
        self.classes[class.index()] += 1;
    }
}

/// One group's measurement: its counts, and what is measured beside them.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupResult {
    /// Name, kind, clients and every count (succeeded, failed …, per client).
    pub counts: GroupCounts,
    /// Failures grouped by class and normalised message, with a sample each.
    pub reasons: Reasons,
    /// Succeeded operations' latency.
    pub latency: Histogram<u64>,
    /// Failed operations' latency (hung ones are in neither: they ran until their timeout).
    pub failed_latency: Histogram<u64>,
    /// Every operation that connected (succeeded or not): the TCP connect.
    pub connect: Histogram<u64>,
    /// Every operation that completed a TLS handshake (succeeded or not).
    pub tls: Histogram<u64>,
    /// Every HTTP operation that received a response head (succeeded or not).
    pub ttfb: Histogram<u64>,
    /// Succeeded operations' latency less connect time, from the actual start (ab's "Processing").
    pub processing: Histogram<u64>,
    /// Open loop: succeeded operations' latency from the actual start (empty in closed loop).
    pub latency_uncorrected: Histogram<u64>,
    pub series: Vec<Tick>,
    /// Worker clients: the durations of the named steps their programs reported (connect, auth …) in
    /// succeeded and failed operations, one histogram per name, in order of first appearance (at most `MAX_STEPS`).
    pub steps: Vec<(String, Histogram<u64>)>,
    /// A request mix: each request's counts and latency, in the mix's order (empty without a mix).
    pub requests: Vec<RequestResult>,
}

/// One request of a mix: its counts, its succeeded and its failed operations' latency (2 significant digits:
/// a mix may hold a thousand requests, a targets file's).
#[derive(Clone, Debug, PartialEq)]
pub struct RequestResult {
    pub counts: RequestCounts,
    pub latency: Histogram<u64>,
    pub failed_latency: Histogram<u64>,
}

impl RequestResult {
    pub fn new(name: &str) -> RequestResult {
        RequestResult {
            counts: RequestCounts {
                name: name.to_string(),
                ..RequestCounts::default()
            },
            latency: histo::new_coarse(),
            failed_latency: histo::new_coarse(),
        }
    }
}

/// Distinct step names kept per group (later names are not recorded).
pub const MAX_STEPS: usize = 32;

impl GroupResult {
    pub fn new(name: &str, kind: &str, clients: u64) -> GroupResult {
        GroupResult {
            counts: GroupCounts::new(name, kind, clients),
            reasons: Reasons::default(),
            latency: histo::new_histogram(),
            failed_latency: histo::new_histogram(),
            connect: histo::new_histogram(),
            tls: histo::new_histogram(),
            ttfb: histo::new_histogram(),
            processing: histo::new_histogram(),
            latency_uncorrected: histo::new_histogram(),
            series: Vec::new(),
            steps: Vec::new(),
            requests: Vec::new(),
        }
    }

    /// The histogram of step `name`, created on first use (None past `MAX_STEPS` names).
    pub(crate) fn step(&mut self, name: &str) -> Option<&mut Histogram<u64>> {
        match self.steps.iter().position(|(n, _)| n == name) {
            Some(i) => Some(&mut self.steps[i].1),
            None if self.steps.len() < MAX_STEPS => {
                self.steps.push((name.to_string(), histo::new_histogram()));
                self.steps.last_mut().map(|(_, h)| h)
            }
            None => None,
        }
    }

    pub fn histogram(&self, metric: Metric) -> &Histogram<u64> {
        match metric {
            Metric::Latency => &self.latency,
            Metric::FailedLatency => &self.failed_latency,
            Metric::Connect => &self.connect,
            Metric::Tls => &self.tls,
            Metric::Ttfb => &self.ttfb,
            Metric::Processing => &self.processing,
            Metric::Uncorrected => &self.latency_uncorrected,
        }
    }

    /// Failures of one class.
    pub fn failures_of(&self, class: ErrorClass) -> u64 {
        self.counts.failures[class.index()]
    }

    /// Up to `MAX_SAMPLES` sampled messages of one class.
    pub fn error_samples(&self, class: ErrorClass) -> Vec<String> {
        self.reasons.samples(class, MAX_SAMPLES)
    }

    /// Add the counts, histograms and series of `o` (same group, other clients or other threads).
    /// `per_client` and `hung_clients` are concatenated.
    pub(crate) fn absorb(&mut self, o: &GroupResult) -> Result<(), MergeError> {
        self.absorb_at(o, 0)
    }

    /// `absorb`, `o`'s series `shift` intervals behind this one's (a shard that started later).
    fn absorb_at(&mut self, o: &GroupResult, shift: usize) -> Result<(), MergeError> {
        self.check_kind(o)?;
        self.counts.absorb(&o.counts);
        self.add_measured(o, shift)
    }

    /// Add `later`, the next window of the same group's clients (a cut): the counts add (each client's to its
    /// own, the elapsed times too) and the series goes on where this one ends.
    /// `dt`: the series' interval (s).
    pub(crate) fn follow(&mut self, later: &GroupResult, dt: f64) -> Result<(), MergeError> {
        self.check_kind(later)?;
        let shift = if dt > 0.0 {
            (self.counts.elapsed_s / dt).round() as usize
        } else {
            self.series.len()
        };
        self.counts.follow(&later.counts);
        self.add_measured(later, shift)
    }

    fn check_kind(&self, o: &GroupResult) -> Result<(), MergeError> {
        if self.counts.kind != o.counts.kind {
            return Err(MergeError::Kind {
                name: self.counts.name.clone(),
                a: self.counts.kind.clone(),
                b: o.counts.kind.clone(),
            });
        }
        Ok(())
    }

    /// The histograms, reasons, series (`o`'s interval i added to this one's `shift + i`), requests and steps of
    /// `o` added to this one's.
    fn add_measured(&mut self, o: &GroupResult, shift: usize) -> Result<(), MergeError> {
        let name = &self.counts.name;
        let herr = |e: hdrhistogram::AdditionError| MergeError::Histogram(name.clone(), format!("{e:?}"));
        self.latency.add(&o.latency).map_err(herr)?;
        self.failed_latency.add(&o.failed_latency).map_err(herr)?;
        self.connect.add(&o.connect).map_err(herr)?;
        self.tls.add(&o.tls).map_err(herr)?;
        self.ttfb.add(&o.ttfb).map_err(herr)?;
        self.latency_uncorrected.add(&o.latency_uncorrected).map_err(herr)?;
        self.processing.add(&o.processing).map_err(herr)?;
        self.reasons.absorb(&o.reasons);
        if self.series.len() < shift + o.series.len() {
            self.series.resize(shift + o.series.len(), Tick::default());
        }
        for (a, b) in self.series[shift..].iter_mut().zip(&o.series) {
            a.add(b);
        }
        for r in &o.requests {
            match self.requests.iter_mut().find(|m| m.counts.name == r.counts.name) {
                Some(m) => {
                    m.counts.absorb(&r.counts);
                    let herr =
                        |e: hdrhistogram::AdditionError| MergeError::Histogram(m.counts.name.clone(), format!("{e:?}"));
                    m.latency.add(&r.latency).map_err(herr)?;
                    m.failed_latency.add(&r.failed_latency).map_err(herr)?;
                }
                None => self.requests.push(r.clone()),
            }
        }
        for (name, h) in &o.steps {
            let group = self.counts.name.clone();
            if let Some(mine) = self.step(name) {
                mine.add(h)
                    .map_err(|e| MergeError::Histogram(group, format!("{e:?}")))?;
            }
        }
        Ok(())
    }
}

/// The result of one shard: every group's measurement.
#[derive(Clone, Debug, PartialEq)]
pub struct ShardResult {
    pub span: ShardSpan,
    pub groups: Vec<GroupResult>,
    /// What each data source did (rows handed out, where a queue stopped, when it ran out).
    pub data: Vec<DataUse>,
}

#[derive(Serialize, Deserialize)]
struct WireRequest {
    #[serde(flatten)]
    counts: RequestCounts,
    latency: String,
    failed_latency: String,
}

#[derive(Serialize, Deserialize)]
struct WireGroup {
    #[serde(flatten)]
    counts: GroupCounts,
    reasons: Vec<WireReason>,
    latency: String,
    failed_latency: String,
    connect: String,
    /// Absent in results of engines before the TLS phase was timed apart (read as empty).
    #[serde(default)]
    tls: String,
    ttfb: String,
    latency_uncorrected: String,
    processing: String,
    series: Vec<Tick>,
    steps: Vec<(String, String)>,
    #[serde(default)]
    requests: Vec<WireRequest>,
}

#[derive(Serialize, Deserialize)]
struct WireReason {
    class: String,
    key: String,
    sample: String,
    count: u64,
}

/// When a shard ran, written as keys of its own wherever a shard is (its bytes, its summary).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShardSpan {
    /// Unix time of the common start instant.
    pub started_unix: f64,
    /// Wall seconds from the start to the end of the shard.
    pub elapsed_s: f64,
    /// The series' interval.
    pub interval_s: f64,
    /// True when the run was ended by `stop()` before its stop rules.
    pub stopped: bool,
    /// What of the shard failed in knee itself (a client's task or a runtime thread that panicked: a defect of
    /// knee), in words: what ran without it is counted, what it would have run is not. Empty: nothing.
    #[serde(default)]
    pub lost: Vec<String>,
}

impl ShardSpan {
    /// Two shards' spans as one run's: the earliest start, the longest run, stopped if either was.
    fn absorb(&mut self, o: &ShardSpan) {
        self.started_unix = self.started_unix.min(o.started_unix);
        self.elapsed_s = self.elapsed_s.max(o.elapsed_s);
        self.stopped |= o.stopped;
        self.lost.extend(o.lost.iter().cloned());
    }
}

#[derive(Serialize, Deserialize)]
struct Wire {
    version: u32,
    #[serde(flatten)]
    span: ShardSpan,
    groups: Vec<WireGroup>,
    #[serde(default)]
    data: Vec<DataUse>,
}

impl ShardResult {
    /// Lossless serialization (JSON with histograms as base64 of V2 deflate).
    pub fn to_bytes(&self) -> Vec<u8> {
        let wire = Wire {
            version: FORMAT_VERSION,
            span: self.span.clone(),
            groups: self
                .groups
                .iter()
                .map(|g| WireGroup {
                    counts: g.counts.clone(),
                    reasons: g
                        .reasons
                        .list
                        .iter()
                        .map(|r| WireReason {
                            class: r.class.as_str().to_string(),
                            key: r.key.clone(),
                            sample: r.sample.clone(),
                            count: r.count,
                        })
                        .collect(),
                    latency: histo::encode_b64(&g.latency),
                    failed_latency: histo::encode_b64(&g.failed_latency),
                    connect: histo::encode_b64(&g.connect),
                    tls: histo::encode_b64(&g.tls),
                    ttfb: histo::encode_b64(&g.ttfb),
                    latency_uncorrected: histo::encode_b64(&g.latency_uncorrected),
                    processing: histo::encode_b64(&g.processing),
                    series: g.series.clone(),
                    steps: g.steps.iter().map(|(n, h)| (n.clone(), histo::encode_b64(h))).collect(),
                    requests: (g.requests.iter())
                        .map(|r| WireRequest {
                            counts: r.counts.clone(),
                            latency: histo::encode_b64(&r.latency),
                            failed_latency: histo::encode_b64(&r.failed_latency),
                        })
                        .collect(),
                })
                .collect(),
            data: self.data.clone(),
        };
        serde_json::to_vec(&wire).expect("the result is always serializable")
    }

    /// Inverse of `to_bytes`.
    pub fn from_bytes(b: &[u8]) -> Result<ShardResult, DecodeError> {
        let wire: Wire = serde_json::from_slice(b)?;
        if wire.version != FORMAT_VERSION {
            return Err(DecodeError::Version {
                found: wire.version,
                expected: FORMAT_VERSION,
            });
        }
        let mut groups = Vec::with_capacity(wire.groups.len());
        for w in wire.groups {
            let name = w.counts.name.clone();
            let hist = |field: &str, s: &str| {
                histo::decode_b64(s).map_err(|e| DecodeError::Histogram(format!("{name}.{field}"), e))
            };
            let mut g = GroupResult {
                latency: hist("latency", &w.latency)?,
                failed_latency: hist("failed_latency", &w.failed_latency)?,
                connect: hist("connect", &w.connect)?,
                tls: if w.tls.is_empty() {
                    histo::new_histogram()
                } else {
                    hist("tls", &w.tls)?
                },
                ttfb: hist("ttfb", &w.ttfb)?,
                latency_uncorrected: hist("latency_uncorrected", &w.latency_uncorrected)?,
                processing: hist("processing", &w.processing)?,
                counts: w.counts,
                reasons: Reasons::default(),
                series: w.series,
                steps: Vec::with_capacity(w.steps.len()),
                requests: Vec::with_capacity(w.requests.len()),
            };
            for r in w.requests {
                let n = &r.counts.name;
                g.requests.push(RequestResult {
                    latency: hist(&format!("requests.{n}.latency"), &r.latency)?,
                    failed_latency: hist(&format!("requests.{n}.failed_latency"), &r.failed_latency)?,
                    counts: r.counts,
                });
            }
            for r in w.reasons {
                let class = ErrorClass::from_name(&r.class).ok_or(DecodeError::Class(r.class))?;
                g.reasons.list.push(Reason {
                    class,
                    key: r.key,
                    sample: r.sample,
                    count: r.count,
                });
            }
            for (step, b64) in &w.steps {
                g.steps.push((step.clone(), hist(&format!("steps.{step}"), b64)?));
            }
            groups.push(g);
        }
        Ok(ShardResult {
            span: wire.span,
            groups,
            data: wire.data,
        })
    }

    /// Merge another shard's result into this one; groups are matched by name (new ones appended). Their series
    /// add interval by interval: shards that started together (`merge_at` places one that did not).
    pub fn merge(&mut self, other: &ShardResult) -> Result<(), MergeError> {
        self.merge_at(other, 0.0)
    }

    /// `merge`, `other` having started `lag_s` seconds after this one (before it, when negative), as one clock
    /// measured them (shards on machines whose clocks differ: the driver's). A shard that started late (it joined
    /// after the common start) has its intervals added to the ones they happened in, not to the first ones; the
    /// series begins at the earlier start.
    pub fn merge_at(&mut self, other: &ShardResult, lag_s: f64) -> Result<(), MergeError> {
        let dt = self.span.interval_s;
        if (dt - other.span.interval_s).abs() > 1e-9 {
            return Err(MergeError::Interval(dt, other.span.interval_s));
        }
        let ticks = if dt > 0.0 && lag_s.is_finite() {
            (lag_s.abs() / dt).round() as usize
        } else {
            0
        };
        let (mine, theirs) = if lag_s < 0.0 { (ticks, 0) } else { (0, ticks) };
        if mine > 0 {
            for g in &mut self.groups {
                g.series.splice(0..0, std::iter::repeat_with(Tick::default).take(mine));
            }
        }
        for og in &other.groups {
            match self.groups.iter_mut().find(|g| g.counts.name == og.counts.name) {
                Some(g) => g.absorb_at(og, theirs)?,
                None => {
                    let mut g = og.clone();
                    g.series
                        .splice(0..0, std::iter::repeat_with(Tick::default).take(theirs));
                    self.groups.push(g);
                }
            }
        }
        for od in &other.data {
            match self.data.iter_mut().find(|d| d.name == od.name) {
                Some(d) => d.absorb(od),
                None => self.data.push(od.clone()),
            }
        }
        self.span.absorb(&other.span);
        Ok(())
    }

    /// Append `later`, the next window of the same shard (`Engine::cut`, then the rest at its end): counts and
    /// histograms add, each group's series goes on where its measured time so far ends, the elapsed times add. The
    /// windows of a shard followed one by one are its whole run, as one result.
    pub fn follow(&mut self, later: &ShardResult) -> Result<(), MergeError> {
        if (self.span.interval_s - later.span.interval_s).abs() > 1e-9 {
            return Err(MergeError::Interval(self.span.interval_s, later.span.interval_s));
        }
        for lg in &later.groups {
            match self.groups.iter_mut().find(|g| g.counts.name == lg.counts.name) {
                Some(g) => g.follow(lg, self.span.interval_s)?,
                None => self.groups.push(lg.clone()),
            }
        }
        self.data.clone_from(&later.data); // a source's use so far: the later window's is the whole run's
        self.span.started_unix = self.span.started_unix.min(later.span.started_unix);
        self.span.elapsed_s += later.span.elapsed_s;
        self.span.stopped = later.span.stopped;
        self.span.lost.clone_from(&later.span.lost); // the shard's whole list so far
        Ok(())
    }

    /// The V2 deflate encoding of one group's histogram (values in µs).
    pub fn histogram_v2(&self, group: usize, metric: Metric) -> Option<Vec<u8>> {
        self.groups.get(group).map(|g| histo::encode_v2(g.histogram(metric)))
    }

    /// A group by name.
    pub fn group(&self, name: &str) -> Option<&GroupResult> {
        self.groups.iter().find(|g| g.counts.name == name)
    }
}
