//! One HTTP/2 connection (RFC 9113), knee's own: a `Link` its clients open streams on, and a `Driver`
//! task that writes what they queued and reads the server's frames. Nothing is built per request but
//! the stream's entry: a request's header block was encoded once for its group and is copied into a
//! HEADERS frame; a response's header block is decoded for its `:status` only (`hpack`), its DATA
//! counted (and kept, as far as the client asked) and its flow-control credit given back in bulk.
//!
//! What the server said of a stream it never processed is kept apart, so that the client may send it
//! again: a stream above the last stream id of its GOAWAY, or reset with REFUSED_STREAM (RFC 9113 §8.7).

use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::hash::{BuildHasherDefault, Hasher};
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::hpack;
use crate::clients::dial::Conn;

// Frame types and flags (RFC 9113 §6).
const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const PRIORITY: u8 = 0x2;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PUSH_PROMISE: u8 = 0x5;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const WINDOW_UPDATE: u8 = 0x8;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY_FLAG: u8 = 0x20;

// Error codes (RFC 9113 §7).
const NO_ERROR: u32 = 0x0;
const PROTOCOL_ERROR: u32 = 0x1;
const FLOW_CONTROL_ERROR: u32 = 0x3;
const FRAME_SIZE_ERROR: u32 = 0x6;
pub const REFUSED_STREAM: u32 = 0x7;
const CANCEL: u32 = 0x8;
const COMPRESSION_ERROR: u32 = 0x9;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Flow-control windows: large enough that a stream's window never limits a response on loopback (the
/// credit is given back when half of it is used), like h2load's defaults.
const STREAM_WINDOW: u32 = 16 << 20;
const CONNECTION_WINDOW: u32 = 1 << 30;
/// Every window starts at this (RFC 9113 §6.9.2), the largest one may reach is `MAX_WINDOW`.
const DEFAULT_WINDOW: i64 = 65_535;
const MAX_WINDOW: i64 = (1 << 31) - 1;
/// The largest frame knee accepts (SETTINGS_MAX_FRAME_SIZE left at its default) and sends at first.
const MAX_FRAME: usize = 16_384;
/// The largest response header block knee takes (its CONTINUATION frames together).
const MAX_HEADER_BLOCK: usize = 1 << 20;
const READ_BUFFER: usize = 64 << 10;
/// The highest stream id: a connection that reached it takes no more streams.
const LAST_ID: u32 = (1 << 31) - 1;

/// Why a stream ended without a response.
#[derive(Clone, Debug)]
pub(crate) enum Fault {
    /// RST_STREAM with this error code (`remote`: the server sent it).
    Reset {
        code: u32,
        remote: bool,
    },
    /// The server's GOAWAY with this error code.
    GoAway {
        code: u32,
    },
    /// The server closed the connection.
    Closed,
    Io(Rc<io::Error>),
    /// The server broke the protocol (knee closed the connection with GOAWAY).
    Protocol(Rc<str>),
}

/// A stream's failure; `unprocessed`: the server never processed it (it may be sent again).
#[derive(Debug)]
pub(crate) struct Failure {
    pub fault: Fault,
    pub unprocessed: bool,
}

/// A response: its status, when its headers came, the length of its body.
pub(crate) struct Answer {
    pub status: u16,
    pub headers_at: Instant,
    pub len: u64,
}

/// A connection error: its code, and why (for the streams' failures).
struct ConnError(u32, String);

struct Stream {
    status: Option<u16>,
    headers_at: Option<Instant>,
    len: u64,
    /// The body, as far as `keep` bytes (the client's buffer, lent for the stream's life).
    body: Vec<u8>,
    keep: usize,
    /// How it ended (None: it is open).
    end: Option<Result<(), Failure>>,
    waker: Option<Waker>,
    send_window: i64,
    /// The request body still to send, and how much of it went.
    pending: Option<(Bytes, usize)>,
    /// Bytes received and not yet given back to the server's window.
    unacked: u32,
}

/// Stream ids are consecutive odd numbers: a multiplication spreads them.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.0 = u64::from(n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

