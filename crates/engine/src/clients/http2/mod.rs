//! HTTP/2 clients, knee's own (`conn`: frames, flow control, GOAWAY and RST_STREAM with their codes;
//! `hpack`: a request's header block encoded once, responses' decoded for their status). Over TLS the
//! protocol is chosen by ALPN (`h2`); over `http://` it is spoken with prior knowledge (h2c).
//!
//! A group's clients are streams: ⌈clients / streams⌉ connections per shard, each shared by up to
//! `streams` clients of one engine thread (`lane`). A stream the server never processed — above the last
//! stream id of its GOAWAY, or refused with REFUSED_STREAM — is sent again (RFC 9113 §8.7: such a request
//! may be retried safely; after a GOAWAY, on a new connection), at most `MAX_REFUSED` times; then it
//! fails as `goaway` / `rst_stream`. Since the server never saw it, it is counted once, as what finally
//! became of it. Any other RST_STREAM or GOAWAY fails the operation with that class and the frame's error
//! code; a reset ends its stream only, the connection carries on.

use std::future::poll_fn;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use hyper::header::{HeaderName, HeaderValue, CONNECTION, HOST, TRANSFER_ENCODING, UPGRADE};
use hyper::{Method, Uri};

use super::bodycheck::{BodyCheck, QUOTED_BODY};
use super::dial::Opened;
use super::h1;
use super::httpop::HttpOp;
use super::Prepared;
use crate::cancel::{race, Cancel};
use crate::class::ErrorClass;
use crate::outcome::{Detail, OpReport, Outcome, Traffic};

mod conn;
mod hpack;
mod lane;

use conn::{code_name, Failure, Fault};
pub(crate) use conn::{Answer, Carries, Link};
pub(crate) use lane::{open, Lane, Lanes};

/// Times a stream the server never processed is sent again on a new connection before the operation fails.
const MAX_REFUSED: u32 = 3;

/// A group's request in HTTP/2's form, and its connections.
pub(crate) struct H2Prep {
    /// The request's header block, encoded once: fields the server does not index, no Huffman, names
    /// from the static table where it has them (`:authority` is the URL's, or the `Host` header's).
    pub block: Vec<u8>,
    pub body: Bytes,
    /// Connections per shard: ⌈clients / streams⌉ (`HttpSpec::shared_connections`).
    pub connections: u64,
}

impl H2Prep {
    /// The group's HTTP/2 side: its connections in this shard (each request's block is the request's own).
    pub fn connections(connections: u64) -> H2Prep {
        H2Prep {
            block: Vec::new(),
            body: Bytes::new(),
            connections,
        }
    }

    /// `length`: the Content-Length to send, if any; `connections`: the group's in this shard.
    pub fn new(
        url: &Uri,
        method: &Method,
        headers: &[(HeaderName, HeaderValue)],
        length: Option<usize>,
        body: &[u8],
        connections: u64,
    ) -> Result<H2Prep, String> {
        let https = url.scheme_str() == Some("https");
        let authority = url.authority().map(|a| a.as_str().as_bytes()).unwrap_or_default();
        let path = url.path_and_query().map_or("/", |p| p.as_str());
        let path = if path.is_empty() { "/" } else { path };
        let mut block = Vec::with_capacity(128);
        let fields = headers.iter().map(|(n, v)| (n.as_str(), v.as_bytes()));
        encode(
            &mut block,
            https,
            method.as_str(),
            authority,
            path.as_bytes(),
            fields,
            length,
        )?;
        Ok(H2Prep {
            block,
            body: Bytes::copy_from_slice(body),
            connections,
        })
    }
}

