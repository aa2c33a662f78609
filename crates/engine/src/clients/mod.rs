//! The operations clients run: `http`, `tcp`, `exec`. One enum, prepared once per group.

use std::sync::Arc;
use std::time::Duration;

use crate::cancel::Cancel;
use crate::class::ErrorClass;
use crate::error::EngineError;
use crate::spec::ClientSpec;

mod exec;
mod h1;
mod http;
mod tcp;
mod template;
mod tls;

/// How one operation ended.
pub(crate) enum Outcome {
    Ok,
    Fail(ErrorClass, String),
    Hung,
    /// Cut short by the group's end or `stop()`: not counted.
    Abandoned,
}

/// One operation's outcome plus its HTTP/TCP phase times.
pub(crate) struct OpReport {
    pub outcome: Outcome,
    pub connect: Option<Duration>,
    pub ttfb: Option<Duration>,
}

impl OpReport {
    pub fn of(outcome: Outcome) -> OpReport {
        OpReport {
            outcome,
            connect: None,
            ttfb: None,
        }
    }
    pub fn fail(class: ErrorClass, msg: String) -> OpReport {
        OpReport::of(Outcome::Fail(class, msg))
    }
}

/// What a group's clients share: parsed URL, resolved address, body bytes, compiled regexes, TLS config.
pub(crate) enum Prepared {
    Http(Box<http::HttpPrep>),
    Tcp(tcp::TcpPrep),
    Exec(exec::ExecPrep),
}

/// Descriptors one spawn holds for a moment (see `fds_per_client`), per worker thread.
pub(crate) const SPAWN_FDS: u64 = 8;

impl Prepared {
    pub fn new(spec: &ClientSpec, key: &str) -> Result<Arc<Prepared>, EngineError> {
        Ok(Arc::new(match spec {
            ClientSpec::Http(h) => Prepared::Http(Box::new(http::HttpPrep::new(h, key)?)),
            ClientSpec::Tcp(t) => Prepared::Tcp(tcp::TcpPrep::new(t, key)?),
            ClientSpec::Exec(e) => Prepared::Exec(exec::ExecPrep::new(e)),
        }))
    }

    /// Open files one client holds at most while its operation runs (for the fd-limit check).
    /// An exec client: the child's wait handle (a pidfd at most) and one pipe per checked output
    /// stream. The descriptors a spawn opens for a moment (/dev/null, the child's pipe ends,
    /// std's exec-error pipe) are one spawn at a time per thread: `SPAWN_FDS` per thread.
    pub fn fds_per_client(&self) -> u64 {
        match self {
            Prepared::Exec(e) => 1 + u64::from(e.stdout.is_some()) + u64::from(e.stderr.is_some()),
            _ => 1,
        }
    }
}

/// One client's state (connection, buffers) between operations.
pub(crate) enum Client {
    Http(http::HttpClient),
    Tcp(tcp::TcpClient),
    Exec(exec::ExecClient),
}

impl Client {
    pub fn new(prep: Arc<Prepared>, client: u64) -> Client {
        match &*prep {
            Prepared::Http(_) => Client::Http(http::HttpClient::new(prep)),
            Prepared::Tcp(_) => Client::Tcp(tcp::TcpClient::new(prep)),
            Prepared::Exec(_) => Client::Exec(exec::ExecClient::new(prep, client)),
        }
    }

    /// Run one operation; `iteration` is the client's 0-based operation number.
    pub async fn run(&mut self, iteration: u64, cancel: &mut Cancel<'_>) -> OpReport {
        match self {
            Client::Http(c) => c.run(cancel).await,
            Client::Tcp(c) => c.run(cancel).await,
            Client::Exec(c) => c.run(iteration, cancel).await,
        }
    }
}
