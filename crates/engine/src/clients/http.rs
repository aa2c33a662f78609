//! HTTP clients: a group's request prepared once (`HttpPrep`: address, TLS, the request in HTTP/1.1's
//! wire form or HTTP/2's, the checks), and the HTTP/1.1 client: one keep-alive connection per client (or
//! one per operation), over a TCP stream, optionally wrapped in rustls. The exchange itself is `h1`'s (a
//! hand-written client: one write, `httparse` on a reusable buffer). HTTP/2 clients are `http2`'s, knee's own too.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use hyper::header::{HeaderName, HeaderValue, CONNECTION, CONTENT_LENGTH, HOST, TRANSFER_ENCODING};
use hyper::Method;

use super::bodycheck::{BodyCheck, Checks, Wants};
use super::dial::{host_of, parse_url, Conn, Dialer};
use super::grpc::GrpcPrep;
use super::h1;
use super::http2::H2Prep;
use super::httpop::HttpOp;
use super::template::{uses_of, Template};
use super::Prepared;
use crate::cancel::{race, Cancel};
use crate::class::ErrorClass;
use crate::data::{Draw, Exhausted, Feeders};
use crate::error::EngineError;
use crate::outcome::{Detail, OpReport, Outcome, Traffic};
use crate::spec::{line_regex, origin, HttpSpec, MixOrder};

/// Requests up to this size go out in one segment; larger ones set TCP_NODELAY so that their last
/// segment is not held back waiting for the ACK of the previous ones.
const NODELAY_ABOVE: usize = 1200;

pub(crate) struct HttpPrep {
    pub dialer: Dialer,
    /// The requests an operation picks from (one without a mix).
    pub requests: Vec<ReqPrep>,
    /// Cumulative weights of `requests` (a mix's pick), their sum last.
    cumulative: Vec<f64>,
    /// `mix_order = "in_turn"`: the operations this shard has picked a request for, from its first client's place.
    pub(super) in_turn: Option<AtomicU64>,
    /// HTTP/2: the request in HTTP/2's form and the group's connections.
    pub h2: Option<H2Prep>,
    /// A gRPC call: the body is its message (JSON, sent as protobuf), the response judged by its grpc-status.
    pub grpc: Option<GrpcPrep>,
    pub new_connection: bool,
    sources: Vec<IpAddr>,
}

/// One request of the group: its bytes (fixed, or a template filled per operation) and its checks.
pub(crate) struct ReqPrep {
    /// The mix's name for it ("" without a mix).
    pub name: String,
    method: Method,
    /// The whole request (head and body), written with one write, when nothing in it changes.
    pub fixed: Option<Bytes>,
    /// Otherwise its parts, rendered per operation.
    parts: Option<ReqTemplate>,
    /// HTTP/2, a fixed request: its header block and body, encoded once.
    pub h2: Option<H2Prep>,
    pub expect_status: Vec<(u16, u16)>,
    /// `expect_body`, `expect_body_regex`, `expect_length`.
    checks: Checks,
    /// Data sources it reads.
    uses: Vec<usize>,
}

/// A templated request: `METHOD target HTTP/1.1`, the header lines, `Content-Length` when it has a body.
struct ReqTemplate {
    target: Template,
    headers: Template,
    /// Lines in `headers` (each ends with CRLF).
    header_lines: usize,
    body: Template,
    wants_length: bool,
}

