//! The task that drives one connection: it writes what the connection's streams queued (one write carries
//! them all) and reads and dispatches the server's frames, until the connection ends.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::wire::*;
use super::{Fault, Link};
use crate::clients::dial::Conn;

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
    /// Bytes written to the socket so far.
    total: u64,
    /// knee's GOAWAY (the connection closing) is queued.
    goaway_sent: bool,
    /// knee's side is shut (GOAWAY sent, the write side closed): it reads until the server closes, so
    /// that no unread byte makes the kernel reset the connection and drop what the server had not read
    /// yet (the last requests, which knee counted as sent).
    shut: bool,
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
            total: 0,
            goaway_sent: false,
            shut: false,
        }
    }

    /// Write what is queued; Ready(Ok) once all of it went.
    fn flush(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.shut {
            self.link.st.borrow_mut().out.clear(); // replies to what still comes: too late to write
            return Poll::Ready(Ok(()));
        }
        loop {
            if self.written == self.wbuf.len() {
                self.wbuf.clear();
                self.written = 0;
                let mut s = self.link.st.borrow_mut();
                std::mem::swap(&mut self.wbuf, &mut s.out);
                s.moved += self.wbuf.len() as u64;
                drop(s);
                if self.wbuf.is_empty() {
                    return Pin::new(&mut self.io).poll_flush(cx);
                }
            }
            match Pin::new(&mut self.io).poll_write(cx, &self.wbuf[self.written..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => {
                    self.written += n;
                    self.total += n as u64;
                }
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
                let line = self.rbuf[self.start..self.end]
                    .split(|&b| b == b'\r' || b == b'\n')
                    .next();
                let text = line.filter(|l| l.iter().all(|b| b.is_ascii_graphic() || *b == b' '));
                let why = if h.starts_with(b"HTTP/") {
                    "the server answered in HTTP/1.x: it does not speak HTTP/2 with prior knowledge (h2c) here".into()
                } else if let Some(text) = text {
                    let text = String::from_utf8_lossy(&text[..text.len().min(40)]);
                    format!("the server answered with text, not HTTP/2 frames ({text:?}): is it an HTTP/2 server?")
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
        self.link.st.borrow_mut().end_all(fault, self.total);
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
            // Nothing more to read now; what clients queued while a write was blocked goes once it drains.
            let mut s = me.link.st.borrow_mut();
            if s.closing && s.active == 0 && !me.shut {
                if !me.goaway_sent {
                    me.goaway_sent = true;
                    frame_head(&mut s.out, 8, GOAWAY, 0, 0);
                    s.out.extend_from_slice(&[0; 4]); // last stream id 0: the server opens none
                    s.out.extend_from_slice(&NO_ERROR.to_be_bytes());
                    continue;
                }
                if me.written == me.wbuf.len() && s.out.is_empty() {
                    drop(s);
                    // Over TLS this sends close_notify first; it waits while the socket does.
                    match Pin::new(&mut me.io).poll_shutdown(cx) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(Ok(())) => {
                            me.shut = true;
                            continue; // and read until the server closes
                        }
                        Poll::Ready(Err(_)) => return me.end(Fault::Closed),
                    }
                }
            }
            if !s.driver.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                s.driver = Some(cx.waker().clone());
            }
            return Poll::Pending;
        }
    }
}
