//! The shard spec: what Python hands the engine, as JSON (docs/engine-spec.md).

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use crate::error::SpecError;

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
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    #[serde(default)]
    pub warmup_ms: u64,
    /// Index of this shard's first client in the whole group (for `${client}`, `per_client`, `hung_clients`).
    #[serde(default)]
    pub client_offset: u64,
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
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum PacerSpec {
    /// Each client starts its next operation when the previous one ends (+ think time).
    #[default]
    Closed,
    /// Open loop: `rate_hz` arrivals per second over the group (constant gaps, or exponential ones
    /// with `poisson`), each handed to an idle one of the group's `clients` slots; latency is
    /// measured from the intended start. An arrival that finds `max_in_flight` operations waiting
    /// or running, or waits longer than `timeout_ms` for a slot, is dropped (counted).
    Rate {
        rate_hz: f64,
        #[serde(default)]
        poisson: bool,
        max_in_flight: Option<u64>,
    },
}

/// The operation a group's clients run.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ClientSpec {
    Http(HttpSpec),
    Tcp(TcpSpec),
    Exec(ExecSpec),
    Worker(WorkerSpec),
}

impl ClientSpec {
    pub fn kind(&self) -> &'static str {
        match self {
            ClientSpec::Http(h) if h.url.starts_with("https") => "https",
            ClientSpec::Http(_) => "http",
            ClientSpec::Tcp(_) => "tcp",
            ClientSpec::Exec(_) => "exec",
            ClientSpec::Worker(_) => "worker",
        }
    }
}

/// An HTTP(S) request.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HttpSpec {
    pub url: String,
    #[serde(default = "default_method")]
    pub method: String,
    #[serde(default)]
    pub headers: Vec<(String, String)>,
    pub body: Option<String>,
    pub body_file: Option<String>,
    #[serde(default)]
    pub insecure: bool,
    #[serde(default)]
    pub new_connection: bool,
    #[serde(default)]
    pub http2: bool,
    /// HTTP/2: concurrent streams per connection; the group's clients share ⌈clients / streams⌉
    /// connections per shard (each client is a stream). 1 = a connection per client.
    #[serde(default = "default_streams")]
    pub streams: u64,
    /// https: trust, client certificate, version and resumption.
    #[serde(default)]
    pub tls: TlsSpec,
    #[serde(default = "default_expect_status")]
    pub expect_status: Vec<(u16, u16)>,
    pub expect_body: Option<String>,
    pub expect_body_regex: Option<String>,
    pub expect_length: Option<u64>,
    /// Local addresses to connect from, client `c` from `source_addrs[c % len]` (empty: the kernel picks).
    #[serde(default)]
    pub source_addrs: Vec<IpAddr>,
    /// A connection not open (TCP connect, then the TLS handshake) this long after the connect began fails:
    /// class `connect_timeout`, or `tls` ("handshake timeout"). None: only the operation's timeout (hung).
    pub connect_timeout_ms: Option<u64>,
}

/// The TLS side of an https client. PEM texts are given in memory (knee's Python side reads the files,
/// decrypts a protected key and checks them); the key is never written anywhere, and `Debug` omits it.
#[derive(Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TlsSpec {
    /// The client certificate chain (leaf first), PEM; it may hold the key too (a grid proxy file).
    pub cert_pem: Option<String>,
    /// The client certificate's private key, PEM (PKCS#8, PKCS#1 or SEC1), unencrypted.
    pub key_pem: Option<String>,
    /// CA certificates to trust, PEM (a CA file, or a CA directory's certificates one after another).
    pub ca_pem: Option<String>,
    /// Trust webpki's (Mozilla's) roots too.
    #[serde(default = "yes")]
    pub webpki_roots: bool,
    /// Resume sessions (tickets / IDs) on new connections; false: every handshake is a full one.
    #[serde(default = "yes")]
    pub resume: bool,
    /// "1.2" or "1.3": only that version; None: either.
    pub version: Option<String>,
}

