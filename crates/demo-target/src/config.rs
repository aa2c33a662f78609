//! The target's configuration: what its capacity curve and its limits are.
//!
//! A config is TOML. `profile = "NAME"` takes a named profile as the base and the other keys
//! override it (tables merge key by key). Every key has a default, so `""` is a valid config.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::TargetError;
use crate::profiles;

/// What happens after an overload.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum RecoveryMode {
    /// Back to normal as soon as the load drops (only the USL curve applies).
    #[default]
    Recover,
    /// Degraded once overloaded; recovers `recover_s` after in-flight falls back under `threshold`.
    Slow,
    /// Metastable: degraded once overloaded, and stays so until `POST /admin/reset`.
    Stuck,
}

impl RecoveryMode {
    pub fn as_str(self) -> &'static str {
        match self {
            RecoveryMode::Recover => "recover",
            RecoveryMode::Slow => "slow",
            RecoveryMode::Stuck => "stuck",
        }
    }
}

/// The `[recovery]` table.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Recovery {
    pub mode: RecoveryMode,
    /// Overloaded while more than this many requests are in flight.
    pub threshold: usize,
    /// Overloaded for this long (seconds) → degraded.
    pub after_s: f64,
    /// Service time multiplier while degraded.
    pub factor: f64,
    /// `slow` mode: seconds under the threshold before the degradation ends.
    pub recover_s: f64,
}

impl Default for Recovery {
    fn default() -> Self {
        Recovery {
            mode: RecoveryMode::Recover,
            threshold: 0,
            after_s: 1.0,
            factor: 5.0,
            recover_s: 5.0,
        }
    }
}

/// The `[tcp]` table: the line protocol on the second port.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TcpConfig {
    /// Sent once the handshake is done (empty: nothing is sent).
    pub greeting: String,
    /// Handshake cost, in units of one request's service time (0: no wait before the greeting).
    pub handshake_cost: f64,
    /// Cost of answering one line, in units of one request's service time (0: answered at once).
    pub line_cost: f64,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            greeting: "HELLO knee-target\n".into(),
            handshake_cost: 0.0,
            line_cost: 0.0,
        }
    }
}

/// The `[login]` table: an endpoint that hands out session cookies (see `PathCost::session`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Login {
    /// The login endpoint: `POST user=NAME&password=PW` there gets a session cookie ("": none).
    pub path: String,
    /// The password every user logs in with.
    pub password: String,
    /// Service time multiplier of a login request.
    pub cost: f64,
}

impl Default for Login {
    fn default() -> Self {
        Login {
            path: String::new(),
            password: "knee".into(),
            cost: 1.0,
        }
    }
}

/// A `[paths."/name"]` entry: what one path costs.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct PathCost {
    /// Service time multiplier.
    pub cost: f64,
    /// Response body size in bytes (None: the config's `body_bytes`).
    pub bytes: Option<usize>,
    /// The path needs a session cookie from the `[login]` endpoint (without one: 401 at once).
    pub session: bool,
}

impl Default for PathCost {
    fn default() -> Self {
        PathCost {
            cost: 1.0,
            bytes: None,
            session: false,
        }
    }
}