struct State {
    /// Frames to write.
    out: Vec<u8>,
    next_id: u32,
    streams: HashMap<u32, Stream, BuildHasherDefault<IdHasher>>,
    /// Streams open on the wire (counted against the server's SETTINGS_MAX_CONCURRENT_STREAMS).
    active: usize,
    max_streams: usize,
    /// Clients waiting for a stream to close (the server's limit was reached).
    waiting: Vec<Waker>,
    send_window: i64,
    initial_send_window: i64,
    /// The largest frame the server takes.
    max_frame: usize,
    /// The server's GOAWAY: last stream id, error code.
    goaway: Option<(u32, u32)>,
    /// The connection is over, and why.
    ended: Option<Fault>,
    /// No new streams: close once the open ones are done.
    closing: bool,
    driver: Option<Waker>,
    /// Bytes received on the connection and not yet given back.
    unacked: u32,
    hpack: hpack::Decoder,
    /// A header block arriving in CONTINUATION frames: its stream, its bytes, END_STREAM.
    block: Option<(u32, Vec<u8>, bool)>,
    /// The server's first SETTINGS came.
    settled: bool,
}

/// Where a connection's clients open streams.
pub(crate) struct Link {
    st: RefCell<State>,
}

fn frame_head(out: &mut Vec<u8>, len: usize, ty: u8, flags: u8, id: u32) {
    out.extend_from_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8, ty, flags]);
    out.extend_from_slice(&id.to_be_bytes());
}

fn window_update(out: &mut Vec<u8>, id: u32, increment: u32) {
    frame_head(out, 4, WINDOW_UPDATE, 0, id);
    out.extend_from_slice(&increment.to_be_bytes());
}

fn rst_stream(out: &mut Vec<u8>, id: u32, code: u32) {
    frame_head(out, 4, RST_STREAM, 0, id);
    out.extend_from_slice(&code.to_be_bytes());
}

