//! The shard spec: what Python hands the engine, as JSON (docs/engine-spec.md). This file holds the shard,
//! its groups, stop rules and pacers and the checks every kind shares; each kind of client's spec is in a
//! file of its own.

use serde::{Deserialize, Serialize};

use crate::error::SpecError;
pub use crate::profile::RateProfile;

mod data;
mod exec;
mod grpc;
mod http;
mod tcp;
mod ws;

pub use data::{DataSpec, OnExhausted, Order, Scope};
pub use exec::{ExecSpec, FileCheck, WorkerSpec};
pub use grpc::GrpcSpec;
pub(crate) use http::{origin, untemplated};
pub use http::{HttpSpec, MixOrder, RequestSpec, TlsSpec};
pub use tcp::TcpSpec;
pub use ws::{WsMode, WsSpec};

/// One shard: client groups started together.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    /// Runtime threads (each a tokio current-thread runtime with its share of the clients); 0 = one
    /// per available core.
    #[serde(default)]
    pub threads: usize,
    /// Granularity of the result's series.
    #[serde(default = "default_interval_ms")]
    pub interval_ms: u64,
    /// Optional common start instant (Unix seconds) so shards on several machines start together.
    pub start_at_unix: Option<f64>,
    /// Optional file every measured operation is written to as it goes (crate::oplog).
    pub operations_log: Option<String>,
    /// Seeds every random choice (request mixes, random and shuffled rows, the templates' random values):
    /// the same seed replays the same choices.
    #[serde(default)]
    pub seed: u64,
    /// Data sources the groups' templates read (`${NAME.COLUMN}`).
    #[serde(default)]
    pub data: Vec<DataSpec>,
    pub groups: Vec<GroupSpec>,
}

/// One client group: its clients, stop rule, pacing and operation.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GroupSpec {
    pub name: String,
    pub clients: u64,
    pub stop: StopRule,
    #[serde(default)]
    pub think_ms: u64,
    /// Closed loop: a further pause after a *failed* operation only (a retrying client's back-off),
    /// added to `think_ms`; succeeded and hung operations are followed by `think_ms` alone.
    #[serde(default)]
    pub think_on_failure_ms: u64,
    /// Closed loop: how each think time is drawn, `think_ms` its mean (default: `think_ms` every time).
    #[serde(default)]
    pub think_random: ThinkRandom,
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    #[serde(default)]
    pub warmup_ms: u64,
    /// Index of this shard's first client in the whole group (for `${client}`, `per_client`, `hung_clients`).
    #[serde(default)]
    pub client_offset: u64,
    /// The whole group's clients over every shard of a distributed run (None: this shard's `clients`, from 0). An
    /// open loop's arrivals (a profile's, a constant rate's) go by turns over all of them, so the shards' arrivals
    /// together are the group's, interleaved.
    #[serde(default)]
    pub group_clients: Option<u64>,
    #[serde(default)]
    pub pacer: PacerSpec,
    pub client: ClientSpec,
}

/// When a group stops. Time-based stops count from the end of warm-up.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum StopRule {
    /// Operations over the whole group.
    Total(u64),
    /// Operations per client.
    PerClient(u64),
    /// Measured run time.
    DurationMs(u64),
    /// `{"while_others": true}`: a background group (baseload) that runs until every other group
    /// of the shard has ended, then stops; operations in flight then are abandoned, as on `stop()`.
    /// In a shard of background groups only, they run until `stop()` (and `cut()` takes windows).
    WhileOthers(bool),
}

impl StopRule {
    /// A background group, ended by the others' end.
    pub fn is_background(&self) -> bool {
        matches!(self, StopRule::WhileOthers(_))
    }
}

