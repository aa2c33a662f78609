//! HTTP clients: a group's request prepared once (`HttpPrep`: address, TLS, the request in HTTP/1.1's
//! wire form or HTTP/2's, the checks), and the HTTP/1.1 client: one keep-alive connection per client (or
//! one per operation), over a TCP stream, optionally wrapped in rustls. The exchange itself is `h1`'s (a
//! hand-written client: one write, `httparse` on a reusable buffer). HTTP/2 clients are `http2`'s, knee's own too.

use std::net::{IpAddr, ToSocketAddrs};
use std::sync::Arc;

use bytes::Bytes;
use hyper::header::{HeaderName, HeaderValue, CONNECTION, CONTENT_LENGTH, HOST, TRANSFER_ENCODING};
use hyper::{Method, Uri};
use regex::bytes::Regex;
use rustls::pki_types::ServerName;

use super::dial::{Conn, Dialer};
use super::h1;
use super::http2::H2Prep;
use super::{net, tls, Prepared};
use crate::cancel::{race, Cancel};
use crate::class::ErrorClass;
use crate::error::EngineError;
use crate::outcome::{Detail, OpReport, Outcome, Traffic};
use crate::spec::{line_regex, HttpSpec};

/// Requests up to this size go out in one segment; larger ones set TCP_NODELAY so that their last
/// segment is not held back waiting for the ACK of the previous ones.
const NODELAY_ABOVE: usize = 1200;

pub(crate) struct HttpPrep {
    pub dialer: Dialer,
    method: Method,
    /// The whole request (head and body), written with one write.
    request: Bytes,
    /// HTTP/2: the request in HTTP/2's form and the group's connections.
    pub h2: Option<H2Prep>,
    pub new_connection: bool,
    pub expect_status: Vec<(u16, u16)>,
    expect_body: Option<Regex>,
    expect_body_regex: Option<Regex>,
    expect_length: Option<u64>,
    sources: Vec<IpAddr>,
}

