//! WebSocket (RFC 6455), knee's own client as its HTTP/1.1 one is: the opening handshake over a connection the
//! dialer opened (TCP, then TLS for wss://), then masked frames out and frames in, pings answered, a fragmented
//! message put together, a close frame a failure of class `ws_close` with its code and reason.
//!
//! `echo`: an operation is one message and its reply on the connection the client keeps; `session`: connect, the
//! handshake, `messages` exchanges, the close.

use std::future::Future;
use std::net::IpAddr;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use base64::Engine as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::dial::{host_of, parse_url, Conn, Dialer};
use super::template::{uses_of, Filled, Pattern, Template};
use super::Prepared;
use crate::cancel::{race, Cancel};
use crate::class::ErrorClass;
use crate::data::{Draw, Exhausted, Feeders};
use crate::error::{EngineError, SpecError};
use crate::outcome::{Detail, OpReport, Outcome};
use crate::rng::Rng;
use crate::spec::{WsMode, WsSpec};

mod frame;
mod path;

use frame::{parse_header, sha1, GUID, MAX_MESSAGE, OP_BINARY, OP_CLOSE, OP_CONT, OP_PING, OP_PONG, OP_TEXT};

/// How long a session waits for the server to answer its close (RFC 6455 §7.1.1: then it ends the connection
/// itself): a server that never does fails the session, said, instead of holding it to its timeout as hung.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// Bytes of a reply or a close reason quoted in a failure's message.
const QUOTED: usize = 120;

pub(crate) struct WsPrep {
    dialer: Dialer,
    /// `GET path HTTP/1.1` and the handshake's headers (`headers` may hold placeholders), up to the key's value.
    head: Template,
    message: Template,
    /// The data sources the head, the message and `expect` read.
    uses: Vec<usize>,
    binary: bool,
    expect: Option<Pattern>,
    /// `correlate`'s path, parsed.
    correlate: Option<(String, Vec<path::Step>)>,
    mode: WsMode,
    messages: u64,
    interval: Duration,
    hold: Duration,
    pub(super) sources: Vec<IpAddr>,
}

impl WsPrep {
    pub fn new(spec: &WsSpec, feeders: &Feeders, key: &str) -> Result<WsPrep, EngineError> {
        let bad = |what: String| EngineError::Spec(SpecError(format!("{key}.{what}")));
        let url = parse_url(&spec.url, key)?;
        let secure = url.scheme_str() == Some("wss");
        let host = host_of(&url);
        let limit = spec.connect_timeout_ms.map(Duration::from_millis);
        let dialer = Dialer::of_url(
            &url,
            spec.connect_to.as_deref(),
            secure,
            &spec.tls,
            spec.insecure,
            b"http/1.1",
            &spec.source_addrs,
            limit,
            key,
        )?;
        let path = url.path_and_query().map_or("/", |p| p.as_str());
        let authority = url.authority().map_or(host, |a| a.as_str());
        let mut head = format!(
            "GET {path} HTTP/1.1\r\nHost: {authority}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Version: 13\r\n"
        );
        if !spec.subprotocols.is_empty() {
            head.push_str(&format!("Sec-WebSocket-Protocol: {}\r\n", spec.subprotocols.join(", ")));
        }
        for (name, value) in &spec.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("Sec-WebSocket-Key: ");
        let head = Template::compile(&head, feeders, &format!("{key}.headers"), true).map_err(SpecError)?;
        let message = Template::compile(&spec.message, feeders, &format!("{key}.message"), true).map_err(SpecError)?;
        let expect = match &spec.expect {
            Some(p) => Some(Pattern::compile(p, feeders, &format!("{key}.expect")).map_err(SpecError)?),
            None => None,
        };
        let uses = uses_of([
            &head.uses[..],
            &message.uses,
            expect.as_ref().map_or(&[][..], Pattern::uses),
        ]);
        let correlate = match &spec.correlate {
            Some(text) => Some((
                text.clone(),
                path::parse(text)
                    .map_err(|why| bad(format!("correlate {text:?} is not a JSONPath knee reads: {why}")))?,
            )),
            None => None,
        };
        Ok(WsPrep {
            correlate,
            dialer,
            head,
            uses,
            message,
            binary: spec.binary,
            expect,
            mode: spec.mode,
            messages: spec.messages,
            interval: Duration::from_millis(spec.interval_ms),
            hold: Duration::from_millis(spec.hold_ms),
            sources: spec.source_addrs.clone(),
        })
    }
}

