//! A minimal HTTP/1.1 client exchange over any `AsyncRead + AsyncWrite` stream: write pre-built
//! request bytes with one write, parse the response head with `httparse` from a reusable read
//! buffer, then count (and only when a check needs it, keep) the body. Handles `Content-Length`,
//! chunked and close-delimited bodies, 1xx interim responses, HEAD and 204/304.
//!
//! No allocation per request once a client's buffers have grown to fit its responses.

use std::io;
use std::mem::MaybeUninit;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::bodycheck::{BodyCheck, Wants, QUOTED_BODY};
use crate::class::ErrorClass;
use crate::outcome::Detail;

/// First size of a client's read buffer (it fits a typical small response); it grows only for
/// larger heads or bodies. Small, because 10 000 idle clients each hold one.
const INITIAL_BUF: usize = 1024;
/// A read leaves at least this much room, else the buffer doubles first.
const MIN_SPARE: usize = 512;
/// Largest read the buffer grows to while skipping a large body.
const MAX_READ: usize = 64 * 1024;
/// A response head (or chunk-size line, or trailer) longer than this is a protocol error.
const MAX_HEAD: usize = 64 * 1024;
/// Response headers parsed on the common path (on the stack).
const MAX_HEADERS: usize = 100;
/// Response headers parsed at most (a head of more than MAX_HEADERS is parsed again with this room).
const MANY_HEADERS: usize = 4096;

/// Why an exchange failed (its message is in the client's `Detail`). `fresh` = nothing of a
/// response arrived (the write failed, or the connection closed or reset first): on a reused
/// keep-alive connection that may mean the server closed it while idle, and the request may be sent
/// again on a new connection. `unsent` = not a byte of the request was written (the write failed): the
/// server cannot have taken it, whatever its method.
pub(crate) struct Failure {
    pub class: ErrorClass,
    pub fresh: bool,
    pub unsent: bool,
    /// Request bytes written before it failed (all of them once the response's reading began, but for an answer
    /// that came before the server had read the whole request).
    pub sent: u64,
    /// Its response head had come (a reset or a bad chunk in the body): the time to it.
    pub ttfb: Option<Duration>,
    /// Response bytes read before it failed.
    pub wire: u64,
}

impl Failure {
    /// A failure of `class` that moved nothing of note.
    fn of(class: ErrorClass) -> Failure {
        Failure {
            class,
            fresh: false,
            unsent: false,
            sent: 0,
            ttfb: None,
            wire: 0,
        }
    }

    /// What this failure had moved by then: `sent` request bytes written, `wire` bytes read, the head after `ttfb`.
    fn after(mut self, sent: usize, wire: u64, ttfb: Option<Duration>) -> Failure {
        self.sent = sent as u64;
        self.wire = wire;
        self.ttfb = ttfb;
        self
    }
}

fn fail<T>(d: &mut Detail, class: ErrorClass, msg: std::fmt::Arguments<'_>) -> Result<T, Failure> {
    d.clear().put(msg);
    Err(Failure::of(class))
}

/// An I/O error `e` while `what` (reading the response): `fresh`, before any of it came (a reused connection the
/// server had closed).
fn read_fail<T>(d: &mut Detail, e: &io::Error, what: &str, fresh: bool) -> Result<T, Failure> {
    d.clear().put(format_args!("{what}: ")).io(e);
    Err(Failure {
        fresh,
        ..Failure::of(ErrorClass::of_io(e, false))
    })
}

/// Writing the request failed after `written` of its bytes: unsent (it may go out again on a new connection) only
/// when none went out.
fn write_fail<T>(d: &mut Detail, e: &io::Error, written: usize) -> Result<T, Failure> {
    d.clear().put(format_args!("sending the request: ")).io(e);
    Err(Failure {
        fresh: true,
        unsent: written == 0,
        sent: written as u64,
        ..Failure::of(ErrorClass::of_io(e, true))
    })
}

/// A finished exchange.
pub(crate) struct Response {
    /// The status is outside the request's `expect_status`: the client's `Detail` holds the status
    /// line and the start of the body.
    pub unexpected: bool,
    /// Body bytes (decoded, for chunked bodies).
    pub len: u64,
    /// Bytes of the whole response as received (head, framing and body).
    pub wire: u64,
    /// From before the write to the final response head parsed.
    pub ttfb: Duration,
    /// The connection may carry another request.
    pub reusable: bool,
    /// Request bytes written: all of them, or fewer when the server answered before it had read the whole request
    /// (a 413 to an upload it refused) and closed.
    pub sent: u64,
}