impl HttpPrep {
    /// `clients`: the group's clients in this shard (HTTP/2 shares ⌈clients / streams⌉ connections among them).
    pub fn new(spec: &HttpSpec, clients: u64, key: &str) -> Result<HttpPrep, EngineError> {
        let bad = |what: String| EngineError::Spec(crate::error::SpecError(format!("{key}.{what}")));
        let full: Uri = spec
            .url
            .parse()
            .map_err(|e| bad(format!("url {:?} is not a valid URL ({e})", spec.url)))?;
        let https = full.scheme_str() == Some("https");
        let host = full
            .host()
            .unwrap_or_default()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let port = full.port_u16().unwrap_or(if https { 443 } else { 80 });
        let addr = (host.as_str(), port)
            .to_socket_addrs()
            .map_err(|e| e.to_string())
            .and_then(|mut a| a.next().ok_or_else(|| "no address".to_string()))
            .map_err(|reason| EngineError::Resolve {
                key: format!("{key}.url"),
                addr: format!("{host}:{port}"),
                reason,
            })?;
        net::check_sources(&spec.source_addrs, addr, key)?;
        let tls = if https {
            let alpn: &[u8] = if spec.http2 { b"h2" } else { b"http/1.1" };
            let config = tls::client_config(&spec.tls, spec.insecure, alpn).map_err(|reason| EngineError::Tls {
                key: key.to_string(),
                reason,
            })?;
            let name = ServerName::try_from(host.clone()).map_err(|e| EngineError::Tls {
                key: format!("{key}.url"),
                reason: e.to_string(),
            })?;
            Some((config, name))
        } else {
            None
        };
        let method = Method::from_bytes(spec.method.as_bytes()).map_err(|e| bad(format!("method: {e}")))?;
        let path = full.path_and_query().map_or("/", |p| p.as_str());
        let path = if path.is_empty() { "/" } else { path };
        let body = match (&spec.body, &spec.body_file) {
            (_, Some(path)) => std::fs::read(path).map_err(|source| EngineError::BodyFile {
                key: format!("{key}.body_file"),
                path: path.clone(),
                source,
            })?,
            (Some(b), None) => b.clone().into_bytes(),
            (None, None) => Vec::new(),
        };
        let mut headers: Vec<(HeaderName, HeaderValue)> = Vec::with_capacity(spec.headers.len());
        for (name, value) in &spec.headers {
            let n = HeaderName::from_bytes(name.as_bytes()).map_err(|e| bad(format!("headers {name:?}: {e}")))?;
            let v = HeaderValue::from_str(value).map_err(|e| bad(format!("headers {name:?}: {e}")))?;
            headers.push((n, v));
        }
        let has = |h: &HeaderName| headers.iter().any(|(n, _)| n == h);
        let wants_length = !body.is_empty() || matches!(method, Method::POST | Method::PUT | Method::PATCH);
        let h2 = if spec.http2 {
            let length = (wants_length && !has(&CONTENT_LENGTH)).then_some(body.len());
            let connections = spec.shared_connections(clients).unwrap_or(1);
            Some(H2Prep::new(&full, &method, &headers, length, &body, connections).map_err(bad)?)
        } else {
            None
        };
        let mut head = format!("{method} {path} HTTP/1.1\r\n");
        if !has(&HOST) {
            let authority = full.authority().map_or(host.as_str(), |a| a.as_str());
            HeaderValue::from_str(authority).map_err(|e| bad(format!("url host: {e}")))?;
            head.push_str(&format!("Host: {authority}\r\n"));
        }
        for (n, v) in &headers {
            head.push_str(&format!("{n}: {}\r\n", String::from_utf8_lossy(v.as_bytes())));
        }
        // Like wrk's `-H "Connection: close"`: the server closes after the response.
        if spec.new_connection && !has(&CONNECTION) {
            head.push_str("Connection: close\r\n");
        }
        if wants_length && !has(&CONTENT_LENGTH) && !has(&TRANSFER_ENCODING) {
            head.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        head.push_str("\r\n");
        let mut request = head.into_bytes();
        request.extend_from_slice(&body);
        let compile = |k: &str, p: &str| line_regex(p).map_err(|e| bad(format!("{k} {p:?}: {e}")));
        Ok(HttpPrep {
            dialer: Dialer::new(addr, tls, spec.connect_timeout_ms.map(std::time::Duration::from_millis)),
            method,
            request: Bytes::from(request),
            h2,
            new_connection: spec.new_connection,
            expect_status: spec.expect_status.clone(),
            expect_body: spec
                .expect_body
                .as_deref()
                .map(|s| compile("expect_body", &regex::escape(s)))
                .transpose()?,
            expect_body_regex: spec
                .expect_body_regex
                .as_deref()
                .map(|s| compile("expect_body_regex", s))
                .transpose()?,
            expect_length: spec.expect_length,
            sources: spec.source_addrs.clone(),
        })
    }
}

pub(crate) struct HttpClient {
    prep: Arc<Prepared>,
    conn: Option<Conn>,
    rx: h1::Rx,
    /// The body, kept only when a body check needs it.
    body: Vec<u8>,
    /// The current operation has begun writing its request (it may have reached the server).
    wrote: bool,
    /// The local address this client connects from (None: the kernel picks).
    source: Option<IpAddr>,
}

impl HttpPrep {
    /// The outcome of a response with these figures: its status outside `expect_status` (`unexpected`: the
    /// reason is in `d` already), or a length or body check that failed (written to `d`).
    pub fn judge(&self, unexpected: bool, len: u64, body: &[u8], d: &mut Detail) -> Outcome {
        if unexpected {
            Outcome::Fail(ErrorClass::Status)
        } else if self.expect_length.is_some_and(|n| n != len) {
            let n = self.expect_length.unwrap_or_default();
            d.clear().put(format_args!("body of {len} bytes, expected {n}"));
            Outcome::Fail(ErrorClass::Length)
        } else if let Some(what) = [
            (&self.expect_body, "contain expect_body"),
            (&self.expect_body_regex, "match expect_body_regex"),
        ]
        .into_iter()
        .find_map(|(re, what)| re.as_ref().is_some_and(|re| !re.is_match(body)).then_some(what))
        {
            d.clear()
                .put(format_args!("body does not {what}"))
                .fix()
                .quoted(body, 120);
            Outcome::Fail(ErrorClass::Body)
        } else {
            Outcome::Ok
        }
    }

    /// The group's source addresses (client `c` connects from the `c % len`-th).
    pub fn sources(&self) -> &[IpAddr] {
        &self.sources
    }

    /// A body check needs the body kept.
    pub fn checks_body(&self) -> bool {
        self.expect_body.is_some() || self.expect_body_regex.is_some()
    }