/// How operations are paced.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum PacerSpec {
    /// Each client starts its next operation when the previous one ends (+ think time). With a `profile`, the
    /// clients running follow it over time: the group's client number k (1-based, over every shard) runs while
    /// the profile is at least k, and one whose number the profile falls below finishes its operation and waits
    /// until it rises again, or out the group's duration if it never does (docs/load-shapes.md).
    Closed {
        #[serde(default)]
        profile: Option<RateProfile>,
    },
    /// Open loop: `rate_hz` arrivals per second over the group (constant gaps, or exponential ones
    /// with `poisson`), each handed to an idle one of the group's `clients` slots; latency is
    /// measured from the intended start. An arrival that finds `max_in_flight` operations waiting
    /// or running, or waits longer than `timeout_ms` for a slot, is dropped (counted). With a
    /// `profile` instead of `rate_hz`, the rate follows it (docs/load-shapes.md).
    Rate {
        #[serde(default)]
        rate_hz: Option<f64>,
        #[serde(default)]
        profile: Option<RateProfile>,
        #[serde(default)]
        poisson: bool,
        max_in_flight: Option<u64>,
    },
}

impl Default for PacerSpec {
    fn default() -> PacerSpec {
        PacerSpec::Closed { profile: None }
    }
}

/// The operation a group's clients run.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[allow(clippy::large_enum_variant)] // one per group, built once: its size costs nothing
pub enum ClientSpec {
    Http(HttpSpec),
    Tcp(TcpSpec),
    Exec(ExecSpec),
    Worker(WorkerSpec),
    Websocket(WsSpec),
}

impl ClientSpec {
    pub fn kind(&self) -> &'static str {
        match self {
            ClientSpec::Http(h) if h.url.starts_with("https") => "https",
            ClientSpec::Http(_) => "http",
            ClientSpec::Tcp(_) => "tcp",
            ClientSpec::Exec(_) => "exec",
            ClientSpec::Worker(_) => "worker",
            ClientSpec::Websocket(_) => "websocket",
        }
    }
}

fn default_interval_ms() -> u64 {
    1000
}
fn default_timeout_ms() -> u64 {
    30_000
}

impl Spec {
    /// Parse and validate a spec.
    pub fn from_json(s: &str) -> Result<Spec, SpecError> {
        let spec: Spec = serde_json::from_str(s).map_err(|e| {
            SpecError::new(format!(
                "the engine spec is not valid ({e}); see docs/engine-spec.md for the format"
            ))
        })?;
        spec.validate()?;
        Ok(spec)
    }

    /// Check every value; the error names the key, the value and the fix.
    pub fn validate(&self) -> Result<(), SpecError> {
        if self.interval_ms == 0 {
            return Err(SpecError::new("interval_ms must be at least 1 (got 0)"));
        }
        if self.groups.is_empty() {
            return Err(SpecError::new(
                "groups must hold at least one group (got an empty list)",
            ));
        }
        if let Some(t) = self.start_at_unix {
            if !t.is_finite() || t < 0.0 {
                return Err(SpecError::new(format!(
                    "start_at_unix must be a Unix time in seconds (got {t})"
                )));
            }
        }
        for (i, d) in self.data.iter().enumerate() {
            named_once("data", "data source", &self.data, i, |d| &d.name)?;
            d.validate(&format!("data[{i}]"))?;
        }
        for (i, g) in self.groups.iter().enumerate() {
            named_once("groups", "group", &self.groups, i, |g| &g.name)?;
            g.validate(&format!("groups[{i}]"))?;
        }
        Ok(())
    }
}

/// The name of `items[i]` (`list[i]`), refused when an earlier item has it too (`what`: one item).
fn named_once<T>(list: &str, what: &str, items: &[T], i: usize, name: impl Fn(&T) -> &String) -> Result<(), SpecError> {
    let mine = name(&items[i]);
    if items[..i].iter().any(|o| name(o) == mine) {
        return Err(SpecError::new(format!(
            "{list}[{i}].name {mine:?} is used twice; give every {what} its own name"
        )));
    }
    Ok(())
}

/// How a closed-loop client's think times are drawn around their mean `think_ms`, from the client's own seeded
/// stream: the same each time, uniform within `spread_ms` either side (Locust's `between`, Gatling's
/// `pause(min, max)`), or exponential (a client's operations then start as a Poisson stream while it thinks).
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ThinkRandom {
    #[default]
    Constant,
    Uniform {
        spread_ms: u64,
    },
    Exponential,
}