/// A client's read buffer: `buf[pos..]` is received but not yet consumed.
#[derive(Default)]
pub(crate) struct Rx {
    buf: Vec<u8>,
    pos: usize,
    /// Bytes consumed since the connection opened (so an exchange knows its response's size).
    consumed: u64,
}

impl Rx {
    /// Forget leftovers (a new connection).
    pub fn reset(&mut self) {
        self.buf.clear();
        self.pos = 0;
        self.consumed = 0;
    }

    fn unread(&self) -> &[u8] {
        &self.buf[self.pos..]
    }

    fn consume(&mut self, n: usize) {
        self.consumed += n as u64;
        self.pos += n;
        if self.pos >= self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        }
    }

    /// Read more bytes after the unread ones; `want` = how many the caller could use (grows the
    /// buffer up to `MAX_READ` for large bodies). `Ok(0)` = end of stream.
    async fn fill<S: AsyncRead + Unpin>(&mut self, s: &mut S, want: usize) -> io::Result<usize> {
        if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        let cap = self.buf.capacity();
        if cap == 0 {
            self.buf.reserve_exact(INITIAL_BUF);
        } else {
            let spare = cap - self.buf.len();
            if spare < MIN_SPARE || (spare < want && cap < MAX_READ) {
                self.buf.reserve(cap);
            }
        }
        s.read_buf(&mut self.buf).await
    }
}

/// How the response body is delimited.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Framing {
    Empty,
    Length(u64),
    Chunked,
    UntilClose,
}

/// What the exchange needs to know about a parsed response head.
#[derive(Clone, Copy)]
struct Head {
    status: u16,
    /// Bytes of the head, status line to the blank line.
    len: usize,
    /// Where the reason phrase is in the head's bytes.
    reason: (usize, usize),
    http10: bool,
    length: Option<u64>,
    chunked: bool,
    /// A Transfer-Encoding other than chunked last: the body runs to the connection's close.
    other_coding: bool,
    close: bool,
    keep_alive: bool,
}

fn has_token(value: &[u8], token: &str) -> bool {
    value
        .split(|b| *b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

/// Heads up to this size are remembered (`HeadMemo`).
const MEMO_HEAD: usize = 512;

/// The last complete response head this thread parsed, and its parse. Many services answer with the
/// same head again and again (nginx's changes with its Date header, once a second); parsing checks every
/// byte of it (a third of the engine's work per keep-alive request), while comparing it with the last
/// one is a memcmp. The same bytes parse the same way, so a match is the parse, exactly.
struct HeadMemo {
    bytes: Vec<u8>,
    head: Option<Head>,
}

thread_local! {
    static MEMO: std::cell::RefCell<HeadMemo> =
        const { std::cell::RefCell::new(HeadMemo { bytes: Vec::new(), head: None }) };
}

/// `parse_head`, through this thread's memo of the last complete head.
fn parse_head_memo(data: &[u8]) -> Result<Option<Head>, String> {
    MEMO.with(|m| {
        let mut m = m.borrow_mut();
        if let Some(h) = m.head {
            if data.len() >= h.len && data[..h.len] == m.bytes[..] {
                return Ok(Some(h));
            }
        }
        let parsed = parse_head(data)?;
        if let Some(h) = parsed.filter(|h| h.len <= MEMO_HEAD) {
            m.bytes.clear();
            m.bytes.extend_from_slice(&data[..h.len]);
            m.head = Some(h);
        }
        Ok(parsed)
    })
}

/// Parse a response head from `data`: `Ok(None)` = incomplete. A head of more than MAX_HEADERS header lines (many
/// Set-Cookie or tracing headers: valid, and curl takes it) is parsed again with room for MANY_HEADERS, off the
/// common path.
fn parse_head(data: &[u8]) -> Result<Option<Head>, String> {
    let mut headers = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    match parse_head_in(data, &mut headers) {
        Err(httparse::Error::TooManyHeaders) => {
            let mut many = vec![httparse::EMPTY_HEADER; MANY_HEADERS];
            let mut resp = httparse::Response::new(&mut many);
            match httparse::ParserConfig::default().parse_response(&mut resp, data) {
                Ok(httparse::Status::Complete(n)) => head_of(data, &resp, n).map(Some),
                Ok(httparse::Status::Partial) => Ok(None),
                Err(e) => Err(format!("invalid response head ({e})")),
            }
        }
        Err(e) => Err(format!("invalid response head ({e})")),
        Ok(None) => Ok(None),
        Ok(Some((resp, n))) => head_of(data, &resp, n).map(Some),
    }
}

/// Parse into `headers`: the response and its head's length, None when incomplete.
fn parse_head_in<'h, 'b>(
    data: &'b [u8],
    headers: &'h mut [MaybeUninit<httparse::Header<'b>>],
) -> Result<Option<(httparse::Response<'h, 'b>, usize)>, httparse::Error> {
    let mut resp = httparse::Response::new(&mut []);
    match httparse::ParserConfig::default().parse_response_with_uninit_headers(&mut resp, data, headers)? {
        httparse::Status::Complete(n) => Ok(Some((resp, n))),
        httparse::Status::Partial => Ok(None),
    }
}

/// The head of parsed response `resp` (`len` bytes of `data`).
fn head_of(data: &[u8], resp: &httparse::Response<'_, '_>, len: usize) -> Result<Head, String> {
    let reason = resp.reason.map_or((0, 0), |r| {
        let at = r.as_ptr() as usize - data.as_ptr() as usize;
        (at, at + r.len())
    });
    let mut head = Head {
        status: resp.code.unwrap_or_default(),
        len,
        reason,
        http10: resp.version == Some(0),
        length: None,
        chunked: false,
        other_coding: false,
        close: false,
        keep_alive: false,
    };
    for h in resp.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            let n = std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .ok_or_else(|| format!("invalid Content-Length {:?}", String::from_utf8_lossy(h.value)))?;
            if head.length.is_some_and(|m| m != n) {
                return Err("conflicting Content-Length headers".to_string());
            }
            head.length = Some(n);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            let last = h.value.rsplit(|b| *b == b',').next().unwrap_or_default().trim_ascii();
            head.chunked = last.eq_ignore_ascii_case(b"chunked");
            head.other_coding = !head.chunked;
        } else if h.name.eq_ignore_ascii_case("connection") {
            head.close |= has_token(h.value, "close");
            head.keep_alive |= has_token(h.value, "keep-alive");
        }
    }
    Ok(head)
}

