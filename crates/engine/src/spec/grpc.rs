//! An http group's gRPC side (`grpc`): the method, the descriptors of its messages, and what a call sends
//! and checks. The group's `body` is the call's message as JSON (templated); its URL is the method's path.

use serde::{Deserialize, Serialize};

use super::check_regex;
use crate::error::SpecError;

/// A gRPC call per operation, over the group's HTTP/2 connections.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GrpcSpec {
    /// The compiled descriptors holding the method and its message types: a FileDescriptorSet, base64.
    pub descriptors: String,
    /// The method, `package.Service/Method`.
    pub method: String,
    /// Messages each call sends (the body's message, this many times, one after another): a client-streaming
    /// or bidirectional call's stream. A unary or server-streaming method sends one.
    #[serde(default = "one")]
    pub stream_messages: u64,
    /// The pause before each message after the first (0: they go out together).
    #[serde(default)]
    pub stream_interval_ms: u64,
    /// A call succeeds only when this matches the JSON of its response's messages (one per line).
    pub expect_message: Option<String>,
}

/// The most messages a call sends (each call's stream is built whole in memory).
pub const MAX_STREAM_MESSAGES: u64 = 100_000;

fn one() -> u64 {
    1
}

impl GrpcSpec {
    pub(super) fn validate(&self, key: &str) -> Result<(), SpecError> {
        if !(1..=MAX_STREAM_MESSAGES).contains(&self.stream_messages) {
            return Err(SpecError::new(format!(
                "{key}.grpc.stream_messages is {}; a call sends 1 to {MAX_STREAM_MESSAGES} messages",
                self.stream_messages
            )));
        }
        if self.stream_interval_ms > 0 && self.stream_messages < 2 {
            return Err(SpecError::new(format!(
                "{key}.grpc.stream_interval_ms spaces a stream's messages, but stream_messages is 1; give more or drop it"
            )));
        }
        check_regex(&format!("{key}.grpc.expect_message"), &self.expect_message)
    }
}
