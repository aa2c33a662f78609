//! One HTTP/2 connection (RFC 9113), knee's own: a `Link` its clients open streams on, and a `Driver`
//! task that writes what they queued and reads the server's frames. Nothing is built per request but
//! the stream's entry: a request's header block was encoded once for its group and is copied into a
//! HEADERS frame; a response's header block is decoded for its `:status` only (`hpack`), its DATA
//! counted (and kept, as far as the client asked) and its flow-control credit given back in bulk.
//!
//! What the server said of a stream it never processed is kept apart, so that the client may send it
//! again: a stream above the last stream id of its GOAWAY, or reset with REFUSED_STREAM (RFC 9113 §8.7),
//! or one whose HEADERS had not gone to the socket when the connection ended.
//!
//! Here: the streams' side (open, answer, cancel, close) and the state they share; `recv`: the server's
//! frames; `driver`: the connection's task; `wire`: frame types, codes and the frames knee writes.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::io;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use bytes::Bytes;

use super::hpack;
use crate::clients::bodycheck::BodyCheck;
use wire::*;

mod driver;
mod recv;
#[cfg(test)]
mod tests;
mod wire;

pub(crate) use driver::Driver;
pub(crate) use wire::code_name;

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
    /// The server broke the protocol on this stream only (knee reset it; the connection carries on).
    Malformed(Rc<str>),
}

/// A stream's failure; `unprocessed`: the server never processed it (it may be sent again).
#[derive(Debug)]
pub(crate) struct Failure {
    pub fault: Fault,
    pub unprocessed: bool,
}

/// What a stream carries: an HTTP request, or a gRPC call (its status and messages read as they come) whose body
/// is all given at its opening, or whose messages follow (`Link::send`) until the last.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Carries {
    Http,
    Grpc,
    GrpcMore,
}

/// A response: its status, when its headers came, the length of its body; a gRPC call's status and messages.
pub(crate) struct Answer {
    pub status: u16,
    pub headers_at: Instant,
    pub len: u64,
    pub grpc: Option<Box<GrpcRead>>,
    /// Request body bytes framed to go (a response that came first leaves the rest unsent).
    pub body_sent: u64,
}

/// A gRPC response as it arrives: its status and message (from the block that ends the stream: its trailers, or
/// trailers-only headers), and its messages
/// counted by their 5-byte prefixes (a compressed-flag byte and a 4-byte length).
#[derive(Default)]
pub(crate) struct GrpcRead {
    pub status: Option<u32>,
    /// `grpc-message`, percent-encoded as sent.
    pub message: Option<Box<[u8]>>,
    /// Messages received whole.
    pub messages: u64,
    /// When the first message's prefix came.
    pub first_at: Option<Instant>,
    /// The prefix being read, and how much of it came; the bytes still to come of the message being read.
    prefix: [u8; 5],
    have: usize,
    left: u64,
}

impl GrpcRead {
    /// The next bytes of the body.
    fn feed(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            if self.left > 0 {
                let n = (data.len() as u64).min(self.left);
                self.left -= n;
                data = &data[n as usize..];
                if self.left == 0 {
                    self.messages += 1;
                }
                continue;
            }
            let n = (5 - self.have).min(data.len());
            self.prefix[self.have..self.have + n].copy_from_slice(&data[..n]);
            self.have += n;
            data = &data[n..];
            if self.have == 5 {
                self.have = 0;
                self.first_at.get_or_insert_with(Instant::now);
                self.left = u64::from(u32_at(&self.prefix[1..]));
                if self.left == 0 {
                    self.messages += 1;
                }
            }
        }
    }

    /// The fields gRPC reads of a header block that ends the stream (trailers, or a trailers-only response).
    fn read(&mut self, fields: hpack::Fields) {
        if fields.grpc_status.is_some() {
            self.status = fields.grpc_status;
        }
        if fields.grpc_message.is_some() {
            self.message = fields.grpc_message;
        }
    }
}

