//! The target's typed errors: each one reads as one sentence naming the key, the value and the fix.

use std::io;
use std::net::SocketAddr;

/// Why a target could not be configured or started.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// A configuration value is out of range or of the wrong kind.
    #[error("{0}")]
    Config(String),
    /// No profile by that name.
    #[error("unknown target profile '{name}'; choose one of: {known} (see --list-profiles)")]
    UnknownProfile { name: String, known: String },
    /// The TOML text could not be parsed.
    #[error("target config: {0}")]
    Toml(String),
    /// A listening socket could not be opened.
    #[error(
        "cannot listen on {addr} for {what}: {source}; pick another port (0 picks a free one) or stop what holds it"
    )]
    Bind {
        what: &'static str,
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
    /// `host` is not an IP address.
    #[error("host = '{0}' is not an IP address; use e.g. 127.0.0.1 or ::1")]
    Host(String),
    /// The runtime could not be built.
    #[error("cannot start the target's runtime: {0}")]
    Runtime(#[source] io::Error),
}

impl TargetError {
    /// True for errors caused by the operating system (ports, threads) rather than the configuration.
    pub fn is_os_error(&self) -> bool {
        matches!(self, TargetError::Bind { .. } | TargetError::Runtime(_))
    }
}
