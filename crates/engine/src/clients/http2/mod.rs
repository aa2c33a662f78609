//! HTTP/2 clients (the `h2` crate, which hyper's HTTP/2 is built on: used directly for the stream and
//! connection errors' codes, the GOAWAY's last stream id and the flow-control windows). Over TLS the
//! protocol is chosen by ALPN (`h2`); over `http://` it is spoken with prior knowledge (h2c).
//!
//! A group's clients are streams: ⌈clients / streams⌉ connections per shard, each shared by up to
//! `streams` clients of one engine thread (`lane`). A stream the server never processed — above the last
//! stream id of its GOAWAY, or refused with REFUSED_STREAM — is sent again (RFC 9113 §8.7: such a request
//! may be retried safely; after a GOAWAY, on a new connection), at most `MAX_REFUSED` times; then it
//! fails as `goaway` / `rst_stream`. Since the server never saw it, it is counted once, as what finally
//! became of it. Any other RST_STREAM or GOAWAY fails the operation with that class and the frame's error
//! code; a reset ends its stream only, the connection carries on.

use std::net::IpAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use hyper::header::{HeaderName, HeaderValue, CONNECTION, TRANSFER_ENCODING, UPGRADE};
use hyper::{Method, Request, Uri};

use super::dial::Opened;
use super::Prepared;
use super::{h1, net};
use crate::cancel::{race, Cancel};
use crate::class::ErrorClass;
use crate::outcome::{Detail, OpReport, Outcome, Traffic};

mod goaway;
mod lane;

use lane::Link;
pub(crate) use lane::{Lane, Lanes};

/// Times a stream the server never processed is sent again on a new connection before the operation fails.
const MAX_REFUSED: u32 = 3;
/// Body bytes kept to quote in the reason of a response with an unexpected status.
const QUOTED_BODY: usize = 240;
/// Flow-control windows: large enough that a stream's window never limits a response on loopback (the
/// receiver reads as data arrives and gives the window back as it goes), like h2load's defaults.
const STREAM_WINDOW: u32 = 16 << 20;
const CONNECTION_WINDOW: u32 = 1 << 30;

/// A group's request in HTTP/2's form, and its connections.
pub(crate) struct H2Prep {
    method: Method,
    uri: Uri,
    headers: hyper::HeaderMap,
    body: Bytes,
    /// Connections per shard: ⌈clients / streams⌉ (`HttpSpec::shared_connections`).
    pub connections: u64,
    pub builder: ::h2::client::Builder,
}

impl H2Prep {
    /// `length`: the Content-Length to send, if any; `connections`: the group's in this shard.
    pub fn new(
        url: &Uri,
        method: &Method,
        headers: &[(HeaderName, HeaderValue)],
        length: Option<usize>,
        body: &[u8],
        connections: u64,
    ) -> Result<H2Prep, String> {
        // Empty unless headers are set: cloning an empty map (once per request) allocates nothing.
        let mut map = hyper::HeaderMap::new();
        for (n, v) in headers {
            if [CONNECTION, TRANSFER_ENCODING, UPGRADE].contains(n) || n.as_str() == "keep-alive" {
                return Err(format!(
                    "headers {n:?} is connection-specific, which HTTP/2 forbids (RFC 9113 §8.2.2); drop it"
                ));
            }
            map.append(n.clone(), v.clone());
        }
        if let Some(n) = length {
            map.insert(hyper::header::CONTENT_LENGTH, HeaderValue::from(n));
        }
        let mut builder = ::h2::client::Builder::new();
        builder
            .initial_window_size(STREAM_WINDOW)
            .initial_connection_window_size(CONNECTION_WINDOW)
            .enable_push(false);
        Ok(H2Prep {
            method: method.clone(),
            uri: url.clone(),
            headers: map,
            body: Bytes::copy_from_slice(body),
            connections,
            builder,
        })
    }

    fn request(&self) -> Request<()> {
        let mut req = Request::new(());
        *req.method_mut() = self.method.clone();
        *req.uri_mut() = self.uri.clone();
        *req.headers_mut() = self.headers.clone();
        req
    }
}