struct Stream {
    status: Option<u16>,
    headers_at: Option<Instant>,
    len: u64,
    /// The body as its checks take it (the client's, lent for the stream's life).
    body: BodyCheck,
    /// How it ended (None: it is open).
    end: Option<Result<(), Failure>>,
    waker: Option<Waker>,
    send_window: i64,
    /// The request body still to send, and how much of it went.
    pending: Option<(Bytes, usize)>,
    /// Request body bytes framed so far, in all.
    framed: u64,
    /// Bytes received and not yet given back to the server's window.
    unacked: u32,
    /// Where its HEADERS end in the bytes the connection writes: unwritten when it ends, it never left.
    headers_end: u64,
    /// A gRPC call: its status and messages as they come.
    grpc: Option<Box<GrpcRead>>,
    /// More of the body is to come (`Link::send`): the last DATA so far does not end the stream.
    more: bool,
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
    /// Bytes taken from `out` by the driver so far (those before `out`'s first byte).
    moved: u64,
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
                moved: 0,
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
    /// body checks, started, lent to the stream (given back by `poll_answer`);
    /// `carries`: an HTTP request or a gRPC call (whose body may be followed by more, `Link::send`).
    pub fn poll_open(
        &self,
        cx: &mut Context<'_>,
        block: &[u8],
        body: &Bytes,
        buf: &mut BodyCheck,
        carries: Carries,
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
        let more = carries == Carries::GrpcMore;
        let last = if body.is_empty() && !more { END_STREAM } else { 0 };
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
        let headers_end = s.moved + s.out.len() as u64;
        let mut stream = Stream {
            status: None,
            headers_at: None,
            len: 0,
            body: std::mem::take(buf),
            end: None,
            waker: None,
            send_window: s.initial_send_window,
            pending: (!body.is_empty()).then(|| (body.clone(), 0)),
            framed: 0,
            unacked: 0,
            headers_end,
            grpc: (carries != Carries::Http).then(Box::default),
            more,
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
    pub fn poll_answer(&self, cx: &mut Context<'_>, id: u32, buf: &mut BodyCheck) -> Poll<Result<Answer, Failure>> {
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
            grpc: st.grpc,
            body_sent: st.framed,
        }))
    }

    /// More of stream `id`'s body (`last`: the end of it), queued as the windows allow; false when the stream has
    /// ended (the server answered, or it failed): there is nothing to send it on.
    pub fn send(&self, id: u32, body: &Bytes, last: bool) -> bool {
        let mut s = self.st.borrow_mut();
        let State {
            out,
            send_window,
            max_frame,
            streams,
            ended,
            ..
        } = &mut *s;
        let Some(st) = streams.get_mut(&id).filter(|st| st.end.is_none() && ended.is_none()) else {
            return false;
        };
        st.pending = Some(match st.pending.take() {
            Some((queued, sent)) => ([&queued[sent..], &body[..]].concat().into(), 0),
            None => (body.clone(), 0),
        });
        st.more = !last;
        if body.is_empty() && last && st.pending.as_ref().is_some_and(|(b, _)| b.is_empty()) {
            st.pending = None;
            frame_head(out, 0, DATA, END_STREAM, id);
        } else {
            push_data(out, send_window, *max_frame, id, st);
        }
        s.wake_driver();
        true
    }

    /// Ready once stream `id` has ended (or is not there): what a sender of later messages waits on beside its timer.
    pub fn poll_ended(&self, cx: &mut Context<'_>, id: u32) -> Poll<()> {
        let mut s = self.st.borrow_mut();
        let over = s.ended.is_some();
        match s.streams.get_mut(&id) {
            Some(st) if st.end.is_none() && !over => {
                if !st.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    st.waker = Some(cx.waker().clone());
                }
                Poll::Pending
            }
            _ => Poll::Ready(()),
        }
    }

    /// The operation of stream `id` ended before its response (timeout, stop): reset it (CANCEL). The body checks
    /// lent to it come back (None: the stream was not there), so the client's next response reuses their buffers.
    pub fn cancel(&self, id: u32) -> Option<BodyCheck> {
        let mut s = self.st.borrow_mut();
        let st = s.streams.remove(&id)?;
        if st.end.is_none() {
            s.active -= 1;
            if s.ended.is_none() {
                rst_stream(&mut s.out, id, CANCEL);
                s.wake_driver();
            }
            s.wake_waiting();
        }
        Some(st.body)
    }

    /// Open no more streams on it; it closes (GOAWAY, then the socket) once its streams are done.
    pub fn close(&self) {
        let mut s = self.st.borrow_mut();
        s.closing = true;
        s.wake_driver();
        s.wake_waiting(); // they open their streams elsewhere
    }
}

