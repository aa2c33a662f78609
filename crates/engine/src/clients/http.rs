//! HTTP/1.1 over hyper's low-level client: one keep-alive connection per client (or one per
//! operation), over a TCP stream with TCP_NODELAY, optionally wrapped in rustls.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::{HeaderMap, HeaderName, HeaderValue, HOST};
use hyper::{Method, Request, Uri};
use hyper_util::rt::TokioIo;
use regex::bytes::Regex;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio_rustls::TlsConnector;

use super::{tls, OpReport, Outcome, Prepared};
use crate::cancel::Cancel;
use crate::class::ErrorClass;
use crate::error::EngineError;
use crate::spec::HttpSpec;

pub(crate) struct HttpPrep {
    url: String,
    addr: SocketAddr,
    tls: Option<(TlsConnector, ServerName<'static>)>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
    new_connection: bool,
    expect_status: Vec<(u16, u16)>,
    expect_body: Option<Regex>,
    expect_body_regex: Option<Regex>,
    expect_length: Option<u64>,
}

impl HttpPrep {
    pub fn new(spec: &HttpSpec, key: &str) -> Result<HttpPrep, EngineError> {
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
        let tls = if https {
            let config = tls::client_config(spec.insecure).map_err(|e| EngineError::Tls {
                key: key.to_string(),
                reason: e.to_string(),
            })?;
            let name = ServerName::try_from(host.clone()).map_err(|e| EngineError::Tls {
                key: format!("{key}.url"),
                reason: e.to_string(),
            })?;
            Some((TlsConnector::from(config), name))
        } else {
            None
        };
        let uri: Uri = full
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .parse()
            .map_err(|e| bad(format!("url: {e}")))?;
        let mut headers = HeaderMap::new();
        let authority = full.authority().map_or(host.as_str(), |a| a.as_str());
        headers.insert(
            HOST,
            HeaderValue::from_str(authority).map_err(|e| bad(format!("url host: {e}")))?,
        );
        for (name, value) in &spec.headers {
            let n = HeaderName::from_bytes(name.as_bytes()).map_err(|e| bad(format!("headers {name:?}: {e}")))?;
            let v = HeaderValue::from_str(value).map_err(|e| bad(format!("headers {name:?}: {e}")))?;
            if n == HOST {
                headers.insert(n, v);
            } else {
                headers.append(n, v);
            }
        }
        let body = match (&spec.body, &spec.body_file) {
            (_, Some(path)) => Bytes::from(std::fs::read(path).map_err(|source| EngineError::BodyFile {
                key: format!("{key}.body_file"),
                path: path.clone(),
                source,
            })?),
            (Some(b), None) => Bytes::from(b.clone()),
            (None, None) => Bytes::new(),
        };
        let compile = |k: &str, p: &str| Regex::new(p).map_err(|e| bad(format!("{k} {p:?}: {e}")));
        Ok(HttpPrep {
            url: spec.url.clone(),
            addr,
            tls,
            method: Method::from_bytes(spec.method.as_bytes()).map_err(|e| bad(format!("method: {e}")))?,
            uri,
            headers,
            body,
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
        })
    }
}

/// Aborts the connection's driver task (closing the socket) when dropped.
struct Conn {
    sender: SendRequest<Full<Bytes>>,
    driver: JoinHandle<()>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

pub(crate) struct HttpClient {
    prep: Arc<Prepared>,
    conn: Option<Conn>,
    buf: Vec<u8>,
}

type Failure = (ErrorClass, String);

fn io_source<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a std::io::Error> {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            return Some(io);
        }
        cur = err.source();
    }
    None
}

fn classify(e: &hyper::Error) -> ErrorClass {
    if e.is_parse() || e.is_parse_status() || e.is_parse_too_large() || e.is_user() {
        ErrorClass::Protocol
    } else if let Some(io) = io_source(e) {
        ErrorClass::of_io(io, false)
    } else if e.is_incomplete_message() || e.is_canceled() || e.is_closed() {
        ErrorClass::Closed
    } else {
        ErrorClass::ReadError
    }
}

async fn connect(p: &HttpPrep) -> Result<Conn, Failure> {
    let stream = TcpStream::connect(p.addr)
        .await
        .map_err(|e| (ErrorClass::of_connect(&e), format!("connect to {}: {e}", p.addr)))?;
    let _ = stream.set_nodelay(true);
    let handshake_err = |e: hyper::Error| (ErrorClass::Protocol, format!("HTTP handshake with {}: {e}", p.addr));
    let (sender, driver) = match &p.tls {
        None => {
            let (sender, conn) = http1::handshake(TokioIo::new(stream)).await.map_err(handshake_err)?;
            (
                sender,
                tokio::task::spawn_local(async move {
                    let _ = conn.await;
                }),
            )
        }
        Some((connector, name)) => {
            let tls = connector
                .connect(name.clone(), stream)
                .await
                .map_err(|e| (ErrorClass::Tls, format!("TLS handshake with {}: {e}", p.addr)))?;
            let (sender, conn) = http1::handshake(TokioIo::new(tls)).await.map_err(handshake_err)?;
            (
                sender,
                tokio::task::spawn_local(async move {
                    let _ = conn.await;
                }),
            )
        }
    };
    Ok(Conn { sender, driver })
}