/// One client: a stream of its lane's connection per operation (with `new_connection`, a connection of
/// its own per operation).
pub(crate) struct H2Client {
    prep: Arc<Prepared>,
    lane: Rc<Lane>,
    /// This client's handle on its current connection (cloned once per connection, not per request: a
    /// clone and its drop each take the connection's lock).
    handle: Option<(Rc<Link>, ::h2::client::SendRequest<Bytes>)>,
    /// The body, kept only when a body check needs it (or to quote an unexpected status's).
    body: Vec<u8>,
    /// The current operation's request was handed to a connection (it may have reached the server).
    wrote: bool,
    /// The local address the connections this client opens come from when its lane has none (a connection
    /// per operation); None: the kernel picks.
    source: Option<IpAddr>,
}

/// Why a stream ended without a response, and whether its connection may carry more streams (a reset
/// ends the stream only).
enum StreamEnd {
    /// The server never processed it: send it again.
    Unprocessed(::h2::Error),
    Failed(ErrorClass, bool),
}

impl StreamEnd {
    fn of(e: ::h2::Error, unprocessed: bool, d: &mut Detail) -> StreamEnd {
        if unprocessed {
            StreamEnd::Unprocessed(e)
        } else {
            StreamEnd::Failed(words(&e, d), e.is_reset())
        }
    }

    /// The connection may carry more streams.
    fn connection_ok(&self) -> bool {
        match self {
            StreamEnd::Unprocessed(e) => e.is_reset(),
            StreamEnd::Failed(_, ok) => *ok,
        }
    }
}

impl H2Client {
    /// `lane`: the client's share of a connection (None: it opens its own, one per operation); `client`: its
    /// number in its group (it picks the source address of the connections it opens).
    pub fn new(prep: Arc<Prepared>, lane: Option<Rc<Lane>>, client: u64) -> H2Client {
        let source = match &*prep {
            Prepared::Http(p) => net::source_for(p.sources(), client),
            _ => None,
        };
        H2Client {
            prep,
            lane: lane.unwrap_or_default(),
            handle: None,
            body: Vec::new(),
            wrote: false,
            source,
        }
    }

    pub async fn run(&mut self, cancel: &mut Cancel<'_>, d: &mut Detail) -> OpReport {
        let mut report = race!(cancel, self.exchange(d));
        report.unsent = matches!(report.outcome, Outcome::Abandoned) && !self.wrote;
        if matches!(&*self.prep, Prepared::Http(p) if p.new_connection) {
            self.handle = None; // its connection closes with the operation
        }
        report
    }