/// The whole configuration of one target.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// The profile it came from ("custom" when none).
    pub name: String,
    pub host: String,
    /// HTTP port (0: a free one).
    pub port: u16,
    /// TCP line-protocol port (0: a free one).
    pub tcp_port: u16,
    /// Runtime worker threads (the target sleeps; 1 is plenty below a few thousand requests/s).
    pub threads: usize,
    /// Single-client rate λ, requests per second: S(1) = 1/λ.
    pub lambda: f64,
    /// Contention σ.
    pub sigma: f64,
    /// Coherency κ.
    pub kappa: f64,
    /// Requests in flight past this get 503 (TCP: BUSY and close). 0: no pool limit.
    pub pool: usize,
    /// At most this many requests are served at once; the others wait their turn (FIFO). 0: no limit.
    pub workers: usize,
    /// Milliseconds a pool rejection takes (0: at once).
    pub reject_ms: f64,
    /// Listen backlog of both sockets.
    pub backlog: u32,
    /// Open connections (per listener) past this are not accepted, so the kernel's backlog fills. 0: no limit.
    pub max_connections: usize,
    /// A request not done this many seconds after its admission (waiting for a worker included)
    /// gets 504 then. 0: no timeout.
    pub timeout_s: f64,
    /// Past this many requests in flight, `hang_fraction` of new requests are never answered.
    pub hang_after: usize,
    /// Fraction (0–1) of requests that hang past `hang_after` (0: none hang).
    pub hang_fraction: f64,
    /// Extra milliseconds for the first request of each HTTP connection (connection setup cost).
    pub new_connection_ms: f64,
    /// HTTP keep-alive.
    pub keep_alive: bool,
    /// Default response body size in bytes (0: a short text line).
    pub body_bytes: usize,
    /// Seconds, from the first request (and from each reset), during which service times are
    /// multiplied by `warmup_factor`. 0: no warm-up.
    pub warmup_for: f64,
    /// The service-time multiplier during the warm-up (≥ 1).
    pub warmup_factor: f64,
    /// σ of the log-normal (median 1) service-time multiplier drawn anew every second. 0: no noise.
    pub noise: f64,
    /// Seed of the noise's draws (the same seed, the same multipliers second by second).
    pub seed: u64,
    pub recovery: Recovery,
    pub tcp: TcpConfig,
    pub login: Login,
    pub paths: BTreeMap<String, PathCost>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            name: "custom".into(),
            host: "127.0.0.1".into(),
            port: 0,
            tcp_port: 0,
            threads: 1,
            lambda: 100.0,
            sigma: 0.05,
            kappa: 0.001,
            pool: 0,
            workers: 0,
            reject_ms: 0.0,
            backlog: 1024,
            max_connections: 0,
            timeout_s: 0.0,
            hang_after: 0,
            hang_fraction: 0.0,
            new_connection_ms: 0.0,
            keep_alive: true,
            body_bytes: 0,
            warmup_for: 0.0,
            warmup_factor: 3.0,
            noise: 0.0,
            seed: 1,
            recovery: Recovery::default(),
            tcp: TcpConfig::default(),
            login: Login::default(),
            paths: BTreeMap::new(),
        }
    }
}

impl Config {
    /// Parse a TOML config (with an optional `profile = "NAME"` base) and validate it.
    pub fn from_toml(text: &str) -> Result<Config, TargetError> {
        let user: toml::Table = text.parse().map_err(|e: toml::de::Error| toml_error(text, &e))?;
        Config::from_table(user)
    }

    /// As `from_toml`, from a parsed table.
    pub fn from_table(mut user: toml::Table) -> Result<Config, TargetError> {
        let (name, base) = match user.remove("profile") {
            None => ("custom".to_string(), toml::Table::new()),
            Some(toml::Value::String(name)) => {
                let base = profiles::table(&name)?;
                (name, base)
            }
            Some(other) => {
                return Err(TargetError::Config(format!(
                    "profile is a {}, not a profile name; use a string such as profile = \"srm-fast\"",
                    other.type_str()
                )))
            }
        };
        let merged = merge(base, user);
        negative_count(&merged)?;
        let mut cfg: Config = match toml::Value::Table(merged.clone()).try_into() {
            Ok(cfg) => cfg,
            Err(e) => return Err(TargetError::Toml(culprit(&merged, &e))),
        };
        if cfg.name == "custom" {
            cfg.name = name;
        }
        cfg.validate()?;
        Ok(cfg)
    }

    /// The named profile, validated.
    pub fn profile(name: &str) -> Result<Config, TargetError> {
        let mut t = toml::Table::new();
        t.insert("profile".into(), toml::Value::String(name.to_string()));
        Config::from_table(t)
    }

