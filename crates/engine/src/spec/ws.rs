//! A websocket group's spec: the URL, the handshake's headers, and what an operation is (`mode`).

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::{check_connect_timeout, check_regex, TlsSpec};
use crate::error::SpecError;

/// What one operation of a websocket client is.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum WsMode {
    /// Send `message` on the connection the client keeps open and wait for the reply (the next message,
    /// or the next one `expect` matches): the latency is the round trip.
    #[default]
    Echo,
    /// A whole session: connect, the handshake, `messages` messages each waiting for its reply
    /// (`interval_ms` apart), the close; the latency is the session's.
    Session,
    /// Connect, send `message` once if there is one (a subscription), then hold the connection for `hold_ms`
    /// counting the messages the server pushes, and close; the latency is the time to the first message.
    Listen,
}

/// A WebSocket client (RFC 6455): `ws://` or `wss://`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WsSpec {
    pub url: String,
    /// Extra headers of the opening handshake (cookies, authorization, origin).
    #[serde(default)]
    pub headers: Vec<(String, String)>,
    /// Sec-WebSocket-Protocol: the subprotocols offered, in order of preference.
    #[serde(default)]
    pub subprotocols: Vec<String>,
    #[serde(default)]
    pub mode: WsMode,
    /// The message each exchange sends (templated), as a text frame (`binary`: a binary frame); listen: sent once
    /// after the handshake when not empty.
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub binary: bool,
    /// The reply an exchange waits for: the first message this matches (None: the first message).
    pub expect: Option<String>,
    /// The reply an exchange waits for: the first whose JSON has the message's value at this JSONPath (`$.id`).
    #[serde(default)]
    pub correlate: Option<String>,
    /// Session: the exchanges of one session.
    #[serde(default = "one")]
    pub messages: u64,
    /// Session: the pause between one reply and the next message.
    #[serde(default)]
    pub interval_ms: u64,
    /// Listen: how long each connection is held.
    #[serde(default)]
    pub hold_ms: u64,
    #[serde(default)]
    pub insecure: bool,
    #[serde(default)]
    pub tls: TlsSpec,
    /// As `HttpSpec::source_addrs`.
    #[serde(default)]
    pub source_addrs: Vec<IpAddr>,
    /// As `HttpSpec::connect_timeout_ms`.
    pub connect_timeout_ms: Option<u64>,
    /// As `HttpSpec::connect_to`.
    #[serde(default)]
    pub connect_to: Option<String>,
}

fn one() -> u64 {
    1
}

impl WsSpec {
    pub(super) fn validate(&self, key: &str) -> Result<(), SpecError> {
        check_connect_timeout(key, self.connect_timeout_ms)?;
        if !self.url.starts_with("ws://") && !self.url.starts_with("wss://") {
            return Err(SpecError::new(format!(
                "{key}.url {:?} must start with ws:// or wss://, e.g. ws://127.0.0.1:8080/chat",
                self.url
            )));
        }
        if self.mode == WsMode::Listen && self.hold_ms == 0 {
            return Err(SpecError::new(format!(
                "{key}.hold_ms must be at least 1 in listen mode: how long each connection is held"
            )));
        }
        if self.mode != WsMode::Listen && self.message.is_empty() {
            return Err(SpecError::new(format!(
                "{key}.message is empty: echo and session send it and wait for the reply"
            )));
        }
        if self.messages == 0 {
            return Err(SpecError::new(format!("{key}.messages must be at least 1 (got 0)")));
        }
        for (name, value) in &self.headers {
            let bad = name.is_empty() || name.bytes().any(|b| b <= b' ' || b == b':' || b >= 0x7f);
            if bad || value.contains(['\r', '\n']) {
                return Err(SpecError::new(format!(
                    "{key}.headers {name:?}: {value:?} is not a header: a name of visible characters without ':', a \
                     value on one line"
                )));
            }
        }
        let pattern = self.expect.as_deref().map(|e| super::untemplated(e).into_owned());
        check_regex(&format!("{key}.expect"), &pattern)
    }
}