fn u32_at(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// A frame's payload without its padding.
fn unpad(flags: u8, payload: &[u8]) -> Result<&[u8], ConnError> {
    if flags & PADDED == 0 {
        return Ok(payload);
    }
    let (&pad, rest) = payload
        .split_first()
        .ok_or_else(|| ConnError(PROTOCOL_ERROR, "a padded frame without its pad length".into()))?;
    rest.len()
        .checked_sub(usize::from(pad))
        .map(|n| &rest[..n])
        .ok_or_else(|| ConnError(PROTOCOL_ERROR, "padding longer than its frame".into()))
}

impl Link {
    /// A new connection's link: the client preface, knee's SETTINGS (no push, a stream window of
    /// `STREAM_WINDOW`) and the connection's window raised to `CONNECTION_WINDOW`, queued.
    pub fn new() -> Link {
        let mut out = Vec::with_capacity(4096);
        out.extend_from_slice(PREFACE);
        frame_head(&mut out, 12, SETTINGS, 0, 0);
        out.extend_from_slice(&[0, 2, 0, 0, 0, 0]); // SETTINGS_ENABLE_PUSH 0
        out.extend_from_slice(&[0, 4]);
        out.extend_from_slice(&STREAM_WINDOW.to_be_bytes()); // SETTINGS_INITIAL_WINDOW_SIZE
        window_update(&mut out, 0, CONNECTION_WINDOW - DEFAULT_WINDOW as u32);
        Link {
            st: RefCell::new(State {
                out,
                next_id: 1,
                streams: HashMap::default(),
                active: 0,
                max_streams: usize::MAX,
                waiting: Vec::new(),
                send_window: DEFAULT_WINDOW,
                initial_send_window: DEFAULT_WINDOW,
                max_frame: MAX_FRAME,
                goaway: None,
                ended: None,
                closing: false,
                driver: None,
                unacked: 0,
                hpack: hpack::Decoder::default(),
                block: None,
                settled: false,
            }),
        }
    }

    /// New streams may be opened on it.
    pub fn usable(&self) -> bool {
        self.st.borrow().refusal().is_none()
    }

    /// Open a stream: its HEADERS (`block`, the group's header block) and its DATA (`body`, as the windows
    /// allow) queued. Waits while the server's limit of concurrent streams is reached. `buf`: the client's
    /// body buffer, lent to the stream (given back by `poll_answer`); `keep`: how much body to keep in it.
    pub fn poll_open(
        &self,
        cx: &mut Context<'_>,
        block: &[u8],
        body: &Bytes,
        keep: usize,
        buf: &mut Vec<u8>,
    ) -> Poll<Result<u32, Failure>> {
        let mut s = self.st.borrow_mut();
        if let Some(fault) = s.refusal() {
            return Poll::Ready(Err(Failure {
                fault,
                unprocessed: true,
            }));
        }
        if s.active >= s.max_streams {
            s.waiting.push(cx.waker().clone());
            return Poll::Pending;
        }
        let id = s.next_id;
        s.next_id += 2;
        if s.next_id > LAST_ID {
            s.closing = true;
        }
        s.active += 1;
        let last = if body.is_empty() { END_STREAM } else { 0 };
        let max = s.max_frame;
        let out = &mut s.out;
        if block.len() <= max {
            frame_head(out, block.len(), HEADERS, END_HEADERS | last, id);
            out.extend_from_slice(block);
        } else {
            let mut chunks = block.chunks(max).peekable();
            let mut ty = HEADERS;
            let mut flags = last;
            while let Some(c) = chunks.next() {
                let end = if chunks.peek().is_none() { END_HEADERS } else { 0 };
                frame_head(out, c.len(), ty, flags | end, id);
                out.extend_from_slice(c);
                ty = CONTINUATION;
                flags = 0;
            }
        }
        let mut lent = std::mem::take(buf);
        lent.clear();
        let mut stream = Stream {
            status: None,
            headers_at: None,
            len: 0,
            body: lent,
            keep,
            end: None,
            waker: None,
            send_window: s.initial_send_window,
            pending: (!body.is_empty()).then(|| (body.clone(), 0)),
            unacked: 0,
        };
        if stream.pending.is_some() {
            let State {
                out,
                send_window,
                max_frame,
                ..
            } = &mut *s;
            push_data(out, send_window, *max_frame, id, &mut stream);
        }
        s.streams.insert(id, stream);
        s.wake_driver();
        Poll::Ready(Ok(id))
    }

    /// The response of stream `id`, once it ended (the body buffer is given back into `buf`).
    pub fn poll_answer(&self, cx: &mut Context<'_>, id: u32, buf: &mut Vec<u8>) -> Poll<Result<Answer, Failure>> {
        let mut s = self.st.borrow_mut();
        let Some(st) = s.streams.get_mut(&id) else {
            return Poll::Ready(Err(Failure {
                fault: Fault::Closed,
                unprocessed: false,
            }));
        };
        let Some(end) = st.end.take() else {
            if !st.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                st.waker = Some(cx.waker().clone());
            }
            return Poll::Pending;
        };
        let st = s.streams.remove(&id).expect("found above");
        *buf = st.body;
        Poll::Ready(end.map(|()| Answer {
            status: st.status.expect("a stream ends well only with its status"),
            headers_at: st.headers_at.expect("set with the status"),
            len: st.len,
        }))
    }

    /// The operation of stream `id` ended before its response (timeout, stop): reset it (CANCEL).
    pub fn cancel(&self, id: u32) {
        let mut s = self.st.borrow_mut();
        let Some(st) = s.streams.remove(&id) else { return };
        if st.end.is_none() {
            s.active -= 1;
            if s.ended.is_none() {
                rst_stream(&mut s.out, id, CANCEL);
                s.wake_driver();
            }
            s.wake_waiting();
        }
    }

    /// Open no more streams on it; it closes (GOAWAY, then the socket) once its streams are done.
    pub fn close(&self) {
        let mut s = self.st.borrow_mut();
        s.closing = true;
        s.wake_driver();
    }
}

/// Queue as much of a stream's request body as the windows allow.
fn push_data(out: &mut Vec<u8>, conn_window: &mut i64, max_frame: usize, id: u32, st: &mut Stream) {
    let Some((body, sent)) = &mut st.pending else { return };
    while *sent < body.len() {
        let room = st.send_window.min(*conn_window).min(max_frame as i64);
        if room <= 0 {
            return;
        }
        let n = (body.len() - *sent).min(room as usize);
        let flags = if *sent + n == body.len() { END_STREAM } else { 0 };
        frame_head(out, n, DATA, flags, id);
        out.extend_from_slice(&body[*sent..*sent + n]);
        *sent += n;
        st.send_window -= n as i64;
        *conn_window -= n as i64;
    }
    st.pending = None;
}