/// A request's header block: fields the server does not index, no Huffman, names from the static table where
/// it has them; `:authority` is the `Host` header's if given, else `authority`. Header names lower case.
pub(crate) fn encode<'a>(
    block: &mut Vec<u8>,
    https: bool,
    method: &str,
    authority: &[u8],
    path: &[u8],
    headers: impl Iterator<Item = (&'a str, &'a [u8])> + Clone,
    length: Option<usize>,
) -> Result<(), String> {
    block.clear();
    match hpack::static_field(":method", method) {
        Some(i) => hpack::put_int(block, 0x80, 7, i),
        None => hpack::put_field(block, 2, b"", method.as_bytes()),
    }
    let scheme = if https { "https" } else { "http" };
    let i = hpack::static_field(":scheme", scheme).expect("both schemes are in the static table");
    hpack::put_int(block, 0x80, 7, i);
    let host = headers
        .clone()
        .find(|(n, _)| n.eq_ignore_ascii_case("host"))
        .map(|(_, v)| v);
    hpack::put_field(block, 1, b"", host.unwrap_or(authority));
    match std::str::from_utf8(path)
        .ok()
        .and_then(|p| hpack::static_field(":path", p))
    {
        Some(i) => hpack::put_int(block, 0x80, 7, i),
        None => hpack::put_field(block, 4, b"", path),
    }
    for (n, v) in headers {
        let name = n.to_ascii_lowercase(); // HTTP/2 wants lower case
        if [
            CONNECTION.as_str(),
            TRANSFER_ENCODING.as_str(),
            UPGRADE.as_str(),
            "keep-alive",
        ]
        .contains(&name.as_str())
        {
            return Err(format!(
                "headers {name:?} is connection-specific, which HTTP/2 forbids (RFC 9113 §8.2.2); drop it"
            ));
        }
        if name == HOST.as_str() {
            continue; // sent as :authority (RFC 9113 §8.3.1)
        }
        if name == hyper::header::TE.as_str() && !v.eq_ignore_ascii_case(b"trailers") {
            return Err(
                "headers \"te\" may only be \"trailers\" in HTTP/2 (RFC 9113 §8.2.2); drop it or set it so".into(),
            );
        }
        hpack::put_field(block, hpack::static_name(&name).unwrap_or(0), name.as_bytes(), v);
    }
    if let Some(n) = length {
        let i = hpack::static_name("content-length").expect("in the static table");
        hpack::put_field(block, i, b"", n.to_string().as_bytes());
    }
    Ok(())
}

/// A request written in HTTP/1.1's form (a templated one, filled in) → its HTTP/2 header block in `block` and
/// its body. `Connection: close`, which knee adds for a connection per operation, is left out.
pub(super) fn from_h1(h1: &[u8], https: bool, block: &mut Vec<u8>) -> Result<Bytes, String> {
    let mut fields = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut fields);
    let head = match req.parse(h1) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Err("the request is incomplete".into()),
        Err(e) => return Err(format!("the request cannot be read back ({e})")),
    };
    let headers = req
        .headers
        .iter()
        .filter(|h| !h.name.eq_ignore_ascii_case("connection"))
        .map(|h| (h.name, h.value));
    let (method, path) = (req.method.unwrap_or("GET"), req.path.unwrap_or("/"));
    encode(block, https, method, b"", path.as_bytes(), headers, None)?;
    Ok(Bytes::copy_from_slice(&h1[head..]))
}

/// One client: a stream of its lane's connection per operation (with `new_connection`, a connection of
/// its own per operation).
pub(crate) struct H2Client {
    /// Its request and body; its source address is that of the connections it opens when its lane has none (a
    /// connection per operation).
    pub(super) op: HttpOp,
    lane: Rc<Lane>,
    /// The connection this operation opened for itself (a new connection per operation), closed with it.
    own: Option<Rc<Link>>,
}

/// Resets its stream if the operation ends before the response (a timeout, the run's end), and takes back the
/// client's body checks the stream had; forgotten once the answer came (which gave them back).
struct Open<'a> {
    link: &'a Link,
    id: u32,
    body: &'a mut BodyCheck,
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        if let Some(body) = self.link.cancel(self.id) {
            *self.body = body;
        }
    }
}

impl H2Client {
    /// `lane`: the client's share of a connection (None: it opens its own, one per operation); `client`: its
    /// number in its group (it picks the source address of the connections it opens).
    pub fn new(prep: Arc<Prepared>, lane: Option<Rc<Lane>>, client: u64) -> H2Client {
        H2Client {
            op: HttpOp::new(prep, client),
            lane: lane.unwrap_or_default(),
            own: None,
        }
    }

    pub async fn run(&mut self, cancel: &mut Cancel<'_>, d: &mut Detail) -> OpReport {
        let mut report = race!(cancel, self.exchange(d));
        report.unsent = self.op.unsent(&report.outcome);
        if let Some(link) = self.own.take() {
            link.close(); // its connection closes with the operation
        }
        report
    }