impl Default for TlsSpec {
    fn default() -> TlsSpec {
        TlsSpec {
            cert_pem: None,
            key_pem: None,
            ca_pem: None,
            webpki_roots: true,
            resume: true,
            version: None,
        }
    }
}

impl std::fmt::Debug for TlsSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSpec")
            .field("cert_pem", &self.cert_pem.as_ref().map(|c| c.len()))
            .field("key_pem", &self.key_pem.as_ref().map(|_| "<redacted>"))
            .field("ca_pem", &self.ca_pem.as_ref().map(|c| c.len()))
            .field("webpki_roots", &self.webpki_roots)
            .field("resume", &self.resume)
            .field("version", &self.version)
            .finish()
    }
}

/// Connect, optionally send, optionally read until a regex matches, close.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TcpSpec {
    pub addr: String,
    pub send: Option<String>,
    pub expect: Option<String>,
    /// As `HttpSpec::source_addrs`.
    #[serde(default)]
    pub source_addrs: Vec<IpAddr>,
    /// As `HttpSpec::connect_timeout_ms` (the TCP connect).
    pub connect_timeout_ms: Option<u64>,
}

/// Run a command (no shell).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ExecSpec {
    pub argv: Vec<String>,
    #[serde(default)]
    pub env: Vec<(String, String)>,
    pub cwd: Option<String>,
    pub expect_stdout: Option<String>,
    pub expect_stderr: Option<String>,
    pub expect_file: Option<FileCheck>,
    /// Where an operation's payload size comes from: `"stdout"` (the bytes it wrote there) or a
    /// file path (`${client}`/`${iteration}` substituted). Default: the size of `expect_file`.
    pub bytes_from: Option<String>,
}

/// A long-lived client program speaking knee's worker protocol over stdin/stdout
/// (docs/worker-protocol.md): started before the run, a few processes hosting the clients.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WorkerSpec {
    pub argv: Vec<String>,
    #[serde(default)]
    pub env: Vec<(String, String)>,
    pub cwd: Option<String>,
    /// Processes for the group in all; 0 = one per engine thread. Fewer than the threads: the group's
    /// clients run on that many threads (a process belongs to one thread).
    #[serde(default)]
    pub processes: u64,
    /// Sent to every process in its start message.
    #[serde(default)]
    pub vars: std::collections::BTreeMap<String, String>,
    /// The operation's name, sent with every request (a fixed-work stage's).
    #[serde(default)]
    pub operation: String,
    /// How long a process may take to answer its start message.
    #[serde(default = "default_start_timeout_ms")]
    pub start_timeout_ms: u64,
}

/// The command must leave a file of at least `min_size` bytes at `path`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FileCheck {
    pub path: String,
    #[serde(default)]
    pub min_size: u64,
}

fn default_interval_ms() -> u64 {
    1000
}
fn default_timeout_ms() -> u64 {
    30_000
}
fn default_start_timeout_ms() -> u64 {
    30_000
}
fn default_streams() -> u64 {
    1
}
fn yes() -> bool {
    true
}
fn default_method() -> String {
    "GET".to_string()
}
fn default_expect_status() -> Vec<(u16, u16)> {
    vec![(200, 399)]
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
        for (i, g) in self.groups.iter().enumerate() {
            if self.groups[..i].iter().any(|o| o.name == g.name) {
                return Err(SpecError::new(format!(
                    "groups[{i}].name {:?} is used twice; give every group its own name",
                    g.name
                )));
            }
            g.validate(&format!("groups[{i}]"))?;
        }
        Ok(())
    }
}