impl State {
    /// Why no new stream may be opened, if none may.
    fn refusal(&self) -> Option<Fault> {
        if let Some(f) = &self.ended {
            return Some(f.clone());
        }
        if let Some((_, code)) = self.goaway {
            return Some(Fault::GoAway { code });
        }
        self.closing.then_some(Fault::Closed)
    }

    fn wake_driver(&self) {
        if let Some(w) = &self.driver {
            w.wake_by_ref();
        }
    }

    fn wake_waiting(&mut self) {
        for w in self.waiting.drain(..) {
            w.wake();
        }
    }

    /// End stream `id` (if it is open) with `end`.
    fn finish(&mut self, id: u32, end: Result<(), Failure>) {
        let Some(st) = self.streams.get_mut(&id) else { return };
        if st.end.is_some() {
            return;
        }
        if st.pending.take().is_some() && self.ended.is_none() {
            // The response came before the whole request went: the rest is not needed.
            rst_stream(&mut self.out, id, CANCEL);
        }
        st.end = Some(end);
        if let Some(w) = st.waker.take() {
            w.wake();
        }
        self.active -= 1;
        self.wake_waiting();
    }

    /// A stream the server broke the protocol on: reset it and fail it.
    fn stream_error(&mut self, id: u32, why: &str) {
        if self.streams.get(&id).is_some_and(|st| st.end.is_none()) {
            rst_stream(&mut self.out, id, PROTOCOL_ERROR);
            self.finish(
                id,
                Err(Failure {
                    fault: Fault::Protocol(why.into()),
                    unprocessed: false,
                }),
            );
        }
    }

    /// The connection is over: every open stream fails (with the GOAWAY's code if one came, `fault` if
    /// not; above the GOAWAY's last stream id they were failed as unprocessed when it came).
    fn end_all(&mut self, fault: Fault) {
        if self.ended.is_some() {
            return;
        }
        let open: Vec<u32> = self
            .streams
            .iter()
            .filter(|(_, st)| st.end.is_none())
            .map(|(id, _)| *id)
            .collect();
        let goaway = self.goaway;
        self.ended = Some(fault.clone());
        for id in open {
            let fault = match goaway {
                Some((_, code)) => Fault::GoAway { code },
                None => fault.clone(),
            };
            self.finish(
                id,
                Err(Failure {
                    fault,
                    unprocessed: false,
                }),
            );
        }
        self.driver = None;
        self.wake_waiting();
    }