/// A websocket client's prep (borrowing the prep alone, so the client's buffers stay free to change).
fn ws_prep(prep: &Prepared) -> &WsPrep {
    let Prepared::Ws(p) = prep else {
        unreachable!("a websocket client always has a websocket prep")
    };
    p
}

/// Why an exchange failed: its class (the words are in the client's `Detail`).
type Failed = ErrorClass;

pub(crate) struct WsClient {
    prep: Arc<Prepared>,
    conn: Option<Conn>,
    /// What was read and not yet taken (frames arrive in pieces, or several in one read).
    rx: Vec<u8>,
    /// A frame to write (the message, a pong, the close).
    tx: Vec<u8>,
    /// This operation's message, rendered.
    out: Vec<u8>,
    /// The handshake's head, rendered (for an operation that opens a connection).
    head: Vec<u8>,
    /// This operation's `expect`, when templated.
    expect_now: Filled,
    /// The reply being put together from its fragments.
    msg: Vec<u8>,
    rng: Rng,
    source: Option<IpAddr>,
    /// Something of this operation reached the service (else a cut-off operation never started).
    wrote: bool,
    /// `correlate`: the value the reply must carry.
    want: Option<serde_json::Value>,
}

impl WsClient {
    pub fn new(prep: Arc<Prepared>, client: u64) -> WsClient {
        WsClient {
            source: prep.source_for(client),
            prep,
            conn: None,
            rx: Vec::with_capacity(4096),
            tx: Vec::new(),
            out: Vec::new(),
            head: Vec::new(),
            expect_now: None,
            msg: Vec::new(),
            rng: Rng::new(0x5753_4b4e_4545 ^ client, client),
            wrote: false,
            want: None,
        }
    }

    fn p(&self) -> &WsPrep {
        ws_prep(&self.prep)
    }

    /// Take this operation's rows and write its message.
    pub fn prepare(&mut self, draw: &mut Draw<'_>) -> Result<(), Exhausted> {
        let p = ws_prep(&self.prep);
        draw.take(&p.uses)?;
        self.out.clear();
        p.message.render(&mut self.out, draw);
        if !p.head.is_fixed() || self.head.is_empty() {
            // a fixed head once for the client; one holding placeholders per operation (it may open a connection)
            self.head.clear();
            p.head.render(&mut self.head, draw);
        }
        self.expect_now = p.expect.as_ref().and_then(|e| e.fill(draw));
        Ok(())
    }

    pub async fn run(&mut self, cancel: &mut Cancel<'_>, d: &mut Detail) -> OpReport {
        self.wrote = false;
        let mut report = race!(cancel, self.operation(d));
        // Cut off before its upgrade request left knee: the service never saw it. One that ran past its timeout while
        // connecting is hung, as an HTTP operation is (it had been counted as never started, and its client stopped).
        report.unsent = report.outcome.unsent(self.wrote);
        // Only a clean echo leaves the connection at a message's boundary and for the next operation; a session
        // and a listen end with their own close.
        if !matches!(report.outcome, Outcome::Ok) || self.p().mode != WsMode::Echo {
            self.conn = None;
        }
        report
    }