impl GroupSpec {
    fn validate(&self, key: &str) -> Result<(), SpecError> {
        if self.name.is_empty() {
            return Err(SpecError::new(format!("{key}.name must not be empty")));
        }
        if self.clients == 0 {
            return Err(SpecError::new(format!("{key}.clients must be at least 1 (got 0)")));
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
        if let PacerSpec::Rate {
            rate_hz, max_in_flight, ..
        } = self.pacer
        {
            if self.think_on_failure_ms > 0 {
                return Err(SpecError::new(format!(
                    "{key}.think_on_failure_ms applies to closed loops only (got {} with an arrival rate); \
                     drop it: an open loop's arrivals do not wait for failures",
                    self.think_on_failure_ms
                )));
            }
            if !(rate_hz.is_finite() && rate_hz > 0.0) {
                return Err(SpecError::new(format!(
                    "{key}.pacer.rate_hz must be a positive number (got {rate_hz})"
                )));
            }
            if rate_hz > crate::pacer::MAX_RATE_HZ {
                return Err(SpecError::new(format!(
                    "{key}.pacer.rate_hz {rate_hz} is more than the engine can pace (at most {} a second); \
                     lower the rate",
                    crate::pacer::MAX_RATE_HZ
                )));
            }
            if max_in_flight == Some(0) {
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
        }
    }
}

/// A check's pattern (`expect_stdout`, `expect_stderr`, `expect_body_regex`, tcp `expect`) as every check reads
/// it: line by line, as grep does. `^` and `$` match at the start and end of every line (multi-line mode), so `^1$`
/// matches the output "1\n"; `\A` and `\z` are the text's own ends. `knee doctor` reads it the same way (Python's
/// `re.MULTILINE`).
pub(crate) fn line_regex(pattern: &str) -> Result<regex::bytes::Regex, regex::Error> {
    regex::bytes::RegexBuilder::new(pattern).multi_line(true).build()
}

fn check_regex(key: &str, re: &Option<String>) -> Result<(), SpecError> {
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
fn check_connect_timeout(key: &str, ms: Option<u64>) -> Result<(), SpecError> {
    match ms {
        Some(0) => Err(SpecError::new(format!(
            "{key}.connect_timeout_ms must be at least 1 (got 0); leave it out to let only timeout_ms apply"
        ))),
        _ => Ok(()),
    }
}

impl HttpSpec {
    fn validate(&self, key: &str) -> Result<(), SpecError> {
        check_connect_timeout(key, self.connect_timeout_ms)?;
        let uri: hyper::Uri = self.url.parse().map_err(|e| {
            SpecError::new(format!(
                "{key}.url {:?} is not a valid URL ({e}); use e.g. http://host:port/path",
                self.url
            ))
        })?;
        match uri.scheme_str() {
            Some("http") | Some("https") => {}
            _ => {
                return Err(SpecError::new(format!(
                    "{key}.url {:?} must start with http:// or https://",
                    self.url
                )))
            }
        }
        if uri.host().is_none_or(str::is_empty) {
            return Err(SpecError::new(format!(
                "{key}.url {:?} has no host; use e.g. http://host:port/path",
                self.url
            )));
        }
        hyper::Method::from_bytes(self.method.as_bytes()).map_err(|_| {
            SpecError::new(format!(
                "{key}.method {:?} is not an HTTP method; use e.g. GET or POST",
                self.method
            ))
        })?;
        for (i, (name, value)) in self.headers.iter().enumerate() {
            if hyper::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
                return Err(SpecError::new(format!(
                    "{key}.headers[{i}] name {name:?} is not a valid header name"
                )));
            }
            if hyper::header::HeaderValue::from_str(value).is_err() {
                return Err(SpecError::new(format!(
                    "{key}.headers[{i}] value {value:?} is not a valid header value"
                )));
            }
        }
        if self.body.is_some() && self.body_file.is_some() {
            return Err(SpecError::new(format!(
                "{key} has both body and body_file; give only one"
            )));
        }
        self.validate_protocol(key, uri.scheme_str() == Some("https"))?;
        if self.expect_status.is_empty() {
            return Err(SpecError::new(format!(
                "{key}.expect_status is empty; give at least one [low, high] range, e.g. [[200, 399]]"
            )));
        }
        for (i, (lo, hi)) in self.expect_status.iter().enumerate() {
            if lo > hi || *lo < 100 || *hi > 999 {
                return Err(SpecError::new(format!(
                    "{key}.expect_status[{i}] [{lo}, {hi}] is not a range of status codes; use [low, high] with 100 <= low <= high <= 999"
                )));
            }
        }
        check_regex(&format!("{key}.expect_body_regex"), &self.expect_body_regex)
    }

    /// HTTP/2 with connections shared by the clients (not one per operation): ⌈clients / streams⌉ of them.
    pub fn shared_connections(&self, clients: u64) -> Option<u64> {
        (self.http2 && !self.new_connection).then(|| clients.div_ceil(self.streams.max(1)).max(1))
    }

    /// HTTP/2 streams and the TLS settings.
    fn validate_protocol(&self, key: &str, https: bool) -> Result<(), SpecError> {
        if self.streams == 0 {
            return Err(SpecError::new(format!("{key}.streams must be at least 1 (got 0)")));
        }
        if self.streams > 1 && !self.http2 {
            return Err(SpecError::new(format!(
                "{key}.streams is {} but streams multiplex HTTP/2 only; set http2 = true or streams = 1",
                self.streams
            )));
        }
        if self.streams > 1 && self.new_connection {
            return Err(SpecError::new(format!(
                "{key}.streams is {} but new_connection opens a connection per operation (one stream each); \
                 drop one of them",
                self.streams
            )));
        }
        let t = &self.tls;
        if let Some(v) = t.version.as_deref().filter(|v| !matches!(*v, "1.2" | "1.3")) {
            return Err(SpecError::new(format!(
                "{key}.tls.version {v:?} is not a TLS version knee speaks; use \"1.2\" or \"1.3\""
            )));
        }
        let given = [
            ("cert_pem", t.cert_pem.is_some()),
            ("key_pem", t.key_pem.is_some()),
            ("ca_pem", t.ca_pem.is_some()),
            ("version", t.version.is_some()),
        ];
        if let Some((name, _)) = given.iter().find(|(_, set)| *set).filter(|_| !https) {
            return Err(SpecError::new(format!(
                "{key}.tls.{name} is set but the url is http:// (no TLS); use an https:// url or drop it"
            )));
        }
        Ok(())
    }
}

impl TcpSpec {
    fn validate(&self, key: &str) -> Result<(), SpecError> {
        check_connect_timeout(key, self.connect_timeout_ms)?;
        if !self.addr.contains(':') {
            return Err(SpecError::new(format!(
                "{key}.addr {:?} must be host:port, e.g. 127.0.0.1:9000",
                self.addr
            )));
        }
        check_regex(&format!("{key}.expect"), &self.expect)
    }
}

impl WorkerSpec {
    fn validate(&self, key: &str) -> Result<(), SpecError> {
        if self.argv.is_empty() || self.argv[0].is_empty() {
            return Err(SpecError::new(format!(
                "{key}.argv must name the worker program, e.g. [\"java\", \"-cp\", \"w\", \"Worker\"] (got {:?})",
                self.argv
            )));
        }
        if self.start_timeout_ms == 0 {
            return Err(SpecError::new(format!(
                "{key}.start_timeout_ms must be at least 1 (got 0)"
            )));
        }
        Ok(())
    }
}

impl ExecSpec {
    fn validate(&self, key: &str) -> Result<(), SpecError> {
        if self.argv.is_empty() || self.argv[0].is_empty() {
            return Err(SpecError::new(format!(
                "{key}.argv must name a command, e.g. [\"/bin/true\"] (got {:?})",
                self.argv
            )));
        }
        check_regex(&format!("{key}.expect_stdout"), &self.expect_stdout)?;
        check_regex(&format!("{key}.expect_stderr"), &self.expect_stderr)?;
        if let Some(f) = &self.expect_file {
            if f.path.is_empty() {
                return Err(SpecError::new(format!("{key}.expect_file.path must not be empty")));
            }
        }
        if self.bytes_from.as_deref() == Some("") {
            return Err(SpecError::new(format!(
                "{key}.bytes_from must be \"stdout\" or a file path (got an empty string)"
            )));
        }
        Ok(())
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
        assert_eq!(g.pacer, PacerSpec::Closed);
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