impl HttpPrep {
    /// `clients`: the group's clients in this shard (HTTP/2 shares ⌈clients / streams⌉ connections among them).
    pub fn new(spec: &HttpSpec, clients: u64, feeders: &Feeders, key: &str) -> Result<HttpPrep, EngineError> {
        let full = parse_url(&spec.url, key)?;
        let https = full.scheme_str() == Some("https");
        let host = host_of(&full).to_string();
        let alpn: &[u8] = if spec.http2 { b"h2" } else { b"http/1.1" };
        let limit = spec.connect_timeout_ms.map(std::time::Duration::from_millis);
        let dialer = Dialer::of_url(
            &full,
            spec.connect_to.as_deref(),
            https,
            &spec.tls,
            spec.insecure,
            alpn,
            &spec.source_addrs,
            limit,
            key,
        )?;
        let grpc = spec.grpc.as_ref().map(|g| GrpcPrep::new(g, key)).transpose()?;
        let mut requests = Vec::new();
        let mut cumulative = Vec::new();
        let mix = !spec.requests.is_empty();
        for (i, (name, weight, r)) in spec.effective().into_iter().enumerate() {
            let rkey = if mix {
                format!("{key}.requests[{i}]")
            } else {
                key.to_string()
            };
            requests.push(ReqPrep::new(&r, name, &host, feeders, &rkey, grpc.as_ref())?);
            cumulative.push(cumulative.last().copied().unwrap_or(0.0) + weight);
        }
        // HTTP/2: the group's connections (⌈clients / streams⌉ per shard).
        let h2 = spec
            .http2
            .then(|| H2Prep::connections(spec.shared_connections(clients).unwrap_or(1)));
        Ok(HttpPrep {
            dialer,
            requests,
            cumulative,
            in_turn: (spec.mix_order == MixOrder::InTurn).then(|| AtomicU64::new(0)),
            h2,
            grpc,
            new_connection: spec.new_connection,
            sources: spec.source_addrs.clone(),
        })
    }

    /// The names of a mix's requests (empty without a mix).
    pub fn names(&self) -> Vec<String> {
        if self.requests.len() == 1 && self.requests[0].name.is_empty() {
            Vec::new()
        } else {
            self.requests.iter().map(|r| r.name.clone()).collect()
        }
    }

    /// Pick a request for this operation (in turn, or by weight; the one request without a mix).
    fn pick(&self, draw: &mut Draw<'_>) -> usize {
        if self.requests.len() == 1 {
            return 0;
        }
        if let Some(n) = &self.in_turn {
            return (n.fetch_add(1, Ordering::Relaxed) % self.requests.len() as u64) as usize;
        }
        let total = self.cumulative.last().copied().unwrap_or(1.0);
        let x = draw.state.rng.unit() * total;
        // the first request whose cumulative weight passes x (a targets file may hold thousands)
        self.cumulative
            .partition_point(|&c| c <= x)
            .min(self.requests.len() - 1)
    }
}