/// Whether `status` is in one of the inclusive ranges.
pub(crate) fn expected(status: u16, ranges: &[(u16, u16)]) -> bool {
    ranges.iter().any(|(lo, hi)| (*lo..=*hi).contains(&status))
}

/// Read until a final (non-1xx) response head is parsed; returns it, consumed from `rx`. A status
/// outside `expect` has its status line written to `d` (the start of the failure's reason).
async fn read_head<S: AsyncRead + Unpin>(
    s: &mut S,
    rx: &mut Rx,
    expect: &[(u16, u16)],
    d: &mut Detail,
) -> Result<Head, Failure> {
    let mut received = false;
    loop {
        if !rx.unread().is_empty() {
            match parse_head_memo(rx.unread()) {
                Ok(Some(h)) if (100..200).contains(&h.status) && h.status != 101 => {
                    rx.consume(h.len);
                    continue;
                }
                Ok(Some(h)) => {
                    if !expected(h.status, expect) {
                        let reason = String::from_utf8_lossy(&rx.unread()[h.reason.0..h.reason.1]);
                        let v = if h.http10 { 0 } else { 1 };
                        d.clear()
                            .put(format_args!("HTTP/1.{v} {} {}", h.status, reason.trim()))
                            .fix();
                    }
                    rx.consume(h.len);
                    return Ok(h);
                }
                Ok(None) if rx.unread().len() > MAX_HEAD => {
                    return fail(
                        d,
                        ErrorClass::Protocol,
                        format_args!("response head over {MAX_HEAD} bytes"),
                    )
                }
                Ok(None) => {}
                Err(e) => return fail(d, ErrorClass::Protocol, format_args!("{e}")),
            }
        }
        let had = rx.unread().len();
        match rx.fill(s, 0).await {
            Ok(0) if had == 0 && !received => {
                d.clear().put(format_args!("connection closed before a response"));
                return Err(Failure {
                    fresh: true,
                    ..Failure::of(ErrorClass::Closed)
                });
            }
            Ok(0) => {
                return fail(
                    d,
                    ErrorClass::Closed,
                    format_args!("connection closed after {had} bytes of a response head"),
                )
            }
            Ok(_) => received = true,
            Err(e) => return read_fail(d, &e, "reading the response", !received),
        }
    }
}

/// A response body being read: the connection, its read buffer, what its checks take of it and where
/// a failure's message goes. Each framing has its reader; they read more in one way (`more`).
struct Body<'a, S> {
    s: &'a mut S,
    rx: &'a mut Rx,
    keep: &'a mut BodyCheck,
    d: &'a mut Detail,
}

