//! How one operation ended, what it moved, and — when it failed — what it said.
//!
//! A failing operation writes its message into its client's `Detail`, a buffer it reuses: once the
//! buffer has grown, reporting a failure allocates nothing. The recorder groups failures by the
//! message's normalised form (`reason::normalize`) and keeps the text itself only for the first
//! operation of each group.

use std::fmt::Write as _;
use std::time::Duration;

use crate::class::ErrorClass;

/// How one operation ended.
pub(crate) enum Outcome {
    Ok,
    /// Failed; the message is in the client's `Detail`.
    Fail(ErrorClass),
    /// Ran past its timeout: abandoned (HTTP/TCP) or killed with its process group (exec).
    Hung,
    /// Cut short by the group's end or `stop()`: counted as abandoned.
    Abandoned,
}

impl Outcome {
    /// Cut short (abandoned) before any of the operation was written (`wrote`): the service never saw it, so it
    /// never started. One rule for every client that writes: HTTP/1.1, HTTP/2, WebSocket, and tcp (its connection).
    pub fn unsent(&self, wrote: bool) -> bool {
        matches!(self, Outcome::Abandoned) && !wrote
    }
}

/// Bytes one completed operation moved.
#[derive(Clone, Copy, Default)]
pub(crate) struct Traffic {
    /// Written to the service (HTTP: the request; tcp: `send`).
    pub sent: u64,
    /// Read from the service (HTTP: the whole response, head included; tcp: what was read; exec:
    /// its stdout).
    pub received: u64,
    /// The document: HTTP: the (decoded) body; tcp: what was read; exec: the size of
    /// `expect_file` or of `bytes_from`.
    pub payload: u64,
    /// WebSocket: the data messages written and read (control frames not counted); gRPC: the call's messages.
    pub messages_sent: u64,
    pub messages_received: u64,
}

/// A TLS handshake an operation completed (it opened a connection).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Handshake {
    pub time: Duration,
    /// An abbreviated handshake that resumed an earlier session (ticket or session ID).
    pub resumed: bool,
}

/// One operation's outcome plus its HTTP/TCP phase times, bytes and (worker clients) named steps.
pub(crate) struct OpReport {
    pub outcome: Outcome,
    /// The TCP connect, when the operation opened a connection.
    pub connect: Option<Duration>,
    /// The TLS handshake after it, when there was one and it completed.
    pub handshake: Option<Handshake>,
    pub ttfb: Option<Duration>,
    pub bytes: Traffic,
    /// Durations the client program reported for named steps of the operation (connect, auth …).
    pub steps: Vec<(String, Duration)>,
    /// The latency it reports instead of its duration: a WebSocket listen's time to its first message.
    pub latency: Option<Duration>,
    /// Abandoned before any of its request left knee (still connecting): the service never saw it,
    /// so it is not counted as started at all.
    pub unsent: bool,
    /// HTTP/1.1: written (whole or in part) on a kept connection that the server closed before answering, and sent
    /// again on a new one (RFC 9112 §9.3.1): the server may have read it twice.
    pub resent: bool,
}

impl OpReport {
    pub fn of(outcome: Outcome) -> OpReport {
        OpReport {
            outcome,
            connect: None,
            handshake: None,
            ttfb: None,
            bytes: Traffic::default(),
            steps: Vec::new(),
            latency: None,
            unsent: false,
            resent: false,
        }
    }
}

/// A failure's message, in a buffer the client reuses. The first `fixed` bytes are kept verbatim
/// when failures are grouped (a status line, an exit code); the rest is normalised (numbers, ids
/// and addresses masked).
#[derive(Clone, Default)]
pub(crate) struct Detail {
    pub text: String,
    pub fixed: usize,
}

impl Detail {
    /// Start a new message (nothing fixed).
    pub fn clear(&mut self) -> &mut Detail {
        self.text.clear();
        self.fixed = 0;
        self
    }

    /// Append formatted text (no allocation once the buffer is large enough).
    pub fn put(&mut self, args: std::fmt::Arguments<'_>) -> &mut Detail {
        let _ = self.text.write_fmt(args);
        self
    }

    /// Everything written so far is kept verbatim in the grouping key.
    pub fn fix(&mut self) -> &mut Detail {
        self.fixed = self.text.len();
        self
    }

    /// Append an I/O error's text. OS errors go through `strerror_r` into a stack buffer, so this
    /// allocates nothing (std's `Display` for them builds a String); a TLS error names the server's alert.
    pub fn io(&mut self, e: &std::io::Error) -> &mut Detail {
        if let Some(tls) = crate::clients::rustls_error(e) {
            crate::clients::describe_tls(tls, &mut self.text);
            return self;
        }
        match e.raw_os_error() {
            Some(code) => {
                let mut buf = [0u8; 128];
                // SAFETY: strerror_r writes at most buf.len() bytes, NUL-terminated, into our buffer.
                let rc = unsafe { libc::strerror_r(code, buf.as_mut_ptr().cast(), buf.len()) };
                let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
                match std::str::from_utf8(&buf[..end]) {
                    Ok(s) if rc == 0 && !s.is_empty() => self.text.push_str(s),
                    _ => {
                        let _ = write!(self.text, "os error {code}");
                    }
                }
            }
            None => {
                let _ = write!(self.text, "{e}");
            }
        }
        self
    }