    /// Check every value; the error names the key, the value and the fix.
    pub fn validate(&self) -> Result<(), TargetError> {
        let bad = |key: &str, value: String, fix: &str| Err(TargetError::Config(format!("{key} = {value} {fix}")));
        let finite_nonneg = |v: f64| v.is_finite() && v >= 0.0;
        let at_least = |key: &str, v: f64, min: f64, fix: &str| {
            if v.is_finite() && v >= min {
                Ok(())
            } else {
                bad(key, v.to_string(), fix)
            }
        };
        if !(self.lambda.is_finite() && self.lambda > 0.0) {
            return bad(
                "lambda",
                self.lambda.to_string(),
                "is not a rate; use a number of requests per second > 0",
            );
        }
        if !finite_nonneg(self.sigma) || self.sigma >= 1.0 {
            return bad(
                "sigma",
                self.sigma.to_string(),
                "is out of range; use 0 ≤ sigma < 1 (0 = no contention)",
            );
        }
        if !finite_nonneg(self.kappa) || self.kappa >= 1.0 {
            return bad(
                "kappa",
                self.kappa.to_string(),
                "is out of range; use 0 ≤ kappa < 1 (0 = no coherency cost)",
            );
        }
        if self.threads == 0 || self.threads > 64 {
            return bad("threads", self.threads.to_string(), "is out of range; use 1 to 64");
        }
        if self.backlog == 0 {
            return bad("backlog", "0".into(), "leaves no listen queue; use 1 or more");
        }
        for (key, v) in [
            ("reject_ms", self.reject_ms),
            ("timeout_s", self.timeout_s),
            ("new_connection_ms", self.new_connection_ms),
            ("tcp.handshake_cost", self.tcp.handshake_cost),
            ("tcp.line_cost", self.tcp.line_cost),
            ("recovery.after_s", self.recovery.after_s),
            ("recovery.recover_s", self.recovery.recover_s),
            ("warmup_for", self.warmup_for),
        ] {
            if !finite_nonneg(v) || v > 86_400.0 {
                return bad(key, v.to_string(), "is out of range; use a number from 0 to 86400");
            }
        }
        if !(0.0..=1.0).contains(&self.hang_fraction) {
            return bad(
                "hang_fraction",
                self.hang_fraction.to_string(),
                "is not a fraction; use 0 to 1 (0 = none hang)",
            );
        }
        if self.body_bytes > MAX_BODY_BYTES {
            return bad(
                "body_bytes",
                self.body_bytes.to_string(),
                &format!("is out of range; use 0 to {MAX_BODY_BYTES} (a body is held in memory)"),
            );
        }
        if self.workers > MAX_WORKERS {
            return bad(
                "workers",
                self.workers.to_string(),
                &format!("is out of range; use 0 (no limit) to {MAX_WORKERS}"),
            );
        }
        at_least(
            "warmup_factor",
            self.warmup_factor,
            1.0,
            "is out of range; use a service-time multiplier ≥ 1 (3 = three times slower while warming up)",
        )?;
        if !finite_nonneg(self.noise) || self.noise > MAX_NOISE {
            return bad(
                "noise",
                self.noise.to_string(),
                &format!(
                    "is out of range; use a log-normal σ from 0 (no noise) to {MAX_NOISE} (0.5: ±tens of percent)"
                ),
            );
        }
        at_least(
            "recovery.factor",
            self.recovery.factor,
            1.0,
            "is out of range; use a multiplier ≥ 1",
        )?;
        if self.recovery.mode != RecoveryMode::Recover && self.recovery.threshold == 0 {
            return bad(
                "recovery.threshold",
                "0".into(),
                "never lets the server be out of overload; set the in-flight count that means overload (e.g. 500)",
            );
        }
        self.host_ip()?;
        let login = &self.login.path;
        if !login.is_empty() && (!login.starts_with('/') || login.starts_with("/admin")) {
            return bad(
                "login.path",
                format!("\"{login}\""),
                "is not a request path; use one that starts with '/' and not with /admin (\"\" = no login endpoint)",
            );
        }
        at_least("login.cost", self.login.cost, 0.0, "is out of range; use a cost ≥ 0")?;
        for (path, pc) in &self.paths {
            if !path.starts_with('/') || path.starts_with("/admin") {
                return bad(
                    "paths",
                    format!("\"{path}\""),
                    "is not a request path; use one that starts with '/' and not with /admin",
                );
            }
            if !(pc.cost.is_finite() && pc.cost >= 0.0) {
                return bad(
                    &format!("paths.\"{path}\".cost"),
                    pc.cost.to_string(),
                    "is out of range; use a cost ≥ 0",
                );
            }
            if pc.bytes.is_some_and(|b| b > MAX_BODY_BYTES) {
                return bad(
                    &format!("paths.\"{path}\".bytes"),
                    pc.bytes.unwrap_or_default().to_string(),
                    &format!("is out of range; use 0 to {MAX_BODY_BYTES} (a body is held in memory)"),
                );
            }
            if pc.session && login.is_empty() {
                return bad(
                    &format!("paths.\"{path}\".session"),
                    "true".into(),
                    "needs a login endpoint to get a session from; set one with [login] path = \"/login\"",
                );
            }
            if pc.session && path == login {
                return bad(
                    &format!("paths.\"{path}\".session"),
                    "true".into(),
                    "is on the login path itself, so no one could log in; set it on the paths the login protects",
                );
            }
        }
        Ok(())
    }