#[cfg(test)]
impl Link {
    /// The server's response head (`:status 200`) and a first DATA frame of `data` on stream `id`, neither ending
    /// it, as the driver would hand them over (a test without a socket).
    pub(crate) fn answering(&self, id: u32, data: &[u8]) {
        let mut st = self.st.borrow_mut();
        st.frame(HEADERS, END_HEADERS, id, &[0x88]).ok().expect("the head");
        st.frame(DATA, 0, id, data).ok().expect("its body's start");
    }
}

/// Queue as much of a stream's request body as the windows allow.
fn push_data(out: &mut Vec<u8>, conn_window: &mut i64, max_frame: usize, id: u32, st: &mut Stream) {
    let more = st.more;
    let Some((body, sent)) = &mut st.pending else { return };
    while *sent < body.len() {
        let room = st.send_window.min(*conn_window).min(max_frame as i64);
        if room <= 0 {
            return;
        }
        let n = (body.len() - *sent).min(room as usize);
        let flags = if *sent + n == body.len() && !more {
            END_STREAM
        } else {
            0
        };
        frame_head(out, n, DATA, flags, id);
        out.extend_from_slice(&body[*sent..*sent + n]);
        *sent += n;
        st.framed += n as u64;
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
        if (st.pending.take().is_some() || st.more) && end.is_ok() && self.ended.is_none() {
            // The response came before the whole request went: the rest is not needed. (A stream that
            // failed was reset already, by the server or by knee.)
            rst_stream(&mut self.out, id, CANCEL);
        }
        st.end = Some(end);
        if let Some(w) = st.waker.take() {
            w.wake();
        }
        self.active -= 1;
        self.wake_waiting();
    }

    /// A stream the server broke the protocol on: reset it (`code`) and fail it.
    fn stream_error(&mut self, id: u32, code: u32, why: &str) {
        if self.streams.get(&id).is_some_and(|st| st.end.is_none()) {
            rst_stream(&mut self.out, id, code);
            self.finish(
                id,
                Err(Failure {
                    fault: Fault::Malformed(why.into()),
                    unprocessed: false,
                }),
            );
        }
    }

    /// The connection is over: every open stream fails (with the GOAWAY's code if one came, `fault` if
    /// not; above the GOAWAY's last stream id they were failed as unprocessed when it came). `written`:
    /// the bytes that went to the socket; a stream whose HEADERS were not among them never left, and is
    /// unprocessed.
    fn end_all(&mut self, fault: Fault, written: u64) {
        if self.ended.is_some() {
            return;
        }
        let open: Vec<(u32, bool)> = self
            .streams
            .iter()
            .filter(|(_, st)| st.end.is_none())
            .map(|(id, st)| (*id, st.headers_end > written))
            .collect();
        let goaway = self.goaway;
        self.ended = Some(fault.clone());
        for (id, unsent) in open {
            let fault = match goaway {
                Some((_, code)) => Fault::GoAway { code },
                None => fault.clone(),
            };
            self.finish(
                id,
                Err(Failure {
                    fault,
                    unprocessed: unsent,
                }),
            );
        }
        self.driver = None;
        self.wake_waiting();
    }
}
