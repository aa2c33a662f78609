//! What a group counted, declared once: `Outcomes` (how operations ended) inside `GroupCounts`
//! (the group's identity and every count). A `GroupResult` holds its `GroupCounts`; the wire form
//! (`to_bytes`), the summary and the live snapshot carry them flattened, so their keys stand beside
//! the others (Python's mirror: `knee.model.base.Outcomes`, `Counts`, `GroupIdentity`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::class::ErrorClass;

/// How many operations ended which way. Every operation that started ended as exactly one of
/// these: `started = succeeded + failed + hung + abandoned` (DESIGN.md's accounting identity).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcomes {
    pub succeeded: u64,
    pub failed: u64,
    /// Exceeded their timeout and were killed or abandoned (not counted as failed).
    pub hung: u64,
    /// Started but never finished: in flight when the window closed, the run was stopped, or a
    /// background group's others ended.
    pub abandoned: u64,
}

impl Outcomes {
    /// Operations that ended: succeeded + failed + hung.
    pub fn total(&self) -> u64 {
        self.succeeded + self.failed + self.hung
    }

    /// Every operation that started: succeeded + failed + hung + abandoned (warm-up ones aside).
    pub fn started(&self) -> u64 {
        self.total() + self.abandoned
    }

    /// Pool another's counts into these.
    pub fn add(&mut self, o: &Outcomes) {
        self.succeeded += o.succeeded;
        self.failed += o.failed;
        self.hung += o.hung;
        self.abandoned += o.abandoned;
    }
}

/// What a group is and what it counted: the one list of these fields, held by `GroupResult` and
/// carried flattened by the wire form (`to_bytes`) and the summary (`GroupSummary`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GroupCounts {
    pub name: String,
    pub kind: String,
    pub clients: u64,
    #[serde(flatten)]
    pub outcomes: Outcomes,
    /// Operations that ended during warm-up (not measured; the service saw them too).
    pub warmup_ops: u64,
    /// Measured seconds (warm-up excluded) until the group's last operation ended.
    pub elapsed_s: f64,
    /// Failures by error class (`ErrorClass::index`); written as a map of the classes with any.
    #[serde(with = "class_counts")]
    pub failures: [u64; ErrorClass::COUNT],
    /// Bytes written and read by completed (succeeded or failed) operations.
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Document bytes of succeeded operations (HTTP bodies, tcp replies, exec files or stdout).
    pub payload_bytes: u64,
    /// WebSocket: data messages written and read by completed operations (absent in older results).
    #[serde(default)]
    pub messages_sent: u64,
    #[serde(default)]
    pub messages_received: u64,
    /// TLS handshakes that resumed an earlier session (of those timed in `tls`; absent in older results).
    #[serde(default)]
    pub tls_resumed: u64,
    /// HTTP/1.1 requests written (whole or in part) on a kept connection the server closed before answering, sent
    /// again on a new one, warm-up included: the server saw from `started + warmup_ops` to that plus `resent`
    /// requests (all of them when it read each before closing: a worker that died on it). Absent in older results.
    #[serde(default)]
    pub resent: u64,
    /// True when the group ran open loop (a target rate).
    pub open_loop: bool,
    /// Open loop: arrivals scheduled with an intended start inside the measured window.
    pub offered: u64,
    /// Open loop: operations that started more than `LATE_AFTER` (10 ms) after their intended start.
    pub late: u64,
    /// Open loop: of `late`, those issued while a client was free for them: knee's own scheduling lagged (its
    /// CPU, its timer), not the service (absent in older results).
    #[serde(default)]
    pub lagged: u64,
    /// Open loop: arrivals never started (over `max_in_flight`, or waited longer than `timeout_ms`).
    pub dropped: u64,
    pub per_client: Vec<u64>,
    pub hung_clients: Vec<u64>,
    /// The data source whose running out ended the group (`on_exhausted = "stop"`), if one did.
    #[serde(default)]
    pub ran_out: Option<String>,
}

