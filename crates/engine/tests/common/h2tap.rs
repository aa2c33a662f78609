//! The server's side of an HTTP/2 connection as the wire shows it: `Tap` reads the frames that pass (the
//! client's HEADERS, the server's RST_STREAM and GOAWAY) into a `Wire`, to tell the streams h2 dropped before
//! its server took them from those it took or refused.

use std::collections::BTreeSet;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// One connection's streams: those whose HEADERS came, those `accept` gave the server, those h2 reset itself
/// (beyond its concurrency limit) and those above the last id of its GOAWAY: the last two never given to the
/// server, and sent again by knee as unprocessed. h2 also drops the streams still waiting for `accept` when the
/// peer closes the connection (a request and its RST_STREAM written as knee's window closed, then its FIN):
/// those came on the wire but are not in the server's count.
#[derive(Default)]
pub struct Wire {
    pub came: BTreeSet<u32>,
    pub accepted: BTreeSet<u32>,
    pub reset: BTreeSet<u32>,
    pub goaway_last: Option<u32>,
}

impl Wire {
    pub fn dropped(&self) -> usize {
        let last = self.goaway_last.unwrap_or(u32::MAX);
        let untaken = |id: &&u32| !self.accepted.contains(id) && !self.reset.contains(id) && **id <= last;
        self.came.iter().filter(untaken).count()
    }
}

/// Frames in a stream of bytes (after `skip` bytes: the client's preface): each frame's type, stream id and
/// first four bytes of payload (fewer if it is shorter), given to `frame` once they have come.
#[derive(Default)]
struct Frames {
    skip: usize,
    head: Vec<u8>,
    /// The frame being read: its type, stream id, payload bytes still to come, and its first ones.
    frame: Option<(u8, u32, usize, Vec<u8>)>,
}

impl Frames {
    fn feed(&mut self, mut bytes: &[u8], mut frame: impl FnMut(u8, u32, &[u8])) {
        while !bytes.is_empty() || self.frame.as_ref().is_some_and(|f| f.2 == 0) {
            if self.skip > 0 {
                let n = self.skip.min(bytes.len());
                self.skip -= n;
                bytes = &bytes[n..];
            } else if let Some((ty, id, left, first)) = &mut self.frame {
                let n = (*left).min(bytes.len());
                let keep = n.min(4 - first.len());
                first.extend_from_slice(&bytes[..keep]);
                *left -= n;
                bytes = &bytes[n..];
                if *left == 0 {
                    frame(*ty, *id, first);
                    self.frame = None;
                }
            } else {
                let n = (9 - self.head.len()).min(bytes.len());
                self.head.extend_from_slice(&bytes[..n]);
                bytes = &bytes[n..];
                if self.head.len() == 9 {
                    let h = std::mem::take(&mut self.head);
                    let len = usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]);
                    let id = u32::from_be_bytes([h[5] & 0x7f, h[6], h[7], h[8]]);
                    self.frame = Some((h[3], id, len, Vec::with_capacity(4)));
                }
            }
        }
    }
}

/// The server's side of a connection, noting the client's HEADERS and the server's RST_STREAM frames in `wire`.
pub struct Tap<S> {
    io: S,
    read: Frames,
    written: Frames,
    wire: Arc<Mutex<Wire>>,
}

impl<S> Tap<S> {
    pub fn new(io: S, wire: Arc<Mutex<Wire>>) -> Self {
        let read = Frames {
            skip: 24,
            ..Frames::default()
        }; // "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
        let written = Frames::default();
        Tap {
            io,
            read,
            written,
            wire,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Tap<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        let Tap { read, wire, .. } = &mut *self;
        let mut wire = wire.lock().unwrap();
        read.feed(&buf.filled()[before..], |ty, id, _| {
            if ty == 0x1 {
                wire.came.insert(id);
            }
        });
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Tap<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.io).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = polled {
            let Tap { written, wire, .. } = &mut *self;
            let mut wire = wire.lock().unwrap();
            written.feed(&buf[..n], |ty, id, first| match (ty, first) {
                (0x3, _) => {
                    wire.reset.insert(id);
                }
                (0x7, &[a, b, c, d]) => {
                    let last = u32::from_be_bytes([a & 0x7f, b, c, d]);
                    wire.goaway_last = Some(wire.goaway_last.map_or(last, |l| l.min(last)));
                }
                _ => {}
            });
        }
        polled
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}