impl HttpClient {
    pub fn new(prep: Arc<Prepared>) -> HttpClient {
        HttpClient {
            prep,
            conn: None,
            buf: Vec::new(),
        }
    }

    pub async fn run(&mut self, cancel: &mut Cancel<'_>) -> OpReport {
        let report = tokio::select! {
            biased;
            r = self.exchange() => r,
            o = cancel.fired() => OpReport::of(o),
        };
        // A failed check leaves the connection usable; anything else may have broken it.
        let usable = matches!(
            report.outcome,
            Outcome::Ok | Outcome::Fail(ErrorClass::Status | ErrorClass::Length | ErrorClass::Body, _)
        );
        if !usable {
            self.conn = None;
        }
        report
    }

    async fn exchange(&mut self) -> OpReport {
        let Prepared::Http(p) = &*self.prep else {
            unreachable!("an http client always has an http prep")
        };
        let mut connect_time = None;
        if p.new_connection {
            self.conn = None;
        }
        let mut reused = false;
        if let Some(c) = &mut self.conn {
            reused = !c.sender.is_closed() && c.sender.ready().await.is_ok();
            if !reused {
                self.conn = None;
            }
        }
        let resp = loop {
            if self.conn.is_none() {
                let t = Instant::now();
                match connect(p).await {
                    Ok(c) => self.conn = Some(c),
                    Err((class, msg)) => return OpReport::fail(class, msg),
                }
                connect_time = Some(t.elapsed());
            }
            let conn = self.conn.as_mut().expect("connected above");
            let mut req = Request::new(Full::new(p.body.clone()));
            *req.method_mut() = p.method.clone();
            *req.uri_mut() = p.uri.clone();
            *req.headers_mut() = p.headers.clone();
            let sent = Instant::now();
            match conn.sender.send_request(req).await {
                Ok(r) => break (r, sent.elapsed()),
                // The server closed an idle keep-alive connection before taking the request: reconnect once.
                Err(e) if reused && e.is_canceled() => {
                    reused = false;
                    self.conn = None;
                }
                Err(e) => {
                    let report = OpReport::fail(classify(&e), format!("{} {}: {e}", p.method, p.url));
                    return OpReport {
                        connect: connect_time,
                        ..report
                    };
                }
            }
        };
        let (resp, ttfb) = resp;
        let status = resp.status().as_u16();
        let keep = p.expect_body.is_some() || p.expect_body_regex.is_some();
        self.buf.clear();
        let mut len = 0u64;
        let mut body = resp.into_body();
        let mut read_err = None;
        while let Some(frame) = body.frame().await {
            match frame {
                Ok(f) => {
                    if let Some(d) = f.data_ref() {
                        len += d.len() as u64;
                        if keep {
                            self.buf.extend_from_slice(d);
                        }
                    }
                }
                Err(e) => {
                    read_err = Some((classify(&e), format!("reading the body from {}: {e}", p.url)));
                    break;
                }
            }
        }
        if p.new_connection {
            self.conn = None;
        }
        let outcome = if let Some((class, msg)) = read_err {
            Outcome::Fail(class, msg)
        } else if !p.expect_status.iter().any(|(lo, hi)| (*lo..=*hi).contains(&status)) {
            Outcome::Fail(ErrorClass::Status, format!("status {status} from {}", p.url))
        } else if p.expect_length.is_some_and(|n| n != len) {
            let n = p.expect_length.unwrap_or_default();
            Outcome::Fail(
                ErrorClass::Length,
                format!("body of {len} bytes from {}, expected {n}", p.url),
            )
        } else if p.expect_body.as_ref().is_some_and(|re| !re.is_match(&self.buf)) {
            Outcome::Fail(
                ErrorClass::Body,
                format!("body from {} does not contain expect_body", p.url),
            )
        } else if p.expect_body_regex.as_ref().is_some_and(|re| !re.is_match(&self.buf)) {
            Outcome::Fail(
                ErrorClass::Body,
                format!("body from {} does not match expect_body_regex", p.url),
            )
        } else {
            Outcome::Ok
        };
        OpReport {
            outcome,
            connect: connect_time,
            ttfb: Some(ttfb),
        }
    }
}