/// One request of a group's mix: how its operations ended, failures by class.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestCounts {
    pub name: String,
    #[serde(flatten)]
    pub outcomes: Outcomes,
    #[serde(with = "class_counts")]
    pub failures: [u64; ErrorClass::COUNT],
}

impl RequestCounts {
    pub(crate) fn absorb(&mut self, o: &RequestCounts) {
        self.outcomes.add(&o.outcomes);
        for (a, b) in self.failures.iter_mut().zip(&o.failures) {
            *a += b;
        }
    }
}

impl GroupCounts {
    /// A group that has counted nothing yet.
    pub fn new(name: &str, kind: &str, clients: u64) -> GroupCounts {
        GroupCounts {
            name: name.to_string(),
            kind: kind.to_string(),
            clients,
            ..GroupCounts::default()
        }
    }

    /// Add the counts of `o` (same group, other clients or other threads). `per_client` and
    /// `hung_clients` are concatenated; the elapsed time is the longer one.
    pub(crate) fn absorb(&mut self, o: &GroupCounts) {
        self.open_loop |= o.open_loop;
        self.offered += o.offered;
        self.late += o.late;
        self.lagged += o.lagged;
        self.dropped += o.dropped;
        self.clients += o.clients;
        self.outcomes.add(&o.outcomes);
        self.warmup_ops += o.warmup_ops;
        self.bytes_sent += o.bytes_sent;
        self.bytes_received += o.bytes_received;
        self.payload_bytes += o.payload_bytes;
        self.messages_sent += o.messages_sent;
        self.messages_received += o.messages_received;
        self.tls_resumed += o.tls_resumed;
        self.resent += o.resent;
        self.elapsed_s = self.elapsed_s.max(o.elapsed_s);
        for (a, b) in self.failures.iter_mut().zip(&o.failures) {
            *a += b;
        }
        self.per_client.extend_from_slice(&o.per_client);
        self.hung_clients.extend_from_slice(&o.hung_clients);
        self.hung_clients.sort_unstable();
        self.hung_clients.dedup();
        if self.ran_out.is_none() {
            self.ran_out.clone_from(&o.ran_out);
        }
    }

    /// Add the counts of `later`, a later window of the same clients (the next cut of a running shard): each
    /// client's count adds to its own, the elapsed times add, the clients are the same ones.
    pub(crate) fn follow(&mut self, later: &GroupCounts) {
        let (clients, elapsed_s) = (self.clients.max(later.clients), self.elapsed_s + later.elapsed_s);
        let mut per_client = std::mem::take(&mut self.per_client);
        self.absorb(later);
        if per_client.len() < later.per_client.len() {
            per_client.resize(later.per_client.len(), 0);
        }
        for (a, b) in per_client.iter_mut().zip(&later.per_client) {
            *a += b;
        }
        (self.clients, self.elapsed_s, self.per_client) = (clients, elapsed_s, per_client);
    }
}

/// Per-class values as a map from class name, keeping those that `keep` accepts.
pub(crate) fn class_map<T: Clone>(per_class: &[T], keep: impl Fn(&T) -> bool) -> BTreeMap<String, T> {
    ErrorClass::ALL
        .iter()
        .zip(per_class)
        .filter(|(_, v)| keep(v))
        .map(|(c, v)| (c.as_str().to_string(), v.clone()))
        .collect()
}

/// `GroupCounts::failures` as JSON: `{"status": 2, …}`, classes without any left out.
mod class_counts {
    use std::collections::BTreeMap;

    use serde::de::Error;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::class::ErrorClass;

    pub fn serialize<S: Serializer>(per_class: &[u64; ErrorClass::COUNT], s: S) -> Result<S::Ok, S::Error> {
        super::class_map(per_class, |n| *n > 0).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[u64; ErrorClass::COUNT], D::Error> {
        let mut per_class = [0; ErrorClass::COUNT];
        for (name, n) in BTreeMap::<String, u64>::deserialize(d)? {
            let c = ErrorClass::from_name(&name)
                .ok_or_else(|| D::Error::custom(format!("unknown error class {name:?} in `failures`")))?;
            per_class[c.index()] = n;
        }
        Ok(per_class)
    }
}