impl GroupSpec {
    fn validate(&self, key: &str) -> Result<(), SpecError> {
        if self.name.is_empty() {
            return Err(SpecError::new(format!("{key}.name must not be empty")));
        }
        if self.clients == 0 {
            return Err(SpecError::new(format!("{key}.clients must be at least 1 (got 0)")));
        }
        if let ThinkRandom::Uniform { spread_ms } = self.think_random {
            if spread_ms > self.think_ms {
                return Err(SpecError::new(format!(
                    "{key}.think_random.spread_ms is {spread_ms}, more than think_ms ({}): a think time below 0",
                    self.think_ms
                )));
            }
        }
        let (stop_key, n) = match self.stop {
            StopRule::Total(n) => ("total", n),
            StopRule::PerClient(n) => ("per_client", n),
            StopRule::DurationMs(n) => ("duration_ms", n),
            StopRule::WhileOthers(true) => ("while_others", 1),
            StopRule::WhileOthers(false) => {
                return Err(SpecError::new(format!(
                    "{key}.stop.while_others must be true (got false); give another stop rule instead"
                )));
            }
        };
        if n == 0 {
            return Err(SpecError::new(format!(
                "{key}.stop.{stop_key} must be at least 1 (got 0)"
            )));
        }
        if self.timeout_ms == 0 {
            return Err(SpecError::new(format!("{key}.timeout_ms must be at least 1 (got 0)")));
        }
        if let Some(n) = self.group_clients {
            let end = self.client_offset.saturating_add(self.clients);
            if n < end {
                return Err(SpecError::new(format!(
                    "{key}.group_clients must be at least client_offset + clients ({end}) (got {n})"
                )));
            }
        }
        if let PacerSpec::Closed { profile: Some(p) } = &self.pacer {
            p.validate_clients(
                &format!("{key}.pacer.profile"),
                self.group_clients.unwrap_or(self.clients),
            )?;
            if !matches!(self.stop, StopRule::DurationMs(_) | StopRule::WhileOthers(_)) {
                return Err(SpecError::new(format!(
                    "{key}.stop must be duration_ms or while_others with a clients profile: clients that wait for \
                     their turn cannot count operations towards a total"
                )));
            }
        }
        if let PacerSpec::Rate {
            rate_hz,
            profile,
            max_in_flight,
            ..
        } = &self.pacer
        {
            if self.think_on_failure_ms > 0 {
                return Err(SpecError::new(format!(
                    "{key}.think_on_failure_ms applies to closed loops only (got {} with an arrival rate); \
                     drop it: an open loop's arrivals do not wait for failures",
                    self.think_on_failure_ms
                )));
            }
            if self.think_random != ThinkRandom::Constant {
                return Err(SpecError::new(format!(
                    "{key}.think_random applies to closed loops only; drop it, or give the arrivals `poisson`"
                )));
            }
            match (rate_hz, profile) {
                (Some(rate_hz), None) => check_rate(key, *rate_hz)?,
                (None, Some(p)) => p.validate(&format!("{key}.pacer.profile"))?,
                (Some(_), Some(_)) => {
                    return Err(SpecError::new(format!(
                        "{key}.pacer has both rate_hz and profile; keep one of them"
                    )))
                }
                (None, None) => {
                    return Err(SpecError::new(format!(
                        "{key}.pacer needs rate_hz (a constant rate) or profile (a rate over time)"
                    )))
                }
            }
            if *max_in_flight == Some(0) {
                return Err(SpecError::new(format!(
                    "{key}.pacer.max_in_flight must be at least 1 (got 0)"
                )));
            }
        }
        let ckey = format!("{key}.client");
        match &self.client {
            ClientSpec::Http(h) => h.validate(&ckey),
            ClientSpec::Tcp(t) => t.validate(&ckey),
            ClientSpec::Exec(e) => e.validate(&ckey),
            ClientSpec::Worker(w) => w.validate(&ckey),
            ClientSpec::Websocket(w) => w.validate(&ckey),
        }
    }
}

/// An open loop's constant rate: positive, and no more than the engine can pace.
fn check_rate(key: &str, rate_hz: f64) -> Result<(), SpecError> {
    if !(rate_hz.is_finite() && rate_hz > 0.0) {
        return Err(SpecError::new(format!(
            "{key}.pacer.rate_hz must be a positive number (got {rate_hz})"
        )));
    }
    if rate_hz > crate::pacer::MAX_RATE_HZ {
        return Err(SpecError::new(format!(
            "{key}.pacer.rate_hz {rate_hz} is more than the engine can pace (at most {} a second); lower the rate",
            crate::pacer::MAX_RATE_HZ
        )));
    }
    Ok(())
}