    /// Append ": " and the last non-empty line of `bytes` (lossy UTF-8, at most `max` bytes), if any.
    pub fn tail_line(&mut self, bytes: &[u8], max: usize) -> &mut Detail {
        let line = last_line(bytes);
        if !line.is_empty() {
            self.text.push_str(": ");
            push_lossy(&mut self.text, clip_end(line, max));
        }
        self
    }

    /// Append ": " and the first line of text of a response body: markup tags are skipped, so an HTML
    /// error page gives its title ("403 Forbidden"), not "<html>". At most `max` bytes.
    pub fn body_line(&mut self, body: &[u8], max: usize) -> &mut Detail {
        let start = self.text.len();
        let (mut in_tag, mut line_started, mut taken) = (false, false, 0usize);
        for &b in body {
            match b {
                b'<' => in_tag = true,
                b'>' if in_tag => in_tag = false,
                _ if in_tag => {}
                b'\n' | b'\r' if line_started => break,
                _ if b.is_ascii_whitespace() && !line_started => {}
                _ => {
                    if !line_started {
                        self.text.push_str(": ");
                        line_started = true;
                    }
                    self.text.push(if b.is_ascii() { b as char } else { '?' });
                    taken += 1;
                    if taken >= max {
                        break;
                    }
                }
            }
        }
        let trimmed = self.text[start..].trim_end().len();
        self.text.truncate(start + trimmed);
        self
    }

    /// Append ": " and the first non-empty line of `bytes` (lossy UTF-8, at most `max` bytes), if any.
    pub fn head_line(&mut self, bytes: &[u8], max: usize) -> &mut Detail {
        let line = bytes
            .split(|b| *b == b'\n')
            .map(<[u8]>::trim_ascii)
            .find(|l| !l.is_empty())
            .unwrap_or_default();
        if !line.is_empty() {
            self.text.push_str(": ");
            push_lossy(&mut self.text, &line[..line.len().min(max)]);
        }
        self
    }

    /// Append ": " and the first `max` bytes of `bytes` in quotes, with newlines and other control characters
    /// escaped as Rust and Python write them (`"1\n"`), bytes that are not UTF-8 as `\xNN`, and "…" after a cut: a
    /// check that did not match shows exactly what it was held against.
    pub fn quoted(&mut self, bytes: &[u8], max: usize) -> &mut Detail {
        self.text.push_str(": \"");
        for chunk in bytes[..bytes.len().min(max)].utf8_chunks() {
            let _ = write!(self.text, "{}", chunk.valid().escape_debug());
            for b in chunk.invalid() {
                let _ = write!(self.text, "\\x{b:02x}");
            }
        }
        self.text.push('"');
        if bytes.len() > max {
            self.text.push('…');
        }
        self
    }
}

/// The last non-empty line of `bytes`, trimmed.
fn last_line(bytes: &[u8]) -> &[u8] {
    bytes
        .split(|b| *b == b'\n')
        .map(<[u8]>::trim_ascii)
        .rfind(|l| !l.is_empty())
        .unwrap_or_default()
}

/// The last `max` bytes of `line`.
fn clip_end(line: &[u8], max: usize) -> &[u8] {
    &line[line.len().saturating_sub(max)..]
}

/// Push bytes as text: valid UTF-8 as it is, anything else byte by byte (ASCII kept, the rest `?`).
fn push_lossy(out: &mut String, bytes: &[u8]) {
    match std::str::from_utf8(bytes) {
        Ok(s) => out.push_str(s),
        Err(_) => out.extend(bytes.iter().map(|&b| if b.is_ascii() { b as char } else { '?' })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn details_take_the_telling_line() {
        let mut d = Detail::default();
        d.clear().put(format_args!("psql exited with code {}", 2)).fix();
        d.tail_line(b"psql: warning\npsql: FATAL:  sorry, too many clients already\n\n", 512);
        assert_eq!(
            d.text,
            "psql exited with code 2: psql: FATAL:  sorry, too many clients already"
        );
        assert_eq!(d.fixed, "psql exited with code 2".len());
        d.clear()
            .put(format_args!("HTTP/1.1 503"))
            .head_line(b"\n  pool full\nmore", 120);
        assert_eq!((d.text.as_str(), d.fixed), ("HTTP/1.1 503: pool full", 0));
        d.clear().io(&std::io::Error::from_raw_os_error(libc::ECONNREFUSED));
        assert_eq!(d.text, "Connection refused");
        d.clear().tail_line(b"", 10);
        assert_eq!(d.text, "");
        d.clear().put(format_args!("HTTP/1.1 403 Forbidden")).fix();
        d.body_line(b"<html>\r\n<head><title>403 Forbidden</title></head>\r\n<body>", 100);
        assert_eq!(d.text, "HTTP/1.1 403 Forbidden: 403 Forbidden");
        d.clear().body_line(b"  pool full (600 busy)\nmore", 9);
        assert_eq!(d.text, ": pool full");
        d.clear().quoted(b"1\n", 10);
        assert_eq!(d.text, r#": "1\n""#);
        d.clear().quoted(b"a\tb\r\n\xff\"c", 6);
        assert_eq!(d.text, r#": "a\tb\r\n\xff"…"#);
        d.clear().quoted(b"", 10);
        assert_eq!(d.text, r#": """#);
    }
}