impl<S: AsyncRead + Unpin> Body<'_, S> {
    /// Read more bytes after the unread ones (`want` as for `Rx::fill`); `Ok(0)` = the stream ended.
    async fn more(&mut self, want: usize) -> Result<usize, Failure> {
        match self.rx.fill(&mut *self.s, want).await {
            Ok(n) => Ok(n),
            Err(e) => read_fail(self.d, &e, "reading the body", false),
        }
    }

    /// Consume `n` body bytes (to the checks' `keep`).
    async fn take(&mut self, n: u64) -> Result<(), Failure> {
        let mut left = n;
        while left > 0 {
            if self.rx.unread().is_empty() && self.more(usize::try_from(left).unwrap_or(usize::MAX)).await? == 0 {
                return fail(
                    self.d,
                    ErrorClass::Closed,
                    format_args!("connection closed after {} of {n} body bytes", n - left),
                );
            }
            let data = self.rx.unread();
            let take = data.len().min(usize::try_from(left).unwrap_or(usize::MAX));
            self.keep.put(&data[..take]);
            self.rx.consume(take);
            left -= take as u64;
        }
        Ok(())
    }

    /// Read until a line end (CRLF) is buffered; returns the line's length without it.
    async fn line(&mut self, what: &str) -> Result<usize, Failure> {
        loop {
            if let Some(i) = self.rx.unread().windows(2).position(|w| w == b"\r\n") {
                return Ok(i);
            }
            if self.rx.unread().len() > MAX_HEAD {
                return fail(
                    self.d,
                    ErrorClass::Protocol,
                    format_args!("{what} over {MAX_HEAD} bytes"),
                );
            }
            if self.more(0).await? == 0 {
                return fail(
                    self.d,
                    ErrorClass::Closed,
                    format_args!("connection closed in a {what}"),
                );
            }
        }
    }

    /// Decode a chunked body; returns its decoded length.
    async fn chunked(&mut self) -> Result<u64, Failure> {
        let mut total = 0u64;
        loop {
            self.line("chunk size line").await?;
            let size = match httparse::parse_chunk_size(self.rx.unread()) {
                Ok(httparse::Status::Complete((n, size))) => {
                    self.rx.consume(n);
                    size
                }
                _ => return fail(self.d, ErrorClass::Protocol, format_args!("invalid chunk size line")),
            };
            if size == 0 {
                break;
            }
            self.take(size).await?;
            total += size;
            if self.line("chunk end").await? != 0 {
                return fail(
                    self.d,
                    ErrorClass::Protocol,
                    format_args!("chunk data longer than its size"),
                );
            }
            self.rx.consume(2);
        }
        // Trailer fields, then the blank line.
        loop {
            let n = self.line("trailer").await?;
            self.rx.consume(n + 2);
            if n == 0 {
                return Ok(total);
            }
        }
    }

    /// Read a close-delimited body; returns its length.
    async fn until_close(&mut self) -> Result<u64, Failure> {
        let mut total = 0u64;
        loop {
            let data = self.rx.unread();
            total += data.len() as u64;
            self.keep.put(data);
            self.rx.consume(data.len());
            match self.rx.fill(&mut *self.s, MAX_READ).await {
                Ok(0) => return Ok(total),
                Ok(_) => {}
                // TLS without close_notify (many servers close the TCP connection alone, rustls says so): the
                // body ends with the connection, as on plain TCP and as curl reads it
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(total),
                Err(e) => return read_fail(self.d, &e, "reading the body", false),
            }
        }
    }
}

/// What one request looks like on the wire, built once per group.
pub(crate) struct Request<'a> {
    pub bytes: &'a [u8],
    /// A HEAD request: responses carry no body.
    pub head: bool,
    /// Statuses that count as success (an unexpected one gets its reason recorded).
    pub expect_status: &'a [(u16, u16)],
    /// What the checks need of the response's body.
    pub wants: Wants<'a>,
}