    async fn operation(&mut self, d: &mut Detail) -> OpReport {
        let mode = self.p().mode;
        let session = mode == WsMode::Session;
        let mut report = OpReport::of(Outcome::Ok);
        if let Some(Err(why)) = &self.expect_now {
            d.clear().put(format_args!("{why}"));
            report.outcome = Outcome::Fail(ErrorClass::Request);
            return report;
        }
        if self.conn.is_some() && !self.still_open() {
            self.conn = None;
        }
        let t = Instant::now();
        if self.conn.is_none() {
            // Boxed: the dial and the handshake are most of the future, which every client's task holds; one
            // allocation per connection opened.
            match Box::pin(self.open(&mut report, d)).await {
                Ok(()) => {}
                Err(class) => {
                    report.outcome = Outcome::Fail(class);
                    return report;
                }
            }
        }
        if mode == WsMode::Listen {
            // Boxed: its timer and reads would sit in every client's task; one allocation per held connection.
            if let Err(class) = Box::pin(self.listen(&mut report, t, d)).await {
                report.outcome = Outcome::Fail(class);
            }
            return report;
        }
        let (n, interval) = if session {
            (self.p().messages, self.p().interval)
        } else {
            (1, Duration::ZERO)
        };
        for i in 0..n {
            if i > 0 && !interval.is_zero() {
                tokio::time::sleep(interval).await;
            }
            if let Err(class) = self.exchange(&mut report, t, d).await {
                report.outcome = Outcome::Fail(class);
                return report;
            }
        }
        if session {
            // Boxed as the opening is: once per session.
            if let Err(class) = Box::pin(self.close(&mut report, d)).await {
                report.outcome = Outcome::Fail(class);
            }
        }
        report
    }

    /// Listen: send the subscription (if any), count the messages pushed until the hold ends, close. The latency
    /// is the time to the first message (the hold, when none came).
    async fn listen(&mut self, report: &mut OpReport, t: Instant, d: &mut Detail) -> Result<(), Failed> {
        if !self.out.is_empty() {
            self.send_message(report, d).await?;
        }
        let until = t + self.p().hold;
        loop {
            match tokio::time::timeout_at(until.into(), self.next_message(report, d)).await {
                Ok(Ok(len)) => {
                    report.bytes.payload += len as u64;
                    report.latency.get_or_insert_with(|| t.elapsed());
                }
                Ok(Err(class)) => return Err(class),
                Err(_) => break,
            }
        }
        report.latency.get_or_insert(self.p().hold);
        // A message cut off by the hold's end may be half read: the close is written, not waited for.
        self.frame(OP_CLOSE, &1000u16.to_be_bytes());
        self.send(report, d).await
    }

    /// The close handshake: ours, then the server's close (or its end of the connection), within `CLOSE_WAIT`.
    async fn close(&mut self, report: &mut OpReport, d: &mut Detail) -> Result<(), Failed> {
        self.frame(OP_CLOSE, &1000u16.to_be_bytes());
        self.send(report, d).await?;
        let answered = tokio::time::timeout(CLOSE_WAIT, async {
            loop {
                match self.next_frame(report, d).await {
                    Ok(Some((OP_CLOSE, _))) | Err(ErrorClass::Closed) => return Ok(()),
                    Ok(_) => continue,
                    Err(class) => return Err(class),
                }
            }
        });
        answered.await.unwrap_or_else(|_| {
            d.clear().put(format_args!(
                "the server did not answer the session's close within {} s (RFC 6455 §7.1.1)",
                CLOSE_WAIT.as_secs()
            ));
            Err(ErrorClass::Protocol)
        })
    }