impl ReqPrep {
    /// `grpc`: the group's gRPC call (the body is its JSON message, sent as protobuf, without Content-Length).
    fn new(
        spec: &HttpSpec,
        name: String,
        host: &str,
        feeders: &Feeders,
        key: &str,
        grpc: Option<&GrpcPrep>,
    ) -> Result<ReqPrep, EngineError> {
        let bad = |what: String| EngineError::Spec(crate::error::SpecError(format!("{key}.{what}")));
        let tmpl = |s: &str, k: &str| Template::compile(s, feeders, &format!("{key}.{k}"), true).map_err(bad_spec);
        let full = parse_url(&spec.url, key)?;
        let method = Method::from_bytes(spec.method.as_bytes()).map_err(|e| bad(format!("method: {e}")))?;
        // The request target as written (placeholders in): what follows the authority.
        let origin_len = origin(&spec.url).len();
        let target_text = spec.url[origin_len..].split('#').next().unwrap_or("");
        let target_text = if target_text.is_empty() { "/" } else { target_text };
        let target = tmpl(target_text, "url")?;
        let body_text = match (&spec.body, &spec.body_file) {
            (_, Some(path)) => std::fs::read(path).map_err(|source| EngineError::BodyFile {
                key: format!("{key}.body_file"),
                path: path.clone(),
                source,
            })?,
            (Some(b), None) => b.clone().into_bytes(),
            (None, None) => Vec::new(),
        };
        // A body (or a body file of UTF-8 text) may hold templates; a binary body file is sent as it is.
        let body = match (&spec.body, &spec.body_file, std::str::from_utf8(&body_text)) {
            (Some(b), None, _) => tmpl(b, "body")?,
            (_, Some(_), Ok(text)) => tmpl(text, "body_file")?,
            _ => Template::literal(body_text.clone()),
        };
        let mut headers: Vec<(HeaderName, HeaderValue)> = Vec::with_capacity(spec.headers.len());
        for (name, value) in &spec.headers {
            let n = HeaderName::from_bytes(name.as_bytes()).map_err(|e| bad(format!("headers {name:?}: {e}")))?;
            let v = HeaderValue::from_str(value).map_err(|e| bad(format!("headers {name:?}: {e}")))?;
            headers.push((n, v));
        }
        let has = |h: &HeaderName| headers.iter().any(|(n, _)| n == h);
        let wants_length = grpc.is_none()
            && (!body_text.is_empty()
                || !body.is_fixed()
                || matches!(method, Method::POST | Method::PUT | Method::PATCH));
        // HTTP/2: the block and body of the request as written (placeholders in): encoded once for a fixed
        // request, checked for a templated one (which is encoded per operation).
        let h2 = if spec.http2 {
            // A fixed request's text as its templates write it (a `$${` is a `${`, as HTTP/1.1's).
            let fixed_body = body.fixed_text().unwrap_or_else(|| body_text.clone());
            let mut h2_headers = headers.clone();
            for ((_, v), (name, value)) in h2_headers.iter_mut().zip(&spec.headers) {
                if let Some(text) = tmpl(value, "headers")?.fixed_text() {
                    *v = HeaderValue::from_bytes(&text).map_err(|e| bad(format!("headers {name:?}: {e}")))?;
                }
            }
            let length = (wants_length && !has(&CONTENT_LENGTH)).then_some(fixed_body.len());
            // gRPC: a fixed message is converted once (a templated one per call, once filled in)
            let sent = match grpc {
                Some(g) if body.is_fixed() => g.body(&fixed_body).map_err(|why| bad(format!("body: {why}")))?.to_vec(),
                _ => fixed_body,
            };
            Some(H2Prep::new(&full, &method, &h2_headers, length, &sent, 1).map_err(bad)?)
        } else {
            None
        };
        let mut head = String::new();
        if !has(&HOST) {
            let authority = full.authority().map_or(host, |a| a.as_str());
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
        let length_line = wants_length && !has(&CONTENT_LENGTH) && !has(&TRANSFER_ENCODING);
        let header_lines = tmpl(&head, "headers")?;
        let uses = uses_of([&target.uses[..], &header_lines.uses, &body.uses]);
        let parts = ReqTemplate {
            target,
            headers: header_lines,
            header_lines: head.matches("\r\n").count(),
            body,
            wants_length: length_line,
        };
        let fixed = if parts.target.is_fixed() && parts.headers.is_fixed() && parts.body.is_fixed() {
            let mut out = Vec::new();
            parts
                .write(&method, &mut out, &mut Vec::new(), None)
                .map_err(|why| bad(format!("url: {why}")))?;
            Some(Bytes::from(out))
        } else {
            None
        };
        let compile = |k: &str, p: &str| line_regex(p).map_err(|e| bad(format!("{k} {p:?}: {e}")));
        let req = ReqPrep {
            name,
            h2: h2.filter(|_| fixed.is_some()),
            fixed,
            parts: Some(parts),
            method,
            expect_status: spec.expect_status.clone(),
            checks: Checks::new(
                spec.expect_body.as_deref(),
                spec.expect_body_regex
                    .as_deref()
                    .map(|s| compile("expect_body_regex", s))
                    .transpose()?,
                spec.expect_length,
            ),
            uses,
        };
        Ok(req)
    }
}

fn bad_spec(e: String) -> EngineError {
    EngineError::Spec(crate::error::SpecError(e))
}

impl ReqTemplate {
    /// Write the request into `out` (cleared first), its body rendered through `scratch`; `draw` None: every
    /// part is fixed. Err: a filled-in value that cannot be sent (the part and the byte).
    fn write(
        &self,
        method: &Method,
        out: &mut Vec<u8>,
        scratch: &mut Vec<u8>,
        mut draw: Option<&mut Draw<'_>>,
    ) -> Result<(), String> {
        out.clear();
        scratch.clear();
        out.extend_from_slice(method.as_str().as_bytes());
        out.push(b' ');
        let from = out.len();
        render(&self.target, out, draw.as_deref_mut());
        if let Some(b) = out[from..].iter().find(|b| !(0x21..=0x7E).contains(*b)) {
            let shown = String::from_utf8_lossy(&out[from..]).into_owned();
            return Err(format!(
                "the url's path {shown:?} holds {}, which a URL cannot carry; percent-encode it in the data",
                byte_name(*b)
            ));
        }
        out.extend_from_slice(b" HTTP/1.1\r\n");
        let from = out.len();
        render(&self.headers, out, draw.as_deref_mut());
        // The header lines' own CRLFs are the template's; any other CR, LF or NUL came from a filled-in value.
        let lines = &out[from..];
        let (cr, lf) = (bytecount(lines, b'\r'), bytecount(lines, b'\n'));
        if cr != self.header_lines || lf != self.header_lines || lines.contains(&0) {
            return Err("a header value holds a line break or NUL, which a header cannot carry".to_string());
        }
        render(&self.body, scratch, draw);
        if self.wants_length {
            out.extend_from_slice(b"Content-Length: ");
            out.extend_from_slice(itoa::Buffer::new().format(scratch.len()).as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(scratch);
        Ok(())
    }
}

fn render(t: &Template, out: &mut Vec<u8>, draw: Option<&mut Draw<'_>>) {
    match draw {
        Some(d) => t.render(out, d),
        None => t.render_fixed(out),
    }
}

fn bytecount(s: &[u8], b: u8) -> usize {
    s.iter().filter(|&&x| x == b).count()
}

fn byte_name(b: u8) -> String {
    match b {
        b' ' => "a space".to_string(),
        0x80.. => "a byte that is not ASCII".to_string(),
        b => format!("the byte 0x{b:02x}"),
    }
}

pub(crate) struct HttpClient {
    pub(super) op: HttpOp,
    conn: Option<Conn>,
    rx: h1::Rx,
}

/// The request an operation sends (HTTP/1.1 and HTTP/2 clients alike): its index in the group's mix, and its
/// bytes when templated. Boxed, and only once a mix or a template needs it: a client of one fixed request
/// carries 8 bytes for it (10 000 clients' tasks stay small).
#[derive(Default)]
pub(super) struct Chosen(Option<Box<Choice>>);

#[derive(Default)]
struct Choice {
    req: u16,
    filled: Option<Filled>,
}

impl Chosen {
    /// Pick this operation's request, take its rows and fill it in.
    pub fn prepare(&mut self, prep: &Prepared, draw: &mut Draw<'_>) -> Result<(), Exhausted> {
        let Prepared::Http(p) = prep else {
            unreachable!("an http client always has an http prep")
        };
        if p.requests.len() == 1 && p.requests[0].fixed.is_some() {
            return draw.take(&p.requests[0].uses); // the one fixed request: nothing to choose or fill
        }
        let c = self.0.get_or_insert_with(Box::default);
        c.req = p.fill(draw, &mut c.filled)? as u16;
        Ok(())
    }

    /// Its index in the group's mix.
    pub fn index(&self) -> usize {
        self.0.as_ref().map_or(0, |c| c.req as usize)
    }

    /// The request of `p`, and (templated) what this operation filled in.
    pub fn of<'a>(&'a self, p: &'a HttpPrep) -> (&'a ReqPrep, Option<&'a Filled>) {
        let r = &p.requests[self.index()];
        let filled = self.0.as_ref().and_then(|c| c.filled.as_ref());
        (r, filled.filter(|_| r.fixed.is_none()))
    }

    /// Why this operation's filled-in request cannot be sent (written to `d`), as the outcome to report.
    pub fn unsendable(&self, p: &HttpPrep, d: &mut Detail) -> Option<OpReport> {
        let why = self.of(p).1?.unsendable.as_ref()?;
        d.clear().put(format_args!("{why}"));
        Some(OpReport::of(Outcome::Fail(ErrorClass::Request)))
    }
}

/// A templated request as this operation sends it.
#[derive(Default)]
pub(super) struct Filled {
    /// In HTTP/1.1's form (and the body's rendering on the way).
    pub out: Vec<u8>,
    scratch: Vec<u8>,
    /// HTTP/2: its header block and body.
    pub block: Vec<u8>,
    pub body: Bytes,
    /// Why it cannot be sent (a filled-in value no request can carry).
    pub unsendable: Option<String>,
}

impl HttpPrep {
    /// Pick this operation's request, take its rows and, when it is templated, write it into `filled`.
    fn fill(&self, draw: &mut Draw<'_>, filled: &mut Option<Filled>) -> Result<usize, Exhausted> {
        let i = self.pick(draw);
        let r = &self.requests[i];
        draw.take(&r.uses)?;
        if r.fixed.is_none() {
            let f = filled.get_or_insert_with(Filled::default);
            let parts = r.parts.as_ref().expect("a request is fixed or has parts");
            let mut result = parts.write(&r.method, &mut f.out, &mut f.scratch, Some(draw));
            if result.is_ok() && self.h2.is_some() {
                result = super::http2::from_h1(&f.out, self.dialer.tls.is_some(), &mut f.block).map(|b| f.body = b);
            }
            if let (Ok(()), Some(g)) = (&result, &self.grpc) {
                result = g.body(&f.body).map(|b| f.body = b);
            }
            f.unsendable = result.err().map(|why| match draw.which_row(&r.uses) {
                Some(row) => format!("{row}: {why}"),
                None => why,
            });
        }
        Ok(i)
    }
}

impl ReqPrep {
    /// The outcome of a response with these figures: its status outside `expect_status` (`unexpected`: the
    /// reason is in `d` already), or a length or body check that failed (written to `d`).
    pub fn judge(&self, unexpected: bool, len: u64, body: &BodyCheck, d: &mut Detail) -> Outcome {
        if unexpected {
            Outcome::Fail(ErrorClass::Status)
        } else {
            self.checks.judge(len, body, d)
        }
    }