    fn frame(&mut self, ty: u8, flags: u8, id: u32, payload: &[u8]) -> Result<(), ConnError> {
        if let Some((bid, _, _)) = &self.block {
            if ty != CONTINUATION || id != *bid {
                return Err(ConnError(PROTOCOL_ERROR, "a frame inside a header block".into()));
            }
        }
        let stream_frame = matches!(ty, DATA | HEADERS | PRIORITY | RST_STREAM | CONTINUATION);
        if stream_frame && id == 0 {
            return Err(ConnError(PROTOCOL_ERROR, format!("a frame of type {ty} on stream 0")));
        }
        match ty {
            DATA => self.data(flags, id, payload)?,
            HEADERS => {
                let mut block = unpad(flags, payload)?;
                if flags & PRIORITY_FLAG != 0 {
                    block = block.get(5..).ok_or_else(|| {
                        ConnError(FRAME_SIZE_ERROR, "a HEADERS frame too short for its priority".into())
                    })?;
                }
                let end = flags & END_STREAM != 0;
                if flags & END_HEADERS != 0 {
                    self.headers(id, block, end)?;
                } else {
                    self.block = Some((id, block.to_vec(), end));
                }
            }
            CONTINUATION => {
                let Some((_, buf, _)) = &mut self.block else {
                    return Err(ConnError(PROTOCOL_ERROR, "CONTINUATION without HEADERS".into()));
                };
                buf.extend_from_slice(payload);
                if buf.len() > MAX_HEADER_BLOCK {
                    return Err(ConnError(PROTOCOL_ERROR, "a response header block above 1 MiB".into()));
                }
                if flags & END_HEADERS != 0 {
                    let (id, buf, end) = self.block.take().expect("checked above");
                    self.headers(id, &buf, end)?;
                }
            }
            RST_STREAM => {
                if payload.len() != 4 {
                    return Err(ConnError(
                        FRAME_SIZE_ERROR,
                        "an RST_STREAM frame not 4 bytes long".into(),
                    ));
                }
                let code = u32_at(payload);
                let failure = Failure {
                    fault: Fault::Reset { code, remote: true },
                    unprocessed: code == REFUSED_STREAM,
                };
                self.finish(id, Err(failure));
            }
            SETTINGS => self.settings(flags, id, payload)?,
            PUSH_PROMISE => {
                return Err(ConnError(
                    PROTOCOL_ERROR,
                    "PUSH_PROMISE, though knee disabled push".into(),
                ))
            }
            PING => {
                if payload.len() != 8 || id != 0 {
                    return Err(ConnError(FRAME_SIZE_ERROR, "a PING frame not 8 bytes long".into()));
                }
                if flags & ACK == 0 {
                    frame_head(&mut self.out, 8, PING, ACK, 0);
                    self.out.extend_from_slice(payload);
                }
            }
            GOAWAY => {
                if payload.len() < 8 {
                    return Err(ConnError(
                        FRAME_SIZE_ERROR,
                        "a GOAWAY frame shorter than 8 bytes".into(),
                    ));
                }
                let last = u32_at(payload) & LAST_ID;
                let code = u32_at(&payload[4..]);
                self.goaway = Some((last, code));
                let above: Vec<u32> = self
                    .streams
                    .iter()
                    .filter(|(sid, st)| **sid > last && st.end.is_none())
                    .map(|(sid, _)| *sid)
                    .collect();
                for sid in above {
                    let failure = Failure {
                        fault: Fault::GoAway { code },
                        unprocessed: true,
                    };
                    self.finish(sid, Err(failure));
                }
                self.wake_waiting();
            }
            WINDOW_UPDATE => {
                if payload.len() != 4 {
                    return Err(ConnError(
                        FRAME_SIZE_ERROR,
                        "a WINDOW_UPDATE frame not 4 bytes long".into(),
                    ));
                }
                let inc = i64::from(u32_at(payload) & LAST_ID);
                if id == 0 {
                    if inc == 0 {
                        return Err(ConnError(PROTOCOL_ERROR, "a WINDOW_UPDATE of 0".into()));
                    }
                    self.send_window += inc;
                    if self.send_window > MAX_WINDOW {
                        return Err(ConnError(
                            FLOW_CONTROL_ERROR,
                            "the connection's window above 2^31 - 1".into(),
                        ));
                    }
                } else if let Some(st) = self.streams.get_mut(&id) {
                    st.send_window += inc;
                }
                self.push_bodies();
            }
            _ => {} // PRIORITY, and frame types knee does not know, are ignored (RFC 9113 §4.1)
        }
        Ok(())
    }

    fn data(&mut self, flags: u8, id: u32, payload: &[u8]) -> Result<(), ConnError> {
        // The whole frame counts against the windows, padding too; the credit goes back in bulk.
        let n = payload.len() as u32;
        self.unacked += n;
        if self.unacked >= CONNECTION_WINDOW / 2 {
            window_update(&mut self.out, 0, self.unacked);
            self.unacked = 0;
        }
        let data = unpad(flags, payload)?;
        let Some(st) = self.streams.get_mut(&id).filter(|st| st.end.is_none()) else {
            return Ok(()); // a stream knee reset (or one it never opened)
        };
        if st.status.is_none() {
            self.stream_error(id, "DATA before the response's headers");
            return Ok(());
        }
        st.len += data.len() as u64;
        let room = st.keep.saturating_sub(st.body.len());
        st.body.extend_from_slice(&data[..data.len().min(room)]);
        if flags & END_STREAM != 0 {
            self.finish(id, Ok(()));
        } else {
            st.unacked += n;
            if st.unacked >= STREAM_WINDOW / 2 {
                window_update(&mut self.out, id, st.unacked);
                st.unacked = 0;
            }
        }
        Ok(())
    }