    /// TCP_NODELAY for this group's connections: one request per connection in one segment is never
    /// delayed by Nagle, so the syscall is skipped then.
    pub fn nodelay(&self) -> bool {
        !self.new_connection || self.dialer.tls.is_some() || self.request.len() > NODELAY_ABOVE || self.h2.is_some()
    }
}

impl HttpClient {
    /// `client`: the client's number in its group (it picks the source address).
    pub fn new(prep: Arc<Prepared>, client: u64) -> HttpClient {
        let Prepared::Http(p) = &*prep else {
            unreachable!("an http client always has an http prep")
        };
        let source = net::source_for(&p.sources, client);
        HttpClient {
            prep,
            conn: None,
            rx: h1::Rx::default(),
            body: Vec::new(),
            wrote: false,
            source,
        }
    }

    pub async fn run(&mut self, cancel: &mut Cancel<'_>, d: &mut Detail) -> OpReport {
        let mut report = race!(cancel, self.exchange(d));
        report.unsent = matches!(report.outcome, Outcome::Abandoned) && !self.wrote;
        // A failed check leaves the connection usable; anything else may have broken it.
        let usable = matches!(
            report.outcome,
            Outcome::Ok | Outcome::Fail(ErrorClass::Status | ErrorClass::Length | ErrorClass::Body)
        );
        if !usable {
            self.conn = None;
        }
        report
    }

    async fn exchange(&mut self, d: &mut Detail) -> OpReport {
        let Prepared::Http(p) = &*self.prep else {
            unreachable!("an http client always has an http prep")
        };
        let mut opened = None;
        if p.new_connection {
            self.conn = None;
        }
        let req = h1::Request {
            bytes: &p.request,
            head: p.method == Method::HEAD,
            expect_status: &p.expect_status,
        };
        let check_body = p.checks_body();
        let mut sent = 0u64;
        self.wrote = false;
        let resp = loop {
            let reused = self.conn.is_some();
            if !reused {
                match p.dialer.dial(p.nodelay(), self.source, d).await {
                    Ok((c, o)) => {
                        self.conn = Some(c);
                        opened = Some(o);
                    }
                    Err(e) => {
                        return OpReport {
                            connect: e.connect,
                            ..OpReport::of(Outcome::Fail(e.class))
                        }
                    }
                }
                self.rx.reset();
            }
            self.wrote = true;
            let result = match self.conn.as_mut().expect("connected above") {
                Conn::Plain(s) => h1::exchange(s, &req, &mut self.rx, &mut self.body, check_body, d).await,
                Conn::Tls(s) => h1::exchange(&mut **s, &req, &mut self.rx, &mut self.body, check_body, d).await,
            };
            match result {
                Ok(r) => break r,
                // The server closed an idle keep-alive connection before taking the request: reconnect once.
                Err(f) if reused && f.fresh => self.conn = None,
                Err(f) => {
                    self.conn = None;
                    return OpReport {
                        connect: opened.map(|o| o.connect),
                        handshake: opened.and_then(|o| o.handshake),
                        ..OpReport::of(Outcome::Fail(f.class))
                    };
                }
            }
            sent += req.bytes.len() as u64;
        };
        sent += req.bytes.len() as u64;
        if p.new_connection || !resp.reusable {
            self.conn = None;
        }
        let len = resp.len;
        OpReport {
            outcome: p.judge(resp.unexpected, len, &self.body, d),
            connect: opened.map(|o| o.connect),
            handshake: opened.and_then(|o| o.handshake),
            ttfb: Some(resp.ttfb),
            bytes: Traffic {
                sent,
                received: resp.wire,
                payload: len,
            },
            steps: Vec::new(),
            unsent: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{HttpClient, Prepared};
    use crate::spec::ClientSpec;

    /// Every client's task holds its exchange future: keep it small (10 000 clients ≤ 100 MB).
    #[test]
    fn per_client_state_stays_small() {
        let spec = serde_json::from_str(r#"{"url": "https://127.0.0.1:1/"}"#).unwrap();
        let prep = Prepared::new(&ClientSpec::Http(spec), 1, "k").unwrap();
        let Prepared::Http(p) = &*prep else { unreachable!() };
        let mut d = crate::outcome::Detail::default();
        assert!(std::mem::size_of_val(&p.dialer.dial(true, None, &mut d)) <= 512);
        let mut d = crate::outcome::Detail::default();
        let mut c = HttpClient::new(prep.clone(), 0);
        assert!(std::mem::size_of_val(&c.exchange(&mut d)) <= 768);
        assert!(std::mem::size_of::<HttpClient>() <= 128);
    }
}
