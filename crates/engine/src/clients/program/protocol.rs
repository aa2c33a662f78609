//! The line protocol (docs/worker-protocol.md): what knee writes to a program's stdin and how it
//! reads the program's stdout, one JSON object a line. No processes and no clients here.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::time::Duration;

use serde::Deserialize;
use tokio::io::AsyncReadExt;
use tokio::process::ChildStdout;

use super::client::Reply;

/// The protocol's version, sent in the start message.
pub const PROTOCOL: u32 = 1;
/// A line longer than this is not a reply.
pub(super) const MAX_LINE: usize = 1 << 20;
/// Longest part of a line quoted in a message.
pub(super) const QUOTED: usize = 200;
/// The line that asks the program to end, after every request queued before it.
pub(super) const STOP: &[u8] = b"{\"op\":\"stop\"}\n";

/// A line quoted for a message: its first `QUOTED` bytes, as a string literal.
pub(super) fn quote(line: &[u8]) -> String {
    let s = String::from_utf8_lossy(&line[..line.len().min(QUOTED)]).into_owned();
    if line.len() > QUOTED {
        format!("{s:?}…")
    } else {
        format!("{s:?}")
    }
}

/// The start message of process `number` of `group`, hosting `clients` (with its newline).
pub(super) fn start_message(group: &str, number: usize, clients: &[u64], vars_json: &str) -> String {
    let mut start = String::new();
    let _ = write!(
        start,
        r#"{{"op":"start","protocol":{PROTOCOL},"group":{},"process":{},"clients":{:?},"vars":{}}}"#,
        serde_json::to_string(group).expect("a string serializes"),
        number,
        clients,
        vars_json
    );
    start.push('\n');
    start
}

/// The first non-empty line the program writes (the start's answer, trimmed) and the bytes after it.
/// `Err(None)`: stdout ended first; `Err(Some(bytes))`: a line over `MAX_LINE` (what was read).
pub(super) async fn first_line(stdout: &mut ChildStdout) -> Result<(Vec<u8>, Vec<u8>), Option<Vec<u8>>> {
    let mut buf = Vec::with_capacity(256);
    loop {
        if let Some(i) = buf.iter().position(|b| *b == b'\n') {
            let line = buf[..i].trim_ascii().to_vec();
            if line.is_empty() {
                buf.drain(..=i);
                continue;
            }
            buf.drain(..=i);
            return Ok((line, buf));
        }
        let mut chunk = [0u8; 4096];
        match stdout.read(&mut chunk).await {
            Ok(0) | Err(_) => return Err(None),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
        if buf.len() > MAX_LINE {
            return Err(Some(buf));
        }
    }
}

/// The start's answer.
pub(super) enum Answer<'a> {
    /// `{"ready": true}`; `batch`: it takes many operations in one `run` line.
    Ready { batch: bool },
    /// `{"ready": false}`, with what it said (its `error`, else its `message`).
    Refused(Cow<'a, str>),
    /// Anything else.
    Other,
}

/// Read the start's answer.
pub(super) fn start_answer(line: &[u8]) -> Answer<'_> {
    match serde_json::from_slice::<Line<'_>>(line) {
        Ok(Line {
            ready: Some(true),
            batch,
            ..
        }) => Answer::Ready {
            batch: batch == Some(true),
        },
        Ok(Line {
            ready: Some(false),
            error,
            message,
            ..
        }) => Answer::Refused(error.or(message).unwrap_or_default()),
        _ => Answer::Other,
    }
}

