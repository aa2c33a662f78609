//! An http group's spec: the request, its checks, HTTP/2 and TLS.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::{check_connect_timeout, check_regex, GrpcSpec};
use crate::error::SpecError;

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
    /// HTTP/2: the connections the group's clients share, per shard (at most one per client), each client's
    /// operations streams on connection `client % connections`; instead of `streams`. None: by `streams`.
    #[serde(default)]
    pub connections: Option<u64>,
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
    /// `HOST:PORT` (an IPv6 address in brackets) the connections go to instead of the URL's host and port, which
    /// stay the `Host` header, the TLS server name (SNI) and the name the certificate is checked against (curl's
    /// `--connect-to`). None: the URL's.
    #[serde(default)]
    pub connect_to: Option<String>,
    /// A request mix: each operation picks one of these by weight (seeded); each gives the keys it changes
    /// from the group's (`url`'s path and query, `method`, `headers` added or replaced by name, the body,
    /// the checks). Empty: every operation sends the group's one request.
    #[serde(default)]
    pub requests: Vec<RequestSpec>,
    /// How an operation picks its request of the mix: at random by weight, or each the next of the list in turn.
    #[serde(default)]
    pub mix_order: MixOrder,
    /// A gRPC call (over HTTP/2): the body is its message as JSON, the URL's path the method's.
    #[serde(default)]
    pub grpc: Option<GrpcSpec>,
}

/// How the operations of a mix pick their requests.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum MixOrder {
    /// Each at random by the requests' weights (seeded).
    #[default]
    Random,
    /// Each operation the next request of the list, across the shard's clients, from its first again after its
    /// last (vegeta's targets, Gatling's roundRobinSwitch): every request is sent as often, give or take one.
    InTurn,
}

/// One request of a mix: its name (counted apart), weight, and what differs from the group's request.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RequestSpec {
    pub name: String,
    #[serde(default = "one")]
    pub weight: f64,
    pub url: Option<String>,
    pub method: Option<String>,
    pub headers: Option<Vec<(String, String)>>,
    pub body: Option<String>,
    pub body_file: Option<String>,
    pub expect_status: Option<Vec<(u16, u16)>>,
    pub expect_body: Option<String>,
    pub expect_body_regex: Option<String>,
    pub expect_length: Option<u64>,
}

fn one() -> f64 {
    1.0
}

/// `url` with every `${…}` replaced by `x`, for checks of its form before templates are filled.
pub(crate) fn untemplated(url: &str) -> std::borrow::Cow<'_, str> {
    if !url.contains("${") {
        return url.into();
    }
    let mut out = String::with_capacity(url.len());
    let mut rest = url;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        match rest[i..].find('}') {
            Some(j) => {
                out.push('x');
                rest = &rest[i + j + 1..];
            }
            None => {
                rest = &rest[i..];
                break;
            }
        }
    }
    out.push_str(rest);
    out.into()
}