    async fn exchange(&mut self, d: &mut Detail) -> OpReport {
        let prep = self.op.prep.clone();
        let Prepared::Http(p) = &*prep else {
            unreachable!("an http client always has an http prep")
        };
        if let Some(report) = self.op.chosen.unsendable(p, d) {
            return report;
        }
        let mut opened: Option<Opened> = None;
        let mut refused = 0u32;
        self.op.wrote = false;
        loop {
            let fail = |class, opened: Option<Opened>| OpReport {
                connect: opened.map(|o| o.connect),
                handshake: opened.and_then(|o| o.handshake),
                ..OpReport::of(Outcome::Fail(class))
            };
            let source = self.lane.source.or(self.op.source);
            // Opening a connection is boxed: its futures (the dial, the handshake) are large and rare, and
            // would otherwise sit in every client's task, HTTP/1.1 clients' too (the task holds any kind).
            let link = if p.new_connection {
                let l = Box::pin(lane::open(p, self.lane.drivers(), source, d)).await;
                if let Ok((l, _)) = &l {
                    if let Some(old) = self.own.replace(l.clone()) {
                        old.close();
                    }
                }
                l.map(|(l, o)| (l, Some(o)))
            } else if let Some(l) = self.lane.current() {
                Ok((l, None))
            } else {
                Box::pin(self.lane.link(p, source, d)).await
            };
            let link = match link {
                Ok((l, o)) => {
                    opened = o.or(opened);
                    l
                }
                Err(e) => {
                    let o = e.connect.map(|connect| Opened {
                        connect,
                        handshake: None,
                    });
                    return fail(e.class, o.or(opened));
                }
            };
            let sent_at = Instant::now();
            let end = match self.stream(p, &link, sent_at, d).await {
                Ok(report) => {
                    return OpReport {
                        connect: opened.map(|o| o.connect),
                        handshake: opened.and_then(|o| o.handshake),
                        ..report
                    }
                }
                Err(end) => end,
            };
            if !matches!(end.fault, Fault::Reset { .. } | Fault::Malformed(_)) {
                self.lane.forget(&link); // a reset ends its stream only
            }
            if end.unprocessed && refused < MAX_REFUSED {
                refused += 1;
                self.op.wrote = false;
                continue;
            }
            let class = words(&end.fault, d);
            if end.unprocessed {
                let tries = refused + 1;
                let s = if tries == 1 { "" } else { "s" };
                d.put(format_args!(" (not processed by the server: sent {tries} time{s})"));
            }
            return fail(class, opened);
        }
    }

    /// One stream: send the request, read the response, judge it.
    async fn stream(
        &mut self,
        p: &super::http::HttpPrep,
        link: &Rc<Link>,
        sent_at: Instant,
        d: &mut Detail,
    ) -> Result<OpReport, Failure> {
        let (r, filled) = self.op.chosen.of(p);
        let (block, body) = match (&r.h2, filled) {
            (Some(h2), _) => (&h2.block, &h2.body),
            (None, Some(f)) => (&f.block, &f.body),
            (None, None) => unreachable!("a request is fixed (its block encoded once) or filled in"),
        };
        let grpc = p.grpc.as_ref();
        let mut wants = r.body_wants();
        wants.keep = if grpc.is_some_and(|g| g.keeps_body()) {
            usize::MAX // a gRPC response's messages, decoded whole
        } else {
            wants.keep.max(QUOTED_BODY) // an unexpected status's start is quoted
        };
        self.op.body.start(wants);
        // gRPC messages spaced in time: the first one opens the stream, the others follow
        let spaced = grpc.filter(|g| g.spaced()).map(|g| (g, g.first_of(body)));
        let carries = match (grpc, &spaced) {
            (None, _) => Carries::Http,
            (Some(_), Some(_)) => Carries::GrpcMore,
            (Some(_), None) => Carries::Grpc,
        };
        let opening = spaced.as_ref().map_or(body, |(_, first)| first);
        let id = poll_fn(|cx| link.poll_open(cx, block, opening, &mut self.op.body, carries)).await?;
        self.op.wrote = true;
        let open = Open {
            link,
            id,
            body: &mut self.op.body,
        };
        if let Some((g, _)) = &spaced {
            Box::pin(g.send_rest(link, id, body)).await;
        }
        let answer = poll_fn(|cx| link.poll_answer(cx, id, open.body)).await;
        std::mem::forget(open); // an answer, good or bad, took the stream out of the map: nothing to reset
        let answer = answer?;
        if let Some(g) = grpc {
            // the messages and bytes that went: a server that answered first (an error at once) left the rest
            let one = g.first_of(body).len().max(1) as u64;
            let sent = (answer.body_sent / one, answer.body_sent);
            return Ok(g.judge(&answer, sent_at, sent, self.op.body.kept(), d));
        }
        let ttfb = answer.headers_at.saturating_duration_since(sent_at);
        let status = answer.status;
        let unexpected = !h1::expected(status, &r.expect_status);
        if unexpected {
            let reason = reason_phrase(status);
            d.clear().put(format_args!("HTTP/2 {status} {reason}")).fix();
            d.body_line(self.op.body.kept(), QUOTED_BODY);
        }
        Ok(OpReport {
            outcome: r.judge(unexpected, answer.len, &self.op.body, d),
            ttfb: Some(ttfb),
            bytes: Traffic {
                sent: answer.body_sent,
                received: answer.len,
                payload: answer.len,
                ..Traffic::default()
            },
            ..OpReport::of(Outcome::Ok)
        })
    }
}

/// A status's reason phrase ("" for one HTTP does not name): HTTP/2 sends none, knee's messages show it.
pub(crate) fn reason_phrase(status: u16) -> &'static str {
    hyper::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("")
}