/// Send `req` and read one response. `body` = the body as the checks want it (`req.wants`); a response with
/// an unexpected status keeps the start of its body instead, quoted in `d`.
pub(crate) async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    req: &Request<'_>,
    rx: &mut Rx,
    body: &mut BodyCheck,
    d: &mut Detail,
) -> Result<Response, Failure> {
    let sent = Instant::now();
    // Unsent (so that it may go out again on a new connection) only while nothing of it was written: a POST cut off
    // mid-body (a server refusing an upload early) may have been taken, and went out twice. Cut off mid-request, the
    // server may have answered before it closed (413 to an upload it refuses, 401 before reading the body): that
    // answer is what the operation got, as curl reports it, not the write's reset.
    let mut written = 0;
    let mut cut = None;
    while written < req.bytes.len() {
        match s.write(&req.bytes[written..]).await {
            Ok(0) => return write_fail(d, &io::ErrorKind::WriteZero.into(), written),
            Ok(n) => written += n,
            Err(e) if written > 0 => {
                cut = Some(e);
                break;
            }
            Err(e) => return write_fail(d, &e, written),
        }
    }
    if cut.is_none() {
        if let Err(e) = s.flush().await {
            return write_fail(d, &e, written);
        }
    }
    let start = rx.consumed;
    let got = |rx: &Rx| rx.consumed + rx.unread().len() as u64 - start; // read so far, consumed or not
    let whole = cut.is_none();
    let head = match (read_head(s, rx, req.expect_status, d).await, cut) {
        (Ok(h), _) => h,
        (Err(f), None) => return Err(f.after(written, got(rx), None)),
        // Cut off mid-request: no answer came before the connection ended, so the write's error is the failure.
        (Err(_), Some(e)) => return write_fail(d, &e, written),
    };
    let ttfb = sent.elapsed();
    let unexpected = !expected(head.status, req.expect_status);
    body.start(if unexpected {
        Wants::quote(QUOTED_BODY)
    } else {
        req.wants
    });
    let framing = if req.head || head.status == 204 || head.status == 304 || head.status == 101 {
        Framing::Empty
    } else if head.chunked {
        Framing::Chunked
    } else if head.other_coding {
        Framing::UntilClose
    } else {
        head.length.map_or(Framing::UntilClose, Framing::Length)
    };
    let mut reader = Body {
        s: &mut *s,
        rx: &mut *rx,
        keep: &mut *body,
        d: &mut *d,
    };
    let read = match framing {
        Framing::Empty => Ok(0),
        Framing::Length(n) => reader.take(n).await.map(|()| n),
        Framing::Chunked => reader.chunked().await,
        Framing::UntilClose => reader.until_close().await,
    };
    // a body cut off (a reset, a bad chunk) after the head: the failure counts what it moved, and its ttfb
    let len = read.map_err(|f| f.after(written, got(rx), Some(ttfb)))?;
    if unexpected {
        d.body_line(body.kept(), QUOTED_BODY);
    }
    let reusable = whole
        && framing != Framing::UntilClose
        && head.status != 101
        && !head.close
        && (!head.http10 || head.keep_alive)
        && !(head.chunked && head.length.is_some());
    Ok(Response {
        unexpected,
        len,
        wire: rx.consumed - start,
        ttfb,
        reusable,
        sent: written as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::{parse_head, parse_head_memo};

    #[test]
    fn heads_are_parsed_with_their_framing_headers() {
        let h = parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\nConnection: keep-alive, Close\r\n\r\nbody")
            .unwrap()
            .unwrap();
        assert_eq!(
            (h.status, h.length, h.close, h.http10, h.len),
            (200, Some(12), true, false, 70)
        );
        let h = parse_head(b"HTTP/1.0 404 Nope\r\ntransfer-encoding: gzip, chunked\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(h.chunked && h.http10 && !h.other_coding && h.status == 404);
        assert!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Le").unwrap().is_none());
        assert!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n").is_err());
        assert!(parse_head(b"garbage\r\n\r\n").is_err());
    }

    /// The memo gives the parse of the same bytes, and nothing else: a head that differs anywhere, a head
    /// not yet complete, or bytes that do not parse are parsed afresh.
    #[test]
    fn the_memo_is_the_parse_of_the_same_bytes() {
        let head = |d: &[u8]| parse_head_memo(d).map(|h| h.map(|h| (h.status, h.length, h.close, h.len)));
        let a = b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n";
        assert_eq!(
            head(&[&a[..], b"body"].concat()),
            Ok(Some((200, Some(12), false, a.len())))
        );
        assert_eq!(
            head(&[&a[..], b"other body"].concat()),
            Ok(Some((200, Some(12), false, a.len())))
        );
        let b = b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\n";
        assert_eq!(head(b), Ok(Some((200, Some(13), false, b.len()))));
        assert_eq!(head(&b[..b.len() - 1]), Ok(None));
        assert!(head(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n").is_err());
        let c = b"HTTP/1.1 503 Busy\r\nConnection: close\r\n\r\n";
        assert_eq!(head(c), Ok(Some((503, None, true, c.len()))));
        assert_eq!(head(b), Ok(Some((200, Some(13), false, b.len()))));
    }
}