/// scheme://authority of a URL (what a group connects to), placeholders left in.
pub(crate) fn origin(url: &str) -> &str {
    let after = url.find("://").map_or(0, |i| i + 3);
    let end = url[after..].find(['/', '?', '#']).map_or(url.len(), |j| after + j);
    &url[..end]
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

impl HttpSpec {
    /// The requests an operation picks from (the group's one when there is no mix), each a whole spec:
    /// (name, weight, spec). Names are empty without a mix.
    pub fn effective(&self) -> Vec<(String, f64, HttpSpec)> {
        if self.requests.is_empty() {
            return vec![(
                String::new(),
                1.0,
                HttpSpec {
                    requests: Vec::new(),
                    ..self.clone()
                },
            )];
        }
        self.requests
            .iter()
            .map(|r| {
                let mut h = HttpSpec {
                    requests: Vec::new(),
                    ..self.clone()
                };
                if let Some(u) = &r.url {
                    h.url = u.clone();
                }
                if let Some(m) = &r.method {
                    h.method = m.clone();
                }
                if let Some(mine) = &r.headers {
                    h.headers
                        .retain(|(n, _)| !mine.iter().any(|(m, _)| m.eq_ignore_ascii_case(n)));
                    h.headers.extend(mine.iter().cloned());
                }
                if r.body.is_some() || r.body_file.is_some() {
                    h.body = r.body.clone();
                    h.body_file = r.body_file.clone();
                }
                if let Some(e) = &r.expect_status {
                    h.expect_status = e.clone();
                }
                h.expect_body = r.expect_body.clone().or(h.expect_body);
                h.expect_body_regex = r.expect_body_regex.clone().or(h.expect_body_regex);
                h.expect_length = r.expect_length.or(h.expect_length);
                (r.name.clone(), r.weight, h)
            })
            .collect()
    }

    pub(super) fn validate(&self, key: &str) -> Result<(), SpecError> {
        if self.requests.is_empty() {
            return self.validate_one(key);
        }
        if self.requests.len() > usize::from(u16::MAX) {
            // a client's chosen request is a u16: the 65 537th would be sent as the first
            return Err(SpecError::new(format!(
                "{key}.requests holds {} requests; a mix holds at most {}: split it over groups",
                self.requests.len(),
                u16::MAX
            )));
        }
        let group_origin = origin(&self.url);
        for (i, r) in self.requests.iter().enumerate() {
            let rkey = format!("{key}.requests[{i}]");
            if r.name.is_empty() || self.requests[..i].iter().any(|o| o.name == r.name) {
                return Err(SpecError::new(format!(
                    "{rkey}.name {:?} is empty or used twice; give every request of a mix its own name",
                    r.name
                )));
            }
            if !(r.weight.is_finite() && r.weight > 0.0) {
                return Err(SpecError::new(format!(
                    "{rkey}.weight must be a positive number (got {}); drop the request to send it never",
                    r.weight
                )));
            }
            if self.mix_order == MixOrder::InTurn && r.weight != 1.0 {
                return Err(SpecError::new(format!(
                    "{rkey}.weight is {}, but mix_order \"in_turn\" sends each request in turn; drop the weight, or \
                     pick at random by weight (mix_order \"random\")",
                    r.weight
                )));
            }
            if let Some(u) = &r.url {
                if origin(u) != group_origin {
                    return Err(SpecError::new(format!(
                        "{rkey}.url {u:?} is on {:?} but the group connects to {group_origin:?}; a group's requests \
                         share one origin: give the other origin a group of its own",
                        origin(u)
                    )));
                }
            }
        }
        for ((_, _, h), i) in self.effective().iter().zip(0..) {
            h.validate_one(&format!("{key}.requests[{i}]"))?;
        }
        Ok(())
    }

    fn validate_one(&self, key: &str) -> Result<(), SpecError> {
        check_connect_timeout(key, self.connect_timeout_ms)?;
        if origin(&self.url).contains("${") {
            return Err(SpecError::new(format!(
                "{key}.url {:?} has a placeholder in its scheme or host; a group connects to one origin, so \
                 placeholders may be in the path and query only",
                self.url
            )));
        }
        let uri: hyper::Uri = untemplated(&self.url).parse().map_err(|e| {
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
        let per_streams = || clients.div_ceil(self.streams.max(1));
        (self.http2 && !self.new_connection)
            .then(|| self.connections.map_or_else(per_streams, |n| n.min(clients)).max(1))
    }

    /// HTTP/2 streams and the TLS settings.
    fn validate_protocol(&self, key: &str, https: bool) -> Result<(), SpecError> {
        if let Some(g) = &self.grpc {
            if !self.http2 {
                return Err(SpecError::new(format!(
                    "{key}.grpc is a gRPC call, which HTTP/2 carries; set http2 = true"
                )));
            }
            g.validate(key)?;
        }
        if self.streams == 0 {
            return Err(SpecError::new(format!("{key}.streams must be at least 1 (got 0)")));
        }
        if let Some(n) = self.connections {
            let why = if n == 0 {
                "must be at least 1"
            } else if !self.http2 || self.new_connection {
                "shares HTTP/2 connections: set http2 = true (and drop new_connection)"
            } else if self.streams > 1 {
                "and streams both say how clients share connections: give one"
            } else {
                ""
            };
            if !why.is_empty() {
                return Err(SpecError::new(format!("{key}.connections {n} {why}")));
            }
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