    /// `host` as an IP address.
    pub fn host_ip(&self) -> Result<std::net::IpAddr, TargetError> {
        let h = self.host.trim_start_matches('[').trim_end_matches(']');
        let h = if h == "localhost" { "127.0.0.1" } else { h };
        h.parse().map_err(|_| TargetError::Host(self.host.clone()))
    }

    /// The USL denominator 1 + σ(n−1) + κn(n−1).
    pub fn usl_factor(&self, n: usize) -> f64 {
        let n = n.max(1) as f64;
        1.0 + self.sigma * (n - 1.0) + self.kappa * n * (n - 1.0)
    }

    /// Service time of one request of unit cost with `n` requests in flight (counting itself).
    pub fn service_time(&self, n: usize) -> Duration {
        Duration::from_secs_f64(self.usl_factor(n) / self.lambda)
    }

    /// Closed-loop throughput with `n` clients and no think time: X(n) = λn / (1 + σ(n−1) + κn(n−1)).
    pub fn usl_rate(&self, n: usize) -> f64 {
        self.lambda * n.max(1) as f64 / self.usl_factor(n)
    }

    /// N* = sqrt((1−σ)/κ), None when κ = 0 (no peak).
    pub fn n_star(&self) -> Option<f64> {
        (self.kappa > 0.0).then(|| ((1.0 - self.sigma) / self.kappa).sqrt())
    }

    /// The throughput at the best whole number of clients near N* (capped by the pool and the workers).
    pub fn peak(&self) -> Option<(usize, f64)> {
        let ns = self.n_star()?;
        let mut best = (1, self.usl_rate(1));
        let lo = (ns.floor() as usize).max(1);
        for n in [lo, lo + 1] {
            let n = [self.pool, self.workers]
                .into_iter()
                .filter(|&c| c > 0)
                .fold(n, usize::min);
            if self.usl_rate(n) > best.1 {
                best = (n, self.usl_rate(n));
            }
        }
        Some(best)
    }

    /// With `workers`: the closed-loop rate of every level from `workers` clients on, X(workers)
    /// (the extra clients only wait in the queue). None without a worker limit.
    pub fn plateau_rate(&self) -> Option<f64> {
        (self.workers > 0).then(|| self.usl_rate(self.workers))
    }