    /// Open the connection and make the opening handshake (timed as the connect and TLS phases, the upgrade's
    /// answer as the time to first byte).
    async fn open(&mut self, report: &mut OpReport, d: &mut Detail) -> Result<(), Failed> {
        let (conn, opened) = {
            match ws_prep(&self.prep).dialer.dial(true, self.source, d).await {
                Ok(c) => c,
                Err(e) => {
                    report.connect = e.connect;
                    return Err(e.class);
                }
            }
        };
        report.connect = Some(opened.connect);
        report.handshake = opened.handshake;
        self.conn = Some(conn);
        self.rx.clear();
        let mut nonce = [0u8; 16];
        for chunk in nonce.chunks_mut(8) {
            chunk.copy_from_slice(&self.rng.next_u64().to_le_bytes());
        }
        let key = base64::engine::general_purpose::STANDARD.encode(nonce);
        self.tx.clear();
        self.tx.extend_from_slice(&self.head);
        self.tx.extend_from_slice(key.as_bytes());
        self.tx.extend_from_slice(b"\r\n\r\n");
        let sent = Instant::now();
        self.send(report, d).await?;
        let conn = self.conn.as_mut().expect("opened above");
        let end = loop {
            if let Some(i) = self.rx.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            if self.rx.len() > 64 << 10 {
                d.clear()
                    .put(format_args!("the handshake's answer has no end of headers in 64 kB"));
                return Err(ErrorClass::Protocol);
            }
            read_more(conn, &mut self.rx, d, "reading the handshake's answer").await?;
        };
        if self.p().mode == WsMode::Session {
            report.ttfb = Some(sent.elapsed());
        }
        report.bytes.received += end as u64;
        let mut headers = [httparse::EMPTY_HEADER; 100];
        let mut resp = httparse::Response::new(&mut headers);
        if let Err(e) = resp.parse(&self.rx[..end]) {
            d.clear()
                .put(format_args!("the handshake's answer is not HTTP ({e})"))
                .head_line(&self.rx[..end], QUOTED);
            return Err(ErrorClass::Protocol);
        }
        let status = resp.code.unwrap_or(0);
        if status != 101 {
            d.clear()
                .put(format_args!("HTTP/1.1 {status} {}", resp.reason.unwrap_or("").trim()))
                .fix()
                .put(format_args!(" (the server refused the upgrade to WebSocket)"));
            return Err(ErrorClass::Status);
        }
        let accept = resp
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case("sec-websocket-accept"))
            .map(|h| h.value);
        let want = base64::engine::general_purpose::STANDARD.encode(sha1(&[key.as_bytes(), GUID]));
        if accept != Some(want.as_bytes()) {
            d.clear().put(format_args!(
                "the server's Sec-WebSocket-Accept is not the hash of knee's key: not a WebSocket server"
            ));
            return Err(ErrorClass::Protocol);
        }
        self.rx.drain(..end);
        Ok(())
    }

    /// Send the message and read until its reply.
    async fn exchange(&mut self, report: &mut OpReport, t: Instant, d: &mut Detail) -> Result<(), Failed> {
        // In the client, not the future: it would grow every client's task.
        self.want = match &self.p().correlate {
            Some((text, steps)) => match path::value_at(&self.out, steps) {
                Some(v) => Some(v),
                None => {
                    d.clear()
                        .put(format_args!(
                            "the message has no value at {text} to correlate (not JSON, or no such field): not sent"
                        ))
                        .fix()
                        .quoted(&self.out, QUOTED);
                    return Err(ErrorClass::Request);
                }
            },
            None => None,
        };
        self.send_message(report, d).await?;
        loop {
            let len = self.next_message(report, d).await?;
            report.bytes.payload += len as u64;
            let p = self.p();
            if p.expect
                .as_ref()
                .is_some_and(|e| e.current(&self.expect_now).is_none_or(|re| !re.is_match(&self.msg)))
            {
                continue;
            }
            if let (Some(want), Some((_, steps))) = (&self.want, &p.correlate) {
                if path::value_at(&self.msg, steps).as_ref() != Some(want) {
                    continue; // another exchange's reply (or a message of the server's own)
                }
            }
            // echo: the reply's time; a session: its handshake's answer (set when it opened)
            if p.mode == WsMode::Echo {
                report.ttfb = Some(t.elapsed());
            }
            return Ok(());
        }
    }

    /// The next whole data message (its length; its bytes in `msg`), control frames between its fragments
    /// answered (ping) or skipped (pong).
    async fn next_message(&mut self, report: &mut OpReport, d: &mut Detail) -> Result<usize, Failed> {
        self.msg.clear();
        let mut begun = false;
        loop {
            let Some((op, fin)) = self.next_frame_into_msg(report, d).await? else {
                continue;
            };
            match (op, begun) {
                (OP_CONT, false) => {
                    d.clear()
                        .put(format_args!("a continuation frame with no message begun"));
                    return Err(ErrorClass::Protocol);
                }
                (OP_TEXT | OP_BINARY, true) => {
                    d.clear()
                        .put(format_args!("a new message began inside a fragmented one"));
                    return Err(ErrorClass::Protocol);
                }
                _ => begun = true,
            }
            if fin {
                report.bytes.messages_received += 1;
                return Ok(self.msg.len());
            }
        }
    }

    /// Read one frame; a data frame's payload is appended to `msg` (Some(opcode, fin)); a ping is answered and a
    /// pong skipped (None); a close ends the operation as `ws_close`.
    async fn next_frame_into_msg(
        &mut self,
        report: &mut OpReport,
        d: &mut Detail,
    ) -> Result<Option<(u8, bool)>, Failed> {
        let (op, fin, start, len) = self.read_frame(report, d).await?;
        match op {
            OP_CONT | OP_TEXT | OP_BINARY => {
                if self.msg.len() + len > MAX_MESSAGE {
                    d.clear().put(format_args!("a message over {} MB", MAX_MESSAGE >> 20));
                    return Err(ErrorClass::Protocol);
                }
                self.msg.extend_from_slice(&self.rx[start..start + len]);
                self.rx.drain(..start + len);
                Ok(Some((op, fin)))
            }
            _ => {
                let payload = self.rx[start..start + len].to_vec();
                self.rx.drain(..start + len);
                // Boxed: a control frame is rare, and its future would sit in every client's task.
                Box::pin(self.control(op, &payload, report, d)).await?;
                Ok(None)
            }
        }
    }

    /// Whether the echo connection kept from the last operation is still open. What the server sent while it was
    /// idle is read without waiting (no system call unless the poller saw the socket readable); the connection's
    /// end, or a close frame among it, means the server closed it (an idle timeout) before this operation sent
    /// anything: it opens a new one, where it failed on a close the server never saw a message for.
    fn still_open(&mut self) -> bool {
        let Some(conn) = self.conn.as_mut() else {
            return false;
        };
        let mut d = Detail::default();
        {
            let read = std::pin::pin!(read_more(conn, &mut self.rx, &mut d, "idle"));
            if let Poll::Ready(Err(_)) = read.poll(&mut Context::from_waker(Waker::noop())) {
                return false;
            }
        }
        let mut at = 0;
        while let Ok(Some((op, _, start, len))) = parse_header(&self.rx[at..], &mut d) {
            if op == OP_CLOSE {
                return false;
            }
            at += start + len;
            if at > self.rx.len() {
                break;
            }
        }
        true
    }

    /// The next frame of any kind, for the close handshake: Some((opcode, len)).
    async fn next_frame(&mut self, report: &mut OpReport, d: &mut Detail) -> Result<Option<(u8, usize)>, Failed> {
        let (op, _, start, len) = self.read_frame(report, d).await?;
        let payload = self.rx[start..start + len].to_vec();
        self.rx.drain(..start + len);
        match op {
            OP_CLOSE => Ok(Some((OP_CLOSE, len))),
            OP_PING | OP_PONG => Box::pin(self.control(op, &payload, report, d)).await.map(|_| None),
            _ => Ok(Some((op, len))),
        }
    }

    async fn control(&mut self, op: u8, payload: &[u8], report: &mut OpReport, d: &mut Detail) -> Result<(), Failed> {
        match op {
            OP_PING => {
                self.frame(OP_PONG, payload);
                self.send(report, d).await
            }
            OP_PONG => Ok(()),
            OP_CLOSE => {
                let code = (payload.len() >= 2).then(|| u16::from_be_bytes([payload[0], payload[1]]));
                d.clear();
                match code {
                    Some(c) => d.put(format_args!("close {c}")),
                    None => d.put(format_args!("close without a code")),
                };
                d.fix();
                if payload.len() > 2 {
                    d.quoted(&payload[2..], QUOTED);
                }
                // Answer the close (RFC 6455 §5.5.1); the connection ends either way.
                self.frame(OP_CLOSE, &payload[..payload.len().min(2)]);
                let _ = self.send(report, &mut Detail::default()).await;
                Err(ErrorClass::WsClose)
            }
            _ => {
                d.clear().put(format_args!("a frame of unknown opcode {op:#x}"));
                Err(ErrorClass::Protocol)
            }
        }
    }

    /// Read until `rx` holds a whole frame: (opcode, fin, payload start, payload length).
    async fn read_frame(&mut self, report: &mut OpReport, d: &mut Detail) -> Result<(u8, bool, usize, usize), Failed> {
        loop {
            if let Some(f) = parse_header(&self.rx, d)? {
                let (op, fin, start, len) = f;
                if self.rx.len() >= start + len {
                    report.bytes.received += (start + len) as u64;
                    return Ok((op, fin, start, len));
                }
            }
            let conn = self.conn.as_mut().expect("an open connection");
            read_more(conn, &mut self.rx, d, "reading a message").await?;
        }
    }

    /// Write a masked frame into `tx`.
    fn frame(&mut self, op: u8, payload: &[u8]) {
        self.tx.clear();
        self.tx.push(0x80 | op);
        let n = payload.len();
        if n < 126 {
            self.tx.push(0x80 | n as u8);
        } else if n <= 0xffff {
            self.tx.push(0x80 | 126);
            self.tx.extend_from_slice(&(n as u16).to_be_bytes());
        } else {
            self.tx.push(0x80 | 127);
            self.tx.extend_from_slice(&(n as u64).to_be_bytes());
        }
        let mask = (self.rng.next_u64() as u32).to_ne_bytes();
        self.tx.extend_from_slice(&mask);
        let at = self.tx.len();
        self.tx.extend_from_slice(payload);
        for (i, b) in self.tx[at..].iter_mut().enumerate() {
            *b ^= mask[i & 3];
        }
    }

    /// Write this operation's message (a text frame, or a binary one).
    async fn send_message(&mut self, report: &mut OpReport, d: &mut Detail) -> Result<(), Failed> {
        let op = if self.p().binary { OP_BINARY } else { OP_TEXT };
        let out = std::mem::take(&mut self.out);
        self.frame(op, &out);
        self.out = out;
        self.send(report, d).await
    }

    /// Write `tx` to the connection.
    async fn send(&mut self, report: &mut OpReport, d: &mut Detail) -> Result<(), Failed> {
        let conn = self.conn.as_mut().expect("an open connection");
        self.wrote = true;
        if matches!(self.tx.first().map(|b| b & 0x0f), Some(OP_TEXT | OP_BINARY)) {
            report.bytes.messages_sent += 1;
        }
        let r = match conn.write_all(&self.tx).await {
            Ok(()) => conn.flush().await,
            Err(e) => Err(e),
        };
        match r {
            Ok(()) => {
                report.bytes.sent += self.tx.len() as u64;
                Ok(())
            }
            Err(e) => {
                d.clear()
                    .put(format_args!("sending to {}: ", self.p().dialer.addr))
                    .io(&e);
                Err(ErrorClass::of_io(&e, true))
            }
        }
    }
}

async fn read_more(conn: &mut Conn, rx: &mut Vec<u8>, d: &mut Detail, doing: &str) -> Result<(), Failed> {
    if rx.capacity() - rx.len() < 1024 {
        rx.reserve(4096);
    }
    match conn.read_buf(rx).await {
        Ok(0) => {
            d.clear().put(format_args!(
                "the server closed the connection without a close frame ({doing})"
            ));
            Err(ErrorClass::Closed)
        }
        Ok(_) => Ok(()),
        Err(e) => {
            d.clear().put(format_args!("{doing}: ")).io(&e);
            Err(ErrorClass::of_io(&e, false))
        }
    }
}
