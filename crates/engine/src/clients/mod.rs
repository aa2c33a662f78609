//! The operations clients run: `http`, `tcp`, `exec`, and `program` (the spec's `worker` client: a
//! long-lived program speaking the line protocol). One enum, prepared once per group.

use std::sync::Arc;

use crate::cancel::Cancel;
use crate::error::EngineError;
use crate::outcome::{Detail, OpReport};
use crate::spec::ClientSpec;

mod exec;
mod group;
mod h1;
mod http;
mod net;
mod program;
mod spawn;
mod tcp;
mod template;
mod tls;

pub(crate) use program::{Host, HostedGroup, Hosts};
pub(crate) use spawn::prepare_thread as prepare_spawns;

/// What a group's clients share: parsed URL, resolved address, body bytes, compiled regexes, TLS config.
pub(crate) enum Prepared {
    Http(Box<http::HttpPrep>),
    Tcp(tcp::TcpPrep),
    Exec(exec::ExecPrep),
    Program(program::ProgramPrep),
}

/// Descriptors one spawn holds for a moment (see `fds_per_client`), per runtime thread.
pub(crate) const SPAWN_FDS: u64 = 8;

impl Prepared {
    pub fn new(spec: &ClientSpec, key: &str) -> Result<Arc<Prepared>, EngineError> {
        Ok(Arc::new(match spec {
            ClientSpec::Http(h) => Prepared::Http(Box::new(http::HttpPrep::new(h, key)?)),
            ClientSpec::Tcp(t) => Prepared::Tcp(tcp::TcpPrep::new(t, key)?),
            ClientSpec::Exec(e) => Prepared::Exec(exec::ExecPrep::new(e)),
            ClientSpec::Worker(w) => Prepared::Program(program::ProgramPrep::new(w)),
        }))
    }

    /// Its clients start processes for every operation (exec): their threads hold spawn slots.
    pub fn spawns(&self) -> bool {
        matches!(self, Prepared::Exec(_))
    }

    /// Open files one client holds at most while its operation runs (for the fd-limit check).
    /// An exec client: the child's wait handle (a pidfd at most) and a pipe for each of stdout and
    /// stderr (their tails are the failure's reason). The descriptors a spawn opens for a moment
    /// (/dev/null, the child's pipe ends, std's exec-error pipe) are one spawn at a time per thread:
    /// `SPAWN_FDS` per thread.
    pub fn fds_per_client(&self) -> u64 {
        match self {
            Prepared::Exec(_) => 3,
            _ => 1,
        }
    }
}

/// One client's state (connection, buffers) between operations.
enum Kind {
    Http(http::HttpClient),
    Tcp(tcp::TcpClient),
    Exec(exec::ExecClient),
    Program(program::ProgramClient),
}

/// One client: its state between operations and the message of its last failure.
pub(crate) struct Client {
    kind: Kind,
    /// Written by a failing operation (reused: no allocation once grown).
    pub detail: Detail,
}

impl Client {
    /// `host`: a program client's place in its program's process (None for the other kinds).
    pub fn new(prep: Arc<Prepared>, client: u64, host: Option<Host>) -> Client {
        let kind = match (&*prep, host) {
            (Prepared::Program(_), Some(host)) => Kind::Program(program::ProgramClient::new(host, client)),
            (Prepared::Program(_), None) => unreachable!("a program client always has a host"),
            (Prepared::Http(_), _) => Kind::Http(http::HttpClient::new(prep, client)),
            (Prepared::Tcp(_), _) => Kind::Tcp(tcp::TcpClient::new(prep, client)),
            (Prepared::Exec(_), _) => Kind::Exec(exec::ExecClient::new(prep, client)),
        };
        Client {
            kind,
            detail: Detail::default(),
        }
    }

    /// Run one operation; `iteration` is the client's 0-based operation number.
    pub async fn run(&mut self, iteration: u64, cancel: &mut Cancel<'_>) -> OpReport {
        let d = &mut self.detail;
        match &mut self.kind {
            Kind::Http(c) => c.run(cancel, d).await,
            Kind::Tcp(c) => c.run(cancel, d).await,
            Kind::Exec(c) => c.run(iteration, cancel, d).await,
            Kind::Program(c) => c.run(iteration, cancel, d).await,
        }
    }
}