    /// What the checks need of the response body.
    pub fn body_wants(&self) -> Wants<'_> {
        self.checks.wants()
    }
}

impl HttpPrep {
    /// The group's source addresses (client `c` connects from the `c % len`-th).
    pub fn sources(&self) -> &[IpAddr] {
        &self.sources
    }

    /// TCP_NODELAY for this group's connections: one request per connection in one segment is never
    /// delayed by Nagle, so the syscall is skipped then (`len`: the request's size).
    pub fn nodelay(&self, len: usize) -> bool {
        !self.new_connection || self.dialer.tls.is_some() || len > NODELAY_ABOVE || self.h2.is_some()
    }
}

impl HttpClient {
    /// `client`: the client's number in its group (it picks the source address).
    pub fn new(prep: Arc<Prepared>, client: u64) -> HttpClient {
        HttpClient {
            op: HttpOp::new(prep, client),
            conn: None,
            rx: h1::Rx::default(),
        }
    }

    pub async fn run(&mut self, cancel: &mut Cancel<'_>, d: &mut Detail) -> OpReport {
        self.op.resent = false; // here, not in exchange: one whose request cannot be made returns before any reset
        let mut report = race!(cancel, self.exchange(d));
        report.unsent = self.op.unsent(&report.outcome);
        report.resent = self.op.resent;
        // A failed check leaves the connection usable, as does a request that could not be made (nothing was sent:
        // a data row's space in the URL); anything else may have broken it.
        let usable = matches!(
            report.outcome,
            Outcome::Ok
                | Outcome::Fail(ErrorClass::Status | ErrorClass::Length | ErrorClass::Body | ErrorClass::Request)
        );
        if !usable {
            self.conn = None;
        }
        report
    }