    async fn exchange(&mut self, d: &mut Detail) -> OpReport {
        let prep = self.prep.clone();
        let Prepared::Http(p) = &*prep else {
            unreachable!("an http client always has an http prep")
        };
        let h2 = p.h2.as_ref().expect("an HTTP/2 client has its HTTP/2 prep");
        let mut opened: Option<Opened> = None;
        let mut refused = 0u32;
        self.wrote = false;
        loop {
            let fail = |class, opened: Option<Opened>| OpReport {
                connect: opened.map(|o| o.connect),
                handshake: opened.and_then(|o| o.handshake),
                ..OpReport::of(Outcome::Fail(class))
            };
            let source = self.lane.source.or(self.source);
            // Opening a connection is boxed: its futures (the dial, the preface) are large and rare, and
            // would otherwise sit in every client's task, HTTP/1.1 clients' too (the task holds any kind).
            let link = if p.new_connection {
                Box::pin(lane::open(p, self.lane.drivers(), source, d))
                    .await
                    .map(|(l, o)| (l, Some(o)))
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
            let end = match self.stream(p, h2, &link, sent_at, d).await {
                Ok(report) => {
                    return OpReport {
                        connect: opened.map(|o| o.connect),
                        handshake: opened.and_then(|o| o.handshake),
                        ..report
                    }
                }
                Err(end) => end,
            };
            if !end.connection_ok() {
                self.lane.forget(&link);
            }
            match end {
                StreamEnd::Unprocessed(_) if refused < MAX_REFUSED => {
                    refused += 1;
                    self.wrote = false;
                }
                StreamEnd::Unprocessed(e) => {
                    let class = if e.is_reset() {
                        ErrorClass::StreamReset
                    } else {
                        ErrorClass::GoAway
                    };
                    words(&e, d);
                    let tries = refused + 1;
                    let s = if tries == 1 { "" } else { "s" };
                    d.put(format_args!(" (not processed by the server: sent {tries} time{s})"));
                    return fail(class, opened);
                }
                StreamEnd::Failed(class, _) => return fail(class, opened),
            }
        }
    }

    /// One stream: send the request, read the response, judge it.
    async fn stream(
        &mut self,
        p: &super::http::HttpPrep,
        h2: &H2Prep,
        link: &Rc<Link>,
        sent_at: Instant,
        d: &mut Detail,
    ) -> Result<OpReport, StreamEnd> {
        let judge = |e: ::h2::Error, id: Option<u32>, d: &mut Detail| {
            let unprocessed = id.is_none_or(|id| link.unprocessed(id))
                || (e.is_reset() && e.is_remote() && e.reason() == Some(::h2::Reason::REFUSED_STREAM));
            StreamEnd::of(e, unprocessed, d)
        };
        if !self.handle.as_ref().is_some_and(|(l, _)| Rc::ptr_eq(l, link)) {
            self.handle = Some((link.clone(), link.send.clone()));
        }
        let (_, send) = self.handle.as_mut().expect("set above");
        let no_body = h2.body.is_empty();
        self.wrote = true;
        // No `ready()` first: this handle carries one stream at a time, so it never has one waiting to open
        // (the only case `send_request` refuses); a stream over the server's limit waits inside the library.
        let (response, mut out) = match send.send_request(h2.request(), no_body) {
            Ok(pair) => pair,
            Err(e) => return Err(judge(e, None, d)),
        };
        let id = u32::from(response.stream_id());
        if !no_body {
            // Queued: the connection sends it as the stream's window allows.
            if let Err(e) = out.send_data(h2.body.clone(), true) {
                return Err(judge(e, Some(id), d));
            }
        }
        let response = match response.await {
            Ok(r) => r,
            Err(e) => return Err(judge(e, Some(id), d)),
        };
        let ttfb = sent_at.elapsed();
        let status = response.status();
        let unexpected = !h1::expected(status.as_u16(), &p.expect_status);
        if unexpected {
            let reason = status.canonical_reason().unwrap_or("");
            d.clear().put(format_args!("HTTP/2 {} {reason}", status.as_u16())).fix();
        }
        let keep = p.checks_body() || unexpected;
        let limit = if p.checks_body() { usize::MAX } else { QUOTED_BODY };
        self.body.clear();
        let mut body = response.into_body();
        let mut len = 0u64;
        while let Some(chunk) = body.data().await {
            let chunk = match chunk {
                Ok(c) => c,
                Err(e) => return Err(StreamEnd::of(e, false, d)),
            };
            len += chunk.len() as u64;
            if keep {
                let room = limit.saturating_sub(self.body.len());
                self.body.extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            let _ = body.flow_control().release_capacity(chunk.len());
        }
        if unexpected {
            d.body_line(&self.body, QUOTED_BODY);
        }
        Ok(OpReport {
            outcome: p.judge(unexpected, len, &self.body, d),
            ttfb: Some(ttfb),
            bytes: Traffic {
                sent: h2.body.len() as u64,
                received: len,
                payload: len,
            },
            ..OpReport::of(Outcome::Ok)
        })
    }
}

/// An HTTP/2 error in words (into `d`), and its class.
fn words(e: &::h2::Error, d: &mut Detail) -> ErrorClass {
    let code = e.reason().unwrap_or(::h2::Reason::NO_ERROR);
    let from = if e.is_remote() {
        "from the server"
    } else {
        "from knee's side"
    };
    if e.is_reset() {
        d.clear().put(format_args!("RST_STREAM {code:?} {from}")).fix();
        ErrorClass::StreamReset
    } else if e.is_go_away() {
        d.clear().put(format_args!("GOAWAY {code:?} {from}")).fix();
        ErrorClass::GoAway
    } else if let Some(io) = e.get_io() {
        // The library reports the server's close as a broken pipe, whatever was under way.
        if io.kind() == std::io::ErrorKind::BrokenPipe {
            d.clear().put(format_args!("connection closed before the response"));
            ErrorClass::Closed
        } else {
            d.clear().put(format_args!("HTTP/2 connection: ")).io(io);
            ErrorClass::of_io(io, false)
        }
    } else {
        d.clear().put(format_args!("HTTP/2: {e}"));
        ErrorClass::Protocol
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
        let prep = Prepared::new(&ClientSpec::Http(spec), 1, "k").unwrap();
        let mut c = H2Client::new(prep, None, 0);
        let mut d = crate::outcome::Detail::default();
        let size = std::mem::size_of_val(&c.exchange(&mut d));
        assert!(size <= 768, "an HTTP/2 exchange's future is {size} bytes");
        assert!(std::mem::size_of::<H2Client>() <= 128);
    }
}