/// A check's pattern (`expect_stdout`, `expect_stderr`, `expect_body_regex`, tcp `expect`) as every check reads
/// it: line by line, as grep does. `^` and `$` match at the start and end of every line (multi-line mode), so `^1$`
/// matches the output "1\n"; `\A` and `\z` are the text's own ends. `knee doctor` reads it the same way (Python's
/// `re.MULTILINE`).
pub(crate) fn line_regex(pattern: &str) -> Result<regex::bytes::Regex, regex::Error> {
    regex::bytes::RegexBuilder::new(pattern).multi_line(true).build()
}

pub(crate) fn check_regex(key: &str, re: &Option<String>) -> Result<(), SpecError> {
    if let Some(r) = re {
        line_regex(r).map_err(|e| {
            let first = e.to_string().lines().last().unwrap_or("").trim().to_string();
            SpecError::new(format!(
                "{key} {r:?} is not a valid regular expression ({first}); fix the pattern"
            ))
        })?;
    }
    Ok(())
}

/// A connect timeout, when given, is at least 1 ms.
pub(crate) fn check_connect_timeout(key: &str, ms: Option<u64>) -> Result<(), SpecError> {
    match ms {
        Some(0) => Err(SpecError::new(format!(
            "{key}.connect_timeout_ms must be at least 1 (got 0); leave it out to let only timeout_ms apply"
        ))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(client: &str, extra: &str) -> String {
        format!(r#"{{"groups": [{{"name": "g", "clients": 2, "stop": {{"total": 5}}{extra}, "client": {client}}}]}}"#)
    }

    #[test]
    fn parses_the_doc_example_with_defaults() {
        let s = Spec::from_json(&group(r#"{"kind": "http", "url": "http://127.0.0.1:8080/"}"#, "")).unwrap();
        assert_eq!(s.interval_ms, 1000);
        let g = &s.groups[0];
        assert_eq!(g.timeout_ms, 30_000);
        assert_eq!(g.pacer, PacerSpec::Closed { profile: None });
        match &g.client {
            ClientSpec::Http(h) => {
                assert_eq!(h.method, "GET");
                assert_eq!(h.expect_status, vec![(200, 399)]);
            }
            other => panic!("not http: {other:?}"),
        }
    }

    #[test]
    fn checks_match_line_by_line() {
        let re = line_regex("^1$").unwrap();
        assert!(re.is_match(b"1\n") && re.is_match(b"0\n1\n2") && !re.is_match(b"10\n"));
        assert!(!line_regex(r"\A1\z").unwrap().is_match(b"1\n"));
    }

    #[test]
    fn errors_name_key_and_value() {
        let e = Spec::from_json(
            &group(r#"{"kind": "exec", "argv": ["x"]}"#, "").replace("\"clients\": 2", "\"clients\": 0"),
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "groups[0].clients must be at least 1 (got 0)");
        let e = Spec::from_json(&group(r#"{"kind": "tcp", "addr": "h:1", "connect_timeout_ms": 0}"#, "")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "groups[0].client.connect_timeout_ms must be at least 1 (got 0); leave it out to let only timeout_ms apply"
        );
        let e = Spec::from_json(&group(r#"{"kind": "exec", "argv": ["x"], "expect_stdout": "("}"#, "")).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("groups[0].client.expect_stdout \"(\" is not a valid regular expression"),
            "{e}"
        );
        let e = Spec::from_json(&group(r#"{"kind": "http", "url": "ftp://x/"}"#, "")).unwrap_err();
        assert!(e.to_string().contains("groups[0].client.url \"ftp://x/\""), "{e}");
        let e = Spec::from_json(&group(
            r#"{"kind": "tcp", "addr": "x:1"}"#,
            r#", "pacer": {"kind": "rate", "rate_hz": 0}"#,
        ))
        .unwrap_err();
        assert!(
            e.to_string().contains("rate_hz must be a positive number (got 0)"),
            "{e}"
        );
        let e = Spec::from_json(&group(
            r#"{"kind": "tcp", "addr": "x:1"}"#,
            r#", "pacer": {"kind": "rate", "rate_hz": 1e9}"#,
        ))
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("rate_hz 1000000000 is more than the engine can pace (at most 10000000 a second)"),
            "{e}"
        );
        let e = Spec::from_json(&group(
            r#"{"kind": "tcp", "addr": "x:1"}"#,
            r#", "think_on_failure_ms": 100, "pacer": {"kind": "rate", "rate_hz": 5}"#,
        ))
        .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("groups[0].think_on_failure_ms applies to closed loops only (got 100"),
            "{e}"
        );
        let tcp = r#"{"kind": "tcp", "addr": "x:1"}"#;
        let e = Spec::from_json(&group(tcp, r#", "client_offset": 3, "group_clients": 4"#)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "groups[0].group_clients must be at least client_offset + clients (5) (got 4)"
        );
        let e = Spec::from_json(&group(tcp, r#", "pacer": {"kind": "rate"}"#)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "groups[0].pacer needs rate_hz (a constant rate) or profile (a rate over time)"
        );
        let both = r#", "pacer": {"kind": "rate", "rate_hz": 5, "profile": {"shape": "points", "points": [[0, 5]]}}"#;
        let e = Spec::from_json(&group(tcp, both)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "groups[0].pacer has both rate_hz and profile; keep one of them"
        );
        let down = r#", "pacer": {"kind": "rate", "profile": {"shape": "points", "points": [[0, 5], [0, 9]]}}"#;
        let e = Spec::from_json(&group(tcp, down)).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("groups[0].pacer.profile.points[1] time 0 s is not after the point before it"),
            "{e}"
        );
        let e = Spec::from_json(&group(
            tcp,
            r#", "pacer": {"kind": "rate", "profile": {"shape": "saw"}}"#,
        ))
        .unwrap_err();
        assert!(e.to_string().contains("saw"), "{e}");
        // A clients profile: of at most the group's clients, all zero is none, and it runs for a duration.
        let says = |json: &str| {
            Spec::from_json(json)
                .map(|_| String::new())
                .unwrap_or_else(|e| e.to_string())
        };
        let ramp = r#"{"kind": "closed", "profile": {"shape": "points", "points": [[0, 1], [5, 3]]}}"#;
        let timed = format!(r#"{{"name": "g", "clients": 3, "stop": {{"duration_ms": 5}}, "pacer": {ramp}"#);
        let counted = timed.replace(r#""duration_ms": 5"#, r#""total": 5"#);
        let zero = ramp.replace("[[0, 1], [5, 3]]", "[[0, 0]]");
        for (json, error) in [
            (format!(r#"{{"groups": [{timed}, "client": {tcp}}}]}}"#), ""),
            (
                group(tcp, &format!(r#", "pacer": {ramp}"#)),
                "groups[0].pacer.profile.peak of 3 clients is more than the group's clients (2); give the group at \
                 least 3 clients",
            ),
            (
                format!(r#"{{"groups": [{counted}, "client": {tcp}}}]}}"#),
                "groups[0].stop must be duration_ms or while_others with a clients profile: clients that wait for \
                 their turn cannot count operations towards a total",
            ),
            (
                group(tcp, &format!(r#", "pacer": {zero}"#)),
                "groups[0].pacer.profile.points are all at 0 clients: no client would ever run; give a count above 0",
            ),
        ] {
            assert_eq!(says(&json), error, "{json}");
        }
        let e = Spec::from_json(r#"{"groups": [], "bogus": 1}"#).unwrap_err();
        assert!(e.to_string().contains("bogus"), "{e}");
        let e = Spec::from_json(&group(
            r#"{"kind": "http", "url": "http://x/", "expect_stauts": [[200, 200]]}"#,
            "",
        ))
        .unwrap_err();
        assert!(e.to_string().contains("expect_stauts"), "{e}");
        let e = Spec::from_json(&group(r#"{"kind": "smtp"}"#, "")).unwrap_err();
        assert!(e.to_string().contains("smtp"), "{e}");
    }
}
