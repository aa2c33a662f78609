//! `TestServer::raw`: a hand-rolled HTTP/1.1 server on 127.0.0.1:0 that answers every request with the same raw
//! bytes (so tests can send chunked, close-delimited, garbage or cut-off responses), one thread
//! per connection, counting requests and connections. No allocation per request.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::TestServer;

/// What the server does after writing a response.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum After {
    /// Wait for the next request on the connection.
    KeepOpen,
    /// Close the connection (FIN).
    Close,
    /// Reset the connection (RST, via SO_LINGER 0).
    Reset,
}

impl TestServer {
    /// A hand-rolled server that answers each request with `response`; `split` = write it in 5-byte
    /// pieces, 100 µs apart (so the client sees it across many reads). Its threads live as long as the test.
    pub fn raw(response: Vec<u8>, after: After, split: bool) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(AtomicU64::new(0));
        let connections = Arc::new(AtomicU64::new(0));
        let response = Arc::new(response);
        let (req, conns) = (requests.clone(), connections.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                conns.fetch_add(1, Ordering::Relaxed);
                let (req, response) = (req.clone(), response.clone());
                std::thread::spawn(move || serve(stream, &response, after, split, &req));
            }
        });
        TestServer {
            addr,
            requests,
            connections,
            shutdown: None,
            thread: None,
        }
    }
}

/// Content-Length of a request head (0 if absent); allocation-free.
fn content_length(head: &[u8]) -> usize {
    const NAME: &[u8] = b"content-length:";
    head.split(|b| *b == b'\n')
        .find(|l| l.len() > NAME.len() && l[..NAME.len()].eq_ignore_ascii_case(NAME))
        .and_then(|l| std::str::from_utf8(&l[NAME.len()..]).ok())
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

fn serve(mut s: TcpStream, response: &[u8], after: After, split: bool, requests: &AtomicU64) {
    let _ = s.set_nodelay(true);
    let mut buf = vec![0u8; 64 * 1024];
    let mut have = 0;
    loop {
        // Read one request: head, then Content-Length body bytes.
        let (head_end, body_len) = loop {
            if let Some(i) = buf[..have].windows(4).position(|w| w == b"\r\n\r\n") {
                break (i + 4, content_length(&buf[..i]));
            }
            if have == buf.len() {
                return;
            }
            match s.read(&mut buf[have..]) {
                Ok(0) | Err(_) => return,
                Ok(n) => have += n,
            }
        };
        let mut body_left = body_len;
        let mut used = head_end;
        loop {
            let take = body_left.min(have - used);
            body_left -= take;
            used += take;
            if body_left == 0 {
                break;
            }
            used = 0;
            match s.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => have = n,
            }
        }
        buf.copy_within(used..have, 0);
        have -= used;
        requests.fetch_add(1, Ordering::Relaxed);
        let written = if split {
            response.chunks(5).try_for_each(|c| {
                std::thread::sleep(Duration::from_micros(100));
                s.write_all(c)
            })
        } else {
            s.write_all(response)
        };
        if written.is_err() {
            return;
        }
        match after {
            After::KeepOpen => {}
            After::Close => return,
            After::Reset => {
                let _ = socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO));
                return;
            }
        }
    }
}