    fn headers(&mut self, id: u32, block: &[u8], end: bool) -> Result<(), ConnError> {
        // Decoded whatever became of the stream: the dynamic table must follow the server's.
        let status = self
            .hpack
            .decode(block)
            .map_err(|e| ConnError(COMPRESSION_ERROR, format!("a response header block with {}", e.0)))?;
        let Some(st) = self.streams.get_mut(&id).filter(|st| st.end.is_none()) else {
            return Ok(());
        };
        if st.status.is_none() {
            match status {
                None => {
                    self.stream_error(id, "a response without :status");
                    return Ok(());
                }
                Some(s) if s < 200 => {
                    if end {
                        self.stream_error(id, "an informational response that ends the stream");
                    }
                    return Ok(()); // 1xx: the response follows
                }
                Some(s) => {
                    st.status = Some(s);
                    st.headers_at = Some(Instant::now());
                }
            }
        }
        if end {
            self.finish(id, Ok(()));
        }
        Ok(())
    }

    fn settings(&mut self, flags: u8, id: u32, payload: &[u8]) -> Result<(), ConnError> {
        if id != 0 {
            return Err(ConnError(PROTOCOL_ERROR, "SETTINGS on a stream".into()));
        }
        if flags & ACK != 0 {
            return Ok(());
        }
        if !payload.len().is_multiple_of(6) {
            return Err(ConnError(
                FRAME_SIZE_ERROR,
                "a SETTINGS frame not a multiple of 6 bytes".into(),
            ));
        }
        for s in payload.chunks(6) {
            let value = u32_at(&s[2..]);
            match u16::from_be_bytes([s[0], s[1]]) {
                0x3 => {
                    self.max_streams = value as usize;
                    self.wake_waiting();
                }
                0x4 => {
                    let value = i64::from(value);
                    if value > MAX_WINDOW {
                        return Err(ConnError(FLOW_CONTROL_ERROR, "an initial window above 2^31 - 1".into()));
                    }
                    let delta = value - self.initial_send_window;
                    self.initial_send_window = value;
                    for st in self.streams.values_mut() {
                        st.send_window += delta;
                    }
                }
                0x5 => {
                    if !(MAX_FRAME as u32..1 << 24).contains(&value) {
                        return Err(ConnError(PROTOCOL_ERROR, format!("a maximum frame size of {value}")));
                    }
                    self.max_frame = value as usize;
                }
                _ => {}
            }
        }
        frame_head(&mut self.out, 0, SETTINGS, ACK, 0);
        self.settled = true;
        self.push_bodies();
        Ok(())
    }

    /// Queue the request bodies the windows now allow.
    fn push_bodies(&mut self) {
        let State {
            out,
            send_window,
            max_frame,
            streams,
            ..
        } = self;
        for (id, st) in streams.iter_mut() {
            if st.pending.is_some() {
                push_data(out, send_window, *max_frame, *id, st);
            }
        }
    }
}

/// Drives one connection: writes what its streams queued, reads and dispatches the server's frames.
/// Runs as a task of its engine thread until the connection ends.
pub(crate) struct Driver {
    io: Conn,
    link: Rc<Link>,
    rbuf: Box<[u8]>,
    /// The unread bytes are `rbuf[start..end]`.
    start: usize,
    end: usize,
    wbuf: Vec<u8>,
    written: usize,
    /// knee's GOAWAY (the connection closing) is queued.
    goaway_sent: bool,
}

impl Driver {
    pub fn new(io: Conn, link: Rc<Link>) -> Driver {
        Driver {
            io,
            link,
            rbuf: vec![0; READ_BUFFER].into_boxed_slice(),
            start: 0,
            end: 0,
            wbuf: Vec::with_capacity(4096),
            written: 0,
            goaway_sent: false,
        }
    }

