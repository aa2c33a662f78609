//! A tcp group's spec: connect, send, expect.

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::{check_connect_timeout, check_regex};
use crate::error::SpecError;

/// Connect, optionally send, optionally read until a regex matches, close.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TcpSpec {
    pub addr: String,
    pub send: Option<String>,
    pub expect: Option<String>,
    /// As `HttpSpec::source_addrs`.
    #[serde(default)]
    pub source_addrs: Vec<IpAddr>,
    /// As `HttpSpec::connect_timeout_ms` (the TCP connect).
    pub connect_timeout_ms: Option<u64>,
}

impl TcpSpec {
    pub(super) fn validate(&self, key: &str) -> Result<(), SpecError> {
        check_connect_timeout(key, self.connect_timeout_ms)?;
        if !self.addr.contains(':') {
            return Err(SpecError::new(format!(
                "{key}.addr {:?} must be host:port, e.g. 127.0.0.1:9000",
                self.addr
            )));
        }
        // a templated pattern is checked with its placeholders as literal text (their values are escaped)
        let pattern = self.expect.as_deref().map(|e| super::untemplated(e).into_owned());
        check_regex(&format!("{key}.expect"), &pattern)
    }
}