    async fn exchange(&mut self, d: &mut Detail) -> OpReport {
        let Prepared::Http(p) = &*self.op.prep else {
            unreachable!("an http client always has an http prep")
        };
        if let Some(report) = self.op.chosen.unsendable(p, d) {
            return report;
        }
        let (r, filled) = self.op.chosen.of(p);
        let mut opened = None;
        if p.new_connection {
            self.conn = None;
        }
        let req = h1::Request {
            bytes: match (&r.fixed, filled) {
                (Some(b), _) => b,
                (None, Some(f)) => &f.out,
                (None, None) => &[],
            },
            head: r.method == Method::HEAD,
            expect_status: &r.expect_status,
            wants: r.body_wants(),
        };
        let mut sent = 0u64;
        self.op.wrote = false;
        // Taking it twice does the server no harm (GET, PUT, DELETE…): a reused connection closed
        // before an answer may be told by sending it again. A POST is sent on a reused connection only
        // once a peek has found it still open, and never twice.
        let replayable = r.method.is_idempotent();
        let resp = loop {
            if !replayable && self.conn.as_ref().is_some_and(|c| !c.quiet()) {
                self.conn = None;
            }
            let reused = self.conn.is_some();
            if !reused {
                match p.dialer.dial(p.nodelay(req.bytes.len()), self.op.source, d).await {
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
            self.op.wrote = true;
            let result = match self.conn.as_mut().expect("connected above") {
                Conn::Plain(s) => h1::exchange(s, &req, &mut self.rx, &mut self.op.body, d).await,
                Conn::Tls(s) => h1::exchange(&mut **s, &req, &mut self.rx, &mut self.op.body, d).await,
            };
            match result {
                Ok(r) => break r,
                // The server closed a reused connection before answering, most likely while it was idle
                // (its keep-alive timeout): sent again once, on a new connection, when the server cannot
                // have taken it (not a byte of it was written) or may take it twice.
                Err(f) if reused && f.fresh && (f.unsent || replayable) => {
                    self.conn = None;
                    sent += f.sent;
                    self.op.resent = !f.unsent; // some of it written: the server may have read it
                }
                Err(f) => {
                    self.conn = None;
                    // what it moved before it failed: the request's bytes written, the response so far
                    return OpReport {
                        connect: opened.map(|o| o.connect),
                        handshake: opened.and_then(|o| o.handshake),
                        ttfb: f.ttfb,
                        bytes: Traffic {
                            sent: sent + f.sent,
                            received: f.wire,
                            ..Traffic::default()
                        },
                        ..OpReport::of(Outcome::Fail(f.class))
                    };
                }
            }
        };
        sent += resp.sent;
        if p.new_connection || !resp.reusable {
            self.conn = None;
        }
        let len = resp.len;
        OpReport {
            outcome: r.judge(resp.unexpected, len, &self.op.body, d),
            connect: opened.map(|o| o.connect),
            handshake: opened.and_then(|o| o.handshake),
            ttfb: Some(resp.ttfb),
            bytes: Traffic {
                sent,
                received: resp.wire,
                payload: len,
                ..Traffic::default()
            },
            steps: Vec::new(),
            latency: None,
            unsent: false,
            resent: false, // run's
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{HttpClient, Prepared};
    use crate::data::{ClientData, Draw, Feeders};
    use crate::spec::{ClientSpec, DataSpec};

    /// A templated request is written whole per operation: its target, headers and body filled in, the
    /// Content-Length of the filled body; a body file of text is templated too, `$${` is a literal `${`.
    #[test]
    fn a_templated_request_is_written_with_its_rows_and_length() {
        let file = std::env::temp_dir().join(format!("knee-body-{}.json", std::process::id()));
        std::fs::write(&file, "{\"id\": ${u.id}, \"lit\": \"$${x}\"}").unwrap();
        let spec: DataSpec =
            serde_json::from_str(r#"{"name": "u", "text": "id,tok\n7,a b\n42,t\n", "format": "csv"}"#).unwrap();
        let feeders = Feeders::new(&[spec], 1).unwrap();
        let http = format!(
            r#"{{"kind": "http", "url": "http://127.0.0.1:1/x", "requests": [
                {{"name": "get", "url": "http://127.0.0.1:1/u/${{u.id}}?c=${{client}}", "headers": [["X-Tok", "${{u.tok}}"]]}},
                {{"name": "post", "method": "POST", "body_file": {:?}}}]}}"#,
            file.to_str().unwrap()
        );
        let spec: ClientSpec = serde_json::from_str(&http).unwrap();
        let prep = Prepared::new(&spec, 1, &feeders, "k").unwrap();
        let mut c = HttpClient::new(prep, 0);
        let mut state = ClientData::new(&feeders, 3);
        let mut sent = Vec::new();
        for iteration in 0..40 {
            let mut d = Draw {
                client: 3,
                index: 0,
                clients: 1,
                iteration,
                feeders: &feeders,
                state: &mut state,
            };
            c.op.prepare(&mut d).unwrap();
            let (_, f) = c.op.chosen.of(match &*c.op.prep {
                Prepared::Http(p) => p,
                _ => unreachable!(),
            });
            let f = f.unwrap();
            sent.push((
                c.op.request(),
                String::from_utf8(f.out.clone()).unwrap(),
                f.unsendable.clone(),
            ));
        }
        let _ = std::fs::remove_file(&file);
        let get = sent
            .iter()
            .find(|(r, _, bad)| *r == 0 && bad.is_none())
            .expect("a GET with a sendable row");
        assert_eq!(get.1, "GET /u/42?c=3 HTTP/1.1\r\nHost: 127.0.0.1:1\r\nx-tok: t\r\n\r\n");
        let post = sent.iter().find(|(r, _, _)| *r == 1).expect("a POST");
        let body = post.1.split("\r\n\r\n").nth(1).unwrap();
        assert!(
            body == "{\"id\": 7, \"lit\": \"${x}\"}" || body == "{\"id\": 42, \"lit\": \"${x}\"}",
            "{body}"
        );
        assert!(
            post.1.contains(&format!("Content-Length: {}\r\n", body.len())),
            "{}",
            post.1
        );
        assert!(
            sent.iter().all(|(_, _, bad)| bad.is_none()),
            "a space may be in a header value"
        );
    }

    /// Every client's task holds its exchange future: keep it small (10 000 clients ≤ 100 MB).
    #[test]
    fn per_client_state_stays_small() {
        let spec = serde_json::from_str(r#"{"url": "https://127.0.0.1:1/"}"#).unwrap();
        let prep = Prepared::new(&ClientSpec::Http(spec), 1, &crate::data::Feeders::default(), "k").unwrap();
        let Prepared::Http(p) = &*prep else { unreachable!() };
        let mut d = crate::outcome::Detail::default();
        assert!(std::mem::size_of_val(&p.dialer.dial(true, None, &mut d)) <= 512);
        let mut d = crate::outcome::Detail::default();
        let mut c = HttpClient::new(prep.clone(), 0);
        assert!(std::mem::size_of_val(&c.exchange(&mut d)) <= 768);
        // 136: a request mix's pick and the box of a templated request's buffers added 8 to the 128 of before; 120:
        // the body's checks are a box a client holds only once a response wants any of its body (a Vec before).
        assert!(
            std::mem::size_of::<HttpClient>() <= 120,
            "{}",
            std::mem::size_of::<HttpClient>()
        );
    }
}