/// Queue operation `id` of `client` in `out`: a `run` line, or (`batch`) a `client,id,` pair that
/// `frame_batch` turns into one `run` line with the others due by then.
/// `data`: the operation's rows as a JSON object (`{"users":{"id":"7"}}`), when the group reads data sources;
/// in batch mode it goes to `rows` (`{…},` after `{…},`, one per pair), beside the pairs in `out`.
#[inline]
pub(super) fn push_request(
    out: &mut Vec<u8>,
    rows: &mut Vec<u8>,
    batch: bool,
    client: u64,
    id: u64,
    operation_json: &str,
    data: Option<&[u8]>,
) {
    let mut n = itoa::Buffer::new();
    if batch {
        out.extend_from_slice(n.format(client).as_bytes());
        out.push(b',');
        out.extend_from_slice(n.format(id).as_bytes());
        out.push(b',');
        if let Some(d) = data {
            rows.extend_from_slice(d);
            rows.push(b',');
        }
    } else {
        out.extend_from_slice(br#"{"op":"run","client":"#);
        out.extend_from_slice(n.format(client).as_bytes());
        out.extend_from_slice(br#","id":"#);
        out.extend_from_slice(n.format(id).as_bytes());
        out.extend_from_slice(br#","operation":"#);
        out.extend_from_slice(operation_json.as_bytes());
        if let Some(d) = data {
            out.extend_from_slice(br#","data":"#);
            out.extend_from_slice(d);
        }
        out.extend_from_slice(b"}\n");
    }
}

/// `c,i,c,i,` (queued by `push_request` in batch mode) → one `run` line for every operation due by now, with
/// `rows` (`{…},{…},`: one per pair, or none) as its `data` list.
pub(super) fn frame_batch(frame: &mut Vec<u8>, operation_json: &str, pairs: &[u8], rows: &[u8]) {
    frame.clear();
    frame.extend_from_slice(br#"{"op":"run","operation":"#);
    frame.extend_from_slice(operation_json.as_bytes());
    frame.extend_from_slice(br#","ops":["#);
    frame.extend_from_slice(&pairs[..pairs.len() - 1]);
    frame.extend_from_slice(b"]");
    if !rows.is_empty() {
        frame.extend_from_slice(br#","data":["#);
        frame.extend_from_slice(&rows[..rows.len() - 1]);
        frame.extend_from_slice(b"]");
    }
    frame.extend_from_slice(b"}\n");
}

/// What one line of the program's stdout says, once the start is done.
pub(super) enum Said<'a> {
    /// An empty line: nothing.
    Blank,
    /// Operation `id` of `client` succeeded with nothing to add (`{"client":C,"id":I,"ok":true}`).
    Ok { client: u64, id: u64 },
    /// Operations that succeeded with nothing to add: `client, id` after `client, id`.
    Done(Vec<u64>),
    /// Operation `id` of `client` ended; the rest of the reply is in `reply`.
    Reply { client: u64, id: u64, reply: ReplyLine<'a> },
}

/// A reply's outcome, steps and bytes, not yet read into a `Reply`.
pub(super) struct ReplyLine<'a> {
    ok: bool,
    line: Line<'a>,
}

impl ReplyLine<'_> {
    /// The reply for the client waiting for it.
    pub(super) fn into_reply(self) -> Reply {
        let l = self.line;
        let steps = l
            .steps
            .unwrap_or_default()
            .0
            .into_iter()
            .filter(|(_, s)| s.is_finite() && *s >= 0.0)
            .map(|(name, s)| (name, Duration::from_secs_f64(s)))
            .collect();
        if self.ok {
            Reply::Ok {
                steps,
                bytes: l.bytes.unwrap_or(0),
            }
        } else {
            Reply::Fail {
                class: l.error.map(Cow::into_owned).unwrap_or_else(|| "error".to_string()),
                message: l.message.map(Cow::into_owned).unwrap_or_default(),
                steps,
            }
        }
    }
}

/// Read one (trimmed) line of the program's stdout; the error names a line that is not a reply.
#[inline]
pub(super) fn read_reply(line: &[u8]) -> Result<Said<'_>, String> {
    if line.is_empty() {
        return Ok(Said::Blank);
    }
    if let Some((client, id)) = plain_ok(line) {
        return Ok(Said::Ok { client, id });
    }
    let bad = || format!("the worker wrote a line that is not a reply: {}", quote(line));
    // JSON with a field of the wrong kind (`"bytes": 1.5`, a count past 2^64) says which: the line alone did not
    let l: Line<'_> =
        serde_json::from_slice(line).map_err(|e| if e.is_data() { format!("{} ({e})", bad()) } else { bad() })?;
    if let Some(done) = l.done {
        if done.len() % 2 != 0 {
            return Err(bad());
        }
        return Ok(Said::Done(done));
    }
    let (Some(client), Some(id), Some(ok)) = (l.client, l.id, l.ok) else {
        return Err(bad());
    };
    Ok(Said::Reply {
        client,
        id,
        reply: ReplyLine { ok, line: l },
    })
}

/// A reply's `steps` object, in the order the program wrote them (the reports keep that order).
#[derive(Default)]
struct Steps(Vec<(String, f64)>);

impl<'de> Deserialize<'de> for Steps {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Steps, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Steps;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object of step names and seconds")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Steps, A::Error> {
                let mut out = Vec::new();
                while let Some((name, seconds)) = map.next_entry::<String, f64>()? {
                    out.push((name, seconds));
                }
                Ok(Steps(out))
            }
        }
        d.deserialize_map(Visit)
    }
}

/// `{"client":C,"id":I,"ok":true}` to the letter, the commonest reply, read without the JSON parser (any
/// other spelling goes to it).
fn plain_ok(line: &[u8]) -> Option<(u64, u64)> {
    let (client, rest) = number(line.strip_prefix(br#"{"client":"#)?)?;
    let (id, rest) = number(rest.strip_prefix(br#","id":"#)?)?;
    (rest == br#","ok":true}"#).then_some((client, id))
}

/// The JSON unsigned integer `b` starts with, and what follows it.
fn number(b: &[u8]) -> Option<(u64, &[u8])> {
    let digits = b.iter().take_while(|c| c.is_ascii_digit()).count();
    if digits == 0 || (digits > 1 && b[0] == b'0') {
        return None;
    }
    let n = std::str::from_utf8(&b[..digits]).ok()?.parse().ok()?;
    Some((n, &b[digits..]))
}

/// One line from a program: the start's answer or an operation's reply.
#[derive(Deserialize)]
struct Line<'a> {
    #[serde(default)]
    ready: Option<bool>,
    #[serde(default)]
    client: Option<u64>,
    #[serde(default)]
    id: Option<u64>,
    #[serde(default)]
    ok: Option<bool>,
    #[serde(default, borrow)]
    error: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    message: Option<Cow<'a, str>>,
    #[serde(default)]
    steps: Option<Steps>,
    #[serde(default)]
    bytes: Option<u64>,
    /// In the start's answer: the program takes many operations in one `run` line.
    #[serde(default)]
    batch: Option<bool>,
    /// Operations that succeeded with nothing to add: `client, id` after `client, id`.
    #[serde(default)]
    done: Option<Vec<u64>>,
}

#[cfg(test)]
mod tests {
    use super::{plain_ok, read_reply};

    #[test]
    fn a_reply_with_a_field_of_the_wrong_kind_names_it() {
        let Err(e) = read_reply(br#"{"client":0,"id":1,"ok":true,"bytes":1.5}"#) else {
            panic!("a reply of 1.5 bytes was taken")
        };
        assert!(e.contains("is not a reply") && e.contains("expected u64"), "{e}");
        let Err(e) = read_reply(b"this is not a reply") else {
            panic!("a line that is no JSON was taken")
        };
        assert_eq!(
            e,
            r#"the worker wrote a line that is not a reply: "this is not a reply""#
        );
    }

    #[test]
    fn only_the_exact_plain_reply_skips_the_parser() {
        assert_eq!(plain_ok(br#"{"client":4,"id":17,"ok":true}"#), Some((4, 17)));
        assert_eq!(
            plain_ok(br#"{"client":0,"id":18446744073709551615,"ok":true}"#),
            Some((0, u64::MAX))
        );
        for other in [
            &br#"{"client": 4,"id":17,"ok":true}"#[..],             // spaces: the parser's
            br#"{"client":4,"id":17,"ok":false}"#,                  // a failure
            br#"{"client":4,"id":17,"ok":true,"bytes":9}"#,         // more keys
            br#"{"client":04,"id":17,"ok":true}"#,                  // not JSON
            br#"{"client":4,"id":18446744073709551616,"ok":true}"#, // over u64
            br#"{"client":,"id":17,"ok":true}"#,
        ] {
            assert_eq!(plain_ok(other), None, "{}", String::from_utf8_lossy(other));
        }
    }
}