    /// Write what is queued; Ready(Ok) once all of it went.
    fn flush(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            if self.written == self.wbuf.len() {
                self.wbuf.clear();
                self.written = 0;
                std::mem::swap(&mut self.wbuf, &mut self.link.st.borrow_mut().out);
                if self.wbuf.is_empty() {
                    return Pin::new(&mut self.io).poll_flush(cx);
                }
            }
            match Pin::new(&mut self.io).poll_write(cx, &self.wbuf[self.written..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => self.written += n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    /// Dispatch every whole frame read.
    fn dispatch(&mut self) -> Result<(), ConnError> {
        let mut s = self.link.st.borrow_mut();
        while self.end - self.start >= 9 {
            let h = &self.rbuf[self.start..self.start + 9];
            let len = usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]);
            let (ty, flags) = (h[3], h[4]);
            let id = u32_at(&h[5..]) & LAST_ID;
            if !s.settled && ty != SETTINGS {
                let why = if h.starts_with(b"HTTP/") {
                    "the server answered in HTTP/1.x: it does not speak HTTP/2 with prior knowledge (h2c) here".into()
                } else {
                    format!("the server's first frame is of type {ty}, not SETTINGS: is it an HTTP/2 server?")
                };
                return Err(ConnError(PROTOCOL_ERROR, why));
            }
            if len > MAX_FRAME {
                return Err(ConnError(
                    FRAME_SIZE_ERROR,
                    format!("a frame of {len} bytes, above {MAX_FRAME}"),
                ));
            }
            if self.end - self.start < 9 + len {
                break;
            }
            let payload = &self.rbuf[self.start + 9..self.start + 9 + len];
            s.frame(ty, flags, id, payload)?;
            self.start += 9 + len;
        }
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        Ok(())
    }

    /// The connection ended (`fault`): fail what is open, and end the task.
    fn end(&mut self, fault: Fault) -> Poll<()> {
        self.link.st.borrow_mut().end_all(fault);
        Poll::Ready(())
    }
}

impl Future for Driver {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let me = self.get_mut();
        loop {
            if let Poll::Ready(Err(e)) = me.flush(cx) {
                return me.end(Fault::Io(Rc::new(e)));
            }
            if me.end == me.rbuf.len() {
                me.rbuf.copy_within(me.start..me.end, 0);
                me.end -= me.start;
                me.start = 0;
            }
            let mut rb = ReadBuf::new(&mut me.rbuf[me.end..]);
            match Pin::new(&mut me.io).poll_read(cx, &mut rb) {
                Poll::Ready(Ok(())) => {
                    let n = rb.filled().len();
                    if n == 0 {
                        return me.end(Fault::Closed);
                    }
                    me.end += n;
                    if let Err(ConnError(code, why)) = me.dispatch() {
                        // GOAWAY with the error's code (best effort: the connection closes now).
                        let mut s = me.link.st.borrow_mut();
                        frame_head(&mut s.out, 8, GOAWAY, 0, 0);
                        s.out.extend_from_slice(&[0, 0, 0, 0]);
                        s.out.extend_from_slice(&code.to_be_bytes());
                        drop(s);
                        let _ = me.flush(cx);
                        return me.end(Fault::Protocol(why.into()));
                    }
                    continue;
                }
                Poll::Ready(Err(e)) => return me.end(Fault::Io(Rc::new(e))),
                Poll::Pending => {}
            }
            let mut s = me.link.st.borrow_mut();
            if !s.out.is_empty() {
                continue;
            }
            if s.closing && s.active == 0 {
                if !me.goaway_sent {
                    me.goaway_sent = true;
                    frame_head(&mut s.out, 8, GOAWAY, 0, 0);
                    s.out.extend_from_slice(&[0; 4]); // last stream id 0: the server opens none
                    s.out.extend_from_slice(&NO_ERROR.to_be_bytes());
                    continue;
                }
                if me.written == me.wbuf.len() {
                    drop(s);
                    let _ = Pin::new(&mut me.io).poll_shutdown(cx);
                    return me.end(Fault::Closed);
                }
            }
            if !s.driver.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                s.driver = Some(cx.waker().clone());
            }
            return Poll::Pending;
        }
    }
}

