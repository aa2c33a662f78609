//! A connection's GOAWAY, as the server sent it: the HTTP/2 client library fails the streams above the
//! GOAWAY's last stream id that were open when it came, but not those opened after it (the server ignores
//! them and closes the connection), nor does it say which id was the last. `Watched` reads the incoming
//! frames' 9-byte headers as they pass (no copy, no allocation) and notes the last GOAWAY's last stream id
//! and error code, so a stream the server never processed is known to be one and can be sent again.

use std::cell::Cell;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// What a GOAWAY said: streams above `last` were not processed; `code` is its error code (0: NO_ERROR).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GoAway {
    pub last: u32,
    pub code: u32,
}

/// The frame type of GOAWAY (RFC 9113 §6.8).
const GOAWAY: u8 = 0x7;

/// Where the reader is in the stream of frames.
#[derive(Default)]
struct Scan {
    /// The frame header being read, and how much of it has arrived.
    head: [u8; 9],
    have: usize,
    /// Payload bytes of the current frame still to pass.
    skip: usize,
    /// The current frame is a GOAWAY: its first 8 payload bytes (last stream id, error code), and how many
    /// have arrived.
    goaway: Option<([u8; 8], usize)>,
}

impl Scan {
    /// Pass `data` (bytes that arrived, in order); returns a GOAWAY read completely in it.
    fn feed(&mut self, mut data: &[u8]) -> Option<GoAway> {
        let mut found = None;
        while !data.is_empty() {
            if self.skip == 0 && self.goaway.is_none() {
                let take = (9 - self.have).min(data.len());
                self.head[self.have..self.have + take].copy_from_slice(&data[..take]);
                self.have += take;
                data = &data[take..];
                if self.have == 9 {
                    self.have = 0;
                    self.skip =
                        usize::from(self.head[0]) << 16 | usize::from(self.head[1]) << 8 | usize::from(self.head[2]);
                    if self.head[3] == GOAWAY && self.skip >= 8 {
                        self.goaway = Some(([0; 8], 0));
                    }
                }
                continue;
            }
            if let Some((buf, got)) = &mut self.goaway {
                let take = (8 - *got).min(data.len());
                buf[*got..*got + take].copy_from_slice(&data[..take]);
                *got += take;
                self.skip -= take;
                data = &data[take..];
                if *got == 8 {
                    let last = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) & 0x7fff_ffff;
                    let code = u32::from_be_bytes([buf[4], buf[5], buf[6], buf[7]]);
                    found = Some(GoAway { last, code });
                    self.goaway = None;
                }
                continue;
            }
            let take = self.skip.min(data.len());
            self.skip -= take;
            data = &data[take..];
        }
        found
    }
}

/// A connection whose incoming frames are watched for GOAWAY (noted in `seen`).
pub(crate) struct Watched<S> {
    inner: S,
    scan: Scan,
    pub seen: Rc<Cell<Option<GoAway>>>,
}

impl<S> Watched<S> {
    pub fn new(inner: S) -> Watched<S> {
        Watched {
            inner,
            scan: Scan::default(),
            seen: Rc::default(),
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut me.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            if let Some(g) = me.scan.feed(&buf.filled()[before..]) {
                // A later GOAWAY never raises the last stream id (RFC 9113 §6.8): keep the lowest.
                let last = me.seen.get().map_or(g.last, |o| o.last.min(g.last));
                me.seen.set(Some(GoAway { last, code: g.code }));
            }
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let n = payload.len();
        let mut f = vec![(n >> 16) as u8, (n >> 8) as u8, n as u8, kind, 0];
        f.extend_from_slice(&stream.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn a_goaway_is_found_however_the_bytes_arrive() {
        let mut bytes = frame(0x4, 0, &[0; 12]); // SETTINGS
        bytes.extend(frame(0x0, 1, b"hello")); // DATA
        let mut goaway = 41u32.to_be_bytes().to_vec();
        goaway.extend_from_slice(&11u32.to_be_bytes());
        goaway.extend_from_slice(b"debug");
        bytes.extend(frame(GOAWAY, 0, &goaway));
        bytes.extend(frame(0x0, 3, b"more"));
        for chunk in [1, 2, 5, 9, 13, bytes.len()] {
            let mut scan = Scan::default();
            let found: Vec<GoAway> = bytes.chunks(chunk).filter_map(|c| scan.feed(c)).collect();
            assert_eq!(found, vec![GoAway { last: 41, code: 11 }], "chunks of {chunk}");
            assert_eq!((scan.have, scan.skip), (0, 0));
        }
    }
}