    /// True when `path` is the login endpoint.
    pub fn is_login(&self, path: &str) -> bool {
        !self.login.path.is_empty() && path == self.login.path
    }

    /// True when a request to `path` needs a session cookie.
    pub fn needs_session(&self, path: &str) -> bool {
        self.paths.get(path).is_some_and(|p| p.session)
    }

    /// (cost multiplier, response body bytes) of a request path.
    pub fn path_cost(&self, path: &str) -> (f64, usize) {
        match self.paths.get(path) {
            Some(p) => (p.cost, p.bytes.unwrap_or(self.body_bytes)),
            None => (1.0, self.body_bytes),
        }
    }
}

/// The largest response body (`body_bytes`, a path's `bytes`): one copy is kept in memory (a larger one aborted the
/// process when it could not be allocated).
const MAX_BODY_BYTES: usize = 1 << 30;
/// The most `workers` a config may ask for.
const MAX_WORKERS: usize = 1_000_000;
/// The largest `noise` σ (e^3 ≈ 20: one second in 6 would be 20 times slower or faster).
const MAX_NOISE: f64 = 3.0;

/// A negative value for a count (which serde would only call "an invalid value"): name the key, the fix.
fn negative_count(merged: &toml::Table) -> Result<(), TargetError> {
    const COUNTS: [(&str, &str); 10] = [
        ("workers", "use a number of workers ≥ 0 (0 = no limit)"),
        ("pool", "use a pool size ≥ 0 (0 = no limit)"),
        ("max_connections", "use a number of connections ≥ 0 (0 = no limit)"),
        ("hang_after", "use an in-flight count ≥ 0"),
        ("threads", "use 1 to 64"),
        ("backlog", "use 1 or more"),
        ("body_bytes", "use a number of bytes ≥ 0"),
        ("port", "use a port from 0 (a free one) to 65535"),
        ("tcp_port", "use a port from 0 (a free one) to 65535"),
        ("seed", "use a whole number ≥ 0"),
    ];
    for (key, fix) in COUNTS {
        if let Some(toml::Value::Integer(v)) = merged.get(key) {
            if *v < 0 {
                return Err(TargetError::Config(format!("{key} = {v} is negative; {fix}")));
            }
        }
    }
    Ok(())
}

/// Merge `over` into `base`, table by table.
fn merge(mut base: toml::Table, over: toml::Table) -> toml::Table {
    for (k, v) in over {
        match (base.remove(&k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => {
                base.insert(k, toml::Value::Table(merge(b, o)));
            }
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
    base
}

/// Name the key whose value did not fit: try each key (and each key of a table) alone.
fn culprit(merged: &toml::Table, whole: &toml::de::Error) -> String {
    let fails = |t: toml::Table| toml::Value::Table(t).try_into::<Config>().err();
    let one_line = |e: &toml::de::Error| e.message().trim().replace('\n', " ");
    for (k, v) in merged {
        let alone = toml::Table::from_iter([(k.clone(), v.clone())]);
        let Some(e) = fails(alone) else { continue };
        if let toml::Value::Table(inner) = v {
            for (k2, v2) in inner {
                let sub = toml::Table::from_iter([(k2.clone(), v2.clone())]);
                let alone = toml::Table::from_iter([(k.clone(), toml::Value::Table(sub))]);
                if let Some(e2) = fails(alone) {
                    return format!("key {k}.{k2}: {}", one_line(&e2));
                }
            }
        }
        return format!("key {k}: {}", one_line(&e));
    }
    one_line(whole)
}

/// One line: the parser's message and where.
fn toml_error(text: &str, e: &toml::de::Error) -> TargetError {
    let msg = e.message().trim().replace('\n', " ");
    match e.span() {
        Some(span) => {
            let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
            TargetError::Toml(format!("line {line}: {msg}"))
        }
        None => TargetError::Toml(msg),
    }
}