/// An HTTP/2 error code's name (RFC 9113 §7).
pub(crate) fn code_name(code: u32) -> std::borrow::Cow<'static, str> {
    const NAMES: [&str; 14] = [
        "NO_ERROR",
        "PROTOCOL_ERROR",
        "INTERNAL_ERROR",
        "FLOW_CONTROL_ERROR",
        "SETTINGS_TIMEOUT",
        "STREAM_CLOSED",
        "FRAME_SIZE_ERROR",
        "REFUSED_STREAM",
        "CANCEL",
        "COMPRESSION_ERROR",
        "CONNECT_ERROR",
        "ENHANCE_YOUR_CALM",
        "INADEQUATE_SECURITY",
        "HTTP_1_1_REQUIRED",
    ];
    match NAMES.get(code as usize) {
        Some(n) => (*n).into(),
        None => format!("error code {code:#x}").into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padding_is_taken_off_and_checked() {
        assert_eq!(unpad(PADDED, &[2, b'a', b'b', 0, 0]).ok(), Some(&b"ab"[..]));
        assert_eq!(unpad(0, b"ab").ok(), Some(&b"ab"[..]));
        assert!(unpad(PADDED, &[3, b'a', 0]).is_err());
        assert!(unpad(PADDED, &[]).is_err());
        assert_eq!(code_name(7), "REFUSED_STREAM");
        assert_eq!(code_name(0x42), "error code 0x42");
    }

    #[test]
    fn a_body_goes_as_the_windows_allow() {
        let link = Link::new();
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        let body = Bytes::from(vec![7u8; 100_000]);
        let mut buf = Vec::new();
        let Poll::Ready(Ok(id)) = link.poll_open(&mut cx, &[0x82], &body, 0, &mut buf) else {
            panic!("the stream opens")
        };
        let mut s = link.st.borrow_mut();
        // 65 535 bytes at first (both windows), in frames of at most 16 384.
        let sent = s.streams[&id].pending.as_ref().map(|(_, n)| *n);
        assert_eq!(sent, Some(65_535));
        s.out.clear();
        s.frame(WINDOW_UPDATE, 0, 0, &100_000u32.to_be_bytes()).ok().unwrap();
        assert!(s.out.is_empty(), "the stream's own window is still empty");
        s.frame(WINDOW_UPDATE, 0, id, &100_000u32.to_be_bytes()).ok().unwrap();
        assert!(s.streams[&id].pending.is_none());
        // Three DATA frames: 16 384, 16 384, 1 697 (END_STREAM on the last).
        let mut frames = Vec::new();
        let mut b = &s.out[..];
        while b.len() >= 9 {
            let len = usize::from(b[0]) << 16 | usize::from(b[1]) << 8 | usize::from(b[2]);
            frames.push((len, b[3], b[4]));
            b = &b[9 + len..];
        }
        assert_eq!(
            frames,
            [(16_384, DATA, 0), (16_384, DATA, 0), (1_697, DATA, END_STREAM)]
        );
    }

    #[test]
    fn pings_and_settings_are_acknowledged_and_bad_frames_refused() {
        let link = Link::new();
        let mut s = link.st.borrow_mut();
        s.out.clear();
        // SETTINGS_MAX_CONCURRENT_STREAMS 5, SETTINGS_MAX_FRAME_SIZE 32 768.
        s.frame(SETTINGS, 0, 0, &[0, 3, 0, 0, 0, 5, 0, 5, 0, 0, 0x80, 0])
            .ok()
            .unwrap();
        s.frame(PING, 0, 0, b"12345678").ok().unwrap();
        s.frame(PING, ACK, 0, b"abcdefgh").ok().unwrap(); // an acknowledgement is not answered
        assert_eq!((s.max_streams, s.max_frame, s.settled), (5, 32_768, true));
        let mut want = Vec::new();
        frame_head(&mut want, 0, SETTINGS, ACK, 0);
        frame_head(&mut want, 8, PING, ACK, 0);
        want.extend_from_slice(b"12345678");
        assert_eq!(s.out, want);
        assert!(
            s.frame(SETTINGS, 0, 0, &[0, 5, 0, 0, 0, 1]).is_err(),
            "a frame size below 16 384"
        );
        assert!(
            s.frame(SETTINGS, 0, 0, &[0, 4, 0x80, 0, 0, 0]).is_err(),
            "a window above 2^31 - 1"
        );
        assert!(s.frame(PUSH_PROMISE, END_HEADERS, 1, &[0, 0, 0, 2]).is_err());
        assert!(s.frame(DATA, 0, 0, b"x").is_err(), "DATA on stream 0");
        assert!(s.frame(RST_STREAM, 0, 1, &[0, 0]).is_err());
    }
}