/// Why a stream failed, in words (into `d`), and its class.
pub(crate) fn words(f: &Fault, d: &mut Detail) -> ErrorClass {
    match f {
        Fault::Reset { code, remote } => {
            let from = if *remote { "from the server" } else { "from knee's side" };
            d.clear()
                .put(format_args!("RST_STREAM {} {from}", code_name(*code)))
                .fix();
            ErrorClass::StreamReset
        }
        Fault::GoAway { code } => {
            d.clear()
                .put(format_args!("GOAWAY {} from the server", code_name(*code)))
                .fix();
            ErrorClass::GoAway
        }
        Fault::Closed => {
            d.clear().put(format_args!("connection closed before the response"));
            ErrorClass::Closed
        }
        Fault::Io(e) => {
            d.clear().put(format_args!("HTTP/2 connection: ")).io(e);
            ErrorClass::of_io(e, false)
        }
        Fault::Protocol(why) | Fault::Malformed(why) => {
            // Kept verbatim (fixed): "HTTP/2", "h2c" and a frame's type are not numbers to mask.
            d.clear().put(format_args!("HTTP/2: {why}")).fix();
            ErrorClass::Protocol
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{H2Client, Prepared};
    use crate::spec::ClientSpec;

    /// Every client's task holds the future of any kind of client: an HTTP/2 exchange (its connection's
    /// opening boxed) is no larger than an HTTP/1.1 one, so 10 000 HTTP/1.1 clients do not pay for it.
    #[test]
    fn per_client_state_stays_small() {
        let spec = serde_json::from_str(r#"{"url": "http://127.0.0.1:1/", "http2": true}"#).unwrap();
        let prep = Prepared::new(&ClientSpec::Http(spec), 1, &crate::data::Feeders::default(), "k").unwrap();
        let mut c = H2Client::new(prep, None, 0);
        let mut d = crate::outcome::Detail::default();
        let size = std::mem::size_of_val(&c.exchange(&mut d));
        assert!(size <= 768, "an HTTP/2 exchange's future is {size} bytes");
        assert!(std::mem::size_of::<H2Client>() <= 128);
    }

    /// An operation that ends before its response (a timeout, the run's end) drops its stream, which gives the
    /// client back the body checks it lent the stream: its next response reuses their buffers.
    #[test]
    fn a_stream_dropped_before_its_answer_gives_the_client_its_body_checks_back() {
        use std::future::Future;
        use std::task::{Context, Waker};
        let spec = serde_json::from_str(r#"{"url": "http://127.0.0.1:1/", "http2": true}"#).unwrap();
        let prep = Prepared::new(&ClientSpec::Http(spec), 1, &crate::data::Feeders::default(), "k").unwrap();
        let Prepared::Http(p) = &*prep else {
            unreachable!("an http spec")
        };
        let mut c = H2Client::new(prep.clone(), None, 0);
        let link = std::rc::Rc::new(super::Link::new());
        let mut d = crate::outcome::Detail::default();
        let mut cx = Context::from_waker(Waker::noop());
        {
            let mut op = std::pin::pin!(c.stream(p, &link, std::time::Instant::now(), &mut d));
            assert!(op.as_mut().poll(&mut cx).is_pending(), "the stream opens and waits");
            link.answering(1, b"the start");
        }
        assert_eq!(c.op.body.kept(), b"the start");
    }

    #[test]
    fn the_request_s_header_block_is_encoded_once_and_checked() {
        use hyper::header::{HeaderName, HeaderValue};
        let url: hyper::Uri = "https://knee.example:8443/a?b=c".parse().unwrap();
        let h = |n: &str, v: &str| {
            (
                HeaderName::from_bytes(n.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            )
        };
        let p = super::H2Prep::new(&url, &hyper::Method::POST, &[h("X-Run", "7")], Some(2), b"ab", 1).unwrap();
        let mut want = vec![0x83, 0x87]; // :method POST, :scheme https (static)
        want.extend([0x01, 17]);
        want.extend(b"knee.example:8443");
        want.extend([0x04, 6]);
        want.extend(b"/a?b=c");
        want.extend([0x00, 5]);
        want.extend(b"x-run");
        want.extend([1, b'7']);
        want.extend([0x0f, 13, 1, b'2']); // content-length (static name 28)
        assert_eq!(p.block, want);
        let err = super::H2Prep::new(&url, &hyper::Method::GET, &[h("TE", "gzip")], None, b"", 1).err();
        assert!(err.is_some_and(|e| e.contains("\"te\" may only be \"trailers\"")));
        assert!(super::H2Prep::new(&url, &hyper::Method::GET, &[h("te", "trailers")], None, b"", 1).is_ok());
        assert!(super::H2Prep::new(&url, &hyper::Method::GET, &[h("connection", "close")], None, b"", 1).is_err());
    }
}
