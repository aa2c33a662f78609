//! The operations clients run: `http` (HTTP/1.1, or `http2`), `tcp`, `exec`, and `program` (the spec's
//! `worker` client: a long-lived program speaking the line protocol). One enum, prepared once per group;
//! what a thread's clients of a group share (program processes, HTTP/2 connections) is its `Hosts`.

use std::net::IpAddr;
use std::rc::Rc;
use std::sync::Arc;

use crate::cancel::Cancel;
use crate::data::{Draw, Exhausted, Feeders};
use crate::error::EngineError;
use crate::outcome::{Detail, OpReport};
use crate::spec::ClientSpec;

mod bodycheck;
mod dial;
mod exec;
mod group;
mod grpc;
mod h1;
mod http;
mod http2;
mod httpop;
mod net;
mod program;
mod spawn;
mod tcp;
mod template;
mod tls;
mod ws;

pub use grpc::{compile as grpc_compile, describe as grpc_describe, reflect as grpc_reflect, MethodInfo as GrpcMethod};
pub(crate) use program::{HostedGroup, ThreadPart};
pub(crate) use spawn::prepare_thread as prepare_spawns;
pub(crate) use tls::{describe as describe_tls, rustls_error};

/// A client's place among what its thread's clients of its group share.
#[derive(Clone)]
pub(crate) enum Host {
    /// Its slot in a program's process (`worker` clients).
    Program(program::Host),
    /// Its HTTP/2 lane: the connection it shares with up to `streams` clients.
    Lane(Rc<http2::Lane>),
}

/// What one engine thread's clients share, per group: program processes, HTTP/2 connections.
pub(crate) struct Hosts {
    programs: program::Hosts,
    lanes: http2::Lanes,
}

impl Hosts {
    /// Start this thread's program processes (their handshakes done) and lay out its HTTP/2 lanes.
    pub async fn start(part: ThreadPart<'_>) -> Result<Hosts, EngineError> {
        let programs = program::Hosts::start(part).await?;
        Ok(Hosts {
            programs,
            lanes: http2::Lanes::new(part.groups, part.mine),
        })
    }

    /// Client `slot` of group `g`'s place, if its group shares anything.
    pub fn host(&self, g: usize, slot: usize) -> Option<Host> {
        match self.lanes.lane(g, slot) {
            Some(lane) => Some(Host::Lane(lane)),
            None => self.programs.host(g, slot).map(Host::Program),
        }
    }

    /// Every client slot's place in group `g` (in slot order), for the open-loop scheduler.
    pub fn of(&self, g: usize, clients: usize) -> Vec<Option<Host>> {
        (0..clients).map(|s| self.host(g, s)).collect()
    }

    /// End every process and close every connection (`kill`: after `stop()`, at once).
    pub async fn close(&self, kill: bool) {
        self.lanes.close().await;
        self.programs.close(kill).await;
    }
}

/// What a group's clients share: parsed URL, resolved address, body bytes, compiled regexes, TLS config.
pub(crate) enum Prepared {
    Http(Box<http::HttpPrep>),
    Tcp(tcp::TcpPrep),
    Exec(exec::ExecPrep),
    Program(program::ProgramPrep),
    Ws(ws::WsPrep),
}

/// Descriptors one spawn holds for a moment (see `Prepared::fds`), per runtime thread.
pub(crate) const SPAWN_FDS: u64 = 8;

impl Prepared {
    /// A mix in turn starts where the shard's first client (`client_offset`) stands in the list, so that the load
    /// machines of a distributed run take the list apart rather than each from its first request.
    pub fn start_turn_at(&self, client_offset: u64) {
        if let Prepared::Http(p) = self {
            if let Some(n) = &p.in_turn {
                n.store(client_offset, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }

    /// `clients`: the group's clients in this shard; `feeders`: the shard's data sources (templates read them).
    pub fn new(spec: &ClientSpec, clients: u64, feeders: &Feeders, key: &str) -> Result<Arc<Prepared>, EngineError> {
        Ok(Arc::new(match spec {
            ClientSpec::Http(h) => Prepared::Http(Box::new(http::HttpPrep::new(h, clients, feeders, key)?)),
            ClientSpec::Tcp(t) => Prepared::Tcp(tcp::TcpPrep::new(t, feeders, key)?),
            ClientSpec::Exec(e) => Prepared::Exec(exec::ExecPrep::new(e, feeders, key)?),
            ClientSpec::Worker(w) => Prepared::Program(program::ProgramPrep::new(w, feeders, key)?),
            ClientSpec::Websocket(w) => Prepared::Ws(ws::WsPrep::new(w, feeders, key)?),
        }))
    }

    /// The local address client `client` of the group connects from: an http or tcp group's `source_addrs` in
    /// turn (None: the kernel picks, as without them).
    pub fn source_for(&self, client: u64) -> Option<IpAddr> {
        match self {
            Prepared::Http(p) => net::source_for(p.sources(), client),
            Prepared::Tcp(p) => net::source_for(&p.sources, client),
            Prepared::Ws(p) => net::source_for(&p.sources, client),
            _ => None,
        }
    }

    /// The names of the group's request mix (empty without one): its results are kept per name too.
    pub fn request_names(&self) -> Vec<String> {
        match self {
            Prepared::Http(p) => p.names(),
            _ => Vec::new(),
        }
    }

    /// Its clients start processes for every operation (exec): their threads hold spawn slots.
    pub fn spawns(&self) -> bool {
        matches!(self, Prepared::Exec(_))
    }

    /// Open files `clients` clients of the group hold at most while their operations run (for the fd-limit check).
    /// An exec client: the child's wait handle (a pidfd at most) and a pipe for each of stdout and
    /// stderr (their tails are the failure's reason). The descriptors a spawn opens for a moment
    /// (/dev/null, the child's pipe ends, std's exec-error pipe) are one spawn at a time per thread:
    /// `SPAWN_FDS` per thread. HTTP/2's clients are streams: a descriptor a connection.
    pub fn fds(&self, clients: u64) -> u64 {
        match self {
            Prepared::Exec(_) => clients.saturating_mul(3),
            Prepared::Http(h) => h.h2.as_ref().map_or(clients, |h2| h2.connections.min(clients)),
            _ => clients,
        }
    }
}

/// One client's state (connection, buffers) between operations.
enum Kind {
    Http(http::HttpClient),
    Http2(http2::H2Client),
    Tcp(tcp::TcpClient),
    Exec(exec::ExecClient),
    Program(program::ProgramClient),
    Ws(ws::WsClient),
}

/// One client: its state between operations and the message of its last failure.
pub(crate) struct Client {
    kind: Kind,
    /// Written by a failing operation (reused: no allocation once grown).
    pub detail: Detail,
    /// The current operation's number (the client's 0-based count).
    iteration: u64,
}

impl Client {
    /// `host`: a program client's place in its program's process (None for the other kinds).
    pub fn new(prep: Arc<Prepared>, client: u64, host: Option<Host>) -> Client {
        let kind = match (&*prep, host) {
            (Prepared::Program(_), Some(Host::Program(host))) => {
                Kind::Program(program::ProgramClient::new(host, client))
            }
            (Prepared::Program(_), _) => unreachable!("a program client always has a host"),
            (Prepared::Http(p), host) if p.h2.is_some() => {
                let lane = match host {
                    Some(Host::Lane(lane)) => Some(lane),
                    _ => None,
                };
                Kind::Http2(http2::H2Client::new(prep, lane, client))
            }
            (Prepared::Http(_), _) => Kind::Http(http::HttpClient::new(prep, client)),
            (Prepared::Tcp(_), _) => Kind::Tcp(tcp::TcpClient::new(prep, client)),
            (Prepared::Exec(_), _) => Kind::Exec(exec::ExecClient::new(prep)),
            (Prepared::Ws(_), _) => Kind::Ws(ws::WsClient::new(prep, client)),
        };
        Client {
            kind,
            detail: Detail::default(),
            iteration: 0,
        }
    }

    /// Before an operation: pick its request, take its rows, fill its templates in. Err: a data source it reads
    /// has run out (the operation does not start).
    pub fn prepare(&mut self, draw: &mut Draw<'_>) -> Result<(), Exhausted> {
        self.iteration = draw.iteration;
        match &mut self.kind {
            Kind::Http(c) => c.op.prepare(draw),
            Kind::Tcp(c) => c.prepare(draw),
            Kind::Exec(c) => c.prepare(draw),
            Kind::Program(c) => c.prepare(draw),
            Kind::Http2(c) => c.op.prepare(draw),
            Kind::Ws(c) => c.prepare(draw),
        }
    }

    /// The request of the group's mix this operation sends (0 without a mix).
    pub fn request(&self) -> usize {
        match &self.kind {
            Kind::Http(c) => c.op.request(),
            Kind::Http2(c) => c.op.request(),
            _ => 0,
        }
    }

    /// Run the operation `prepare` made ready.
    pub async fn run(&mut self, cancel: &mut Cancel<'_>) -> OpReport {
        let d = &mut self.detail;
        match &mut self.kind {
            Kind::Http(c) => c.run(cancel, d).await,
            Kind::Http2(c) => c.run(cancel, d).await,
            Kind::Tcp(c) => c.run(cancel, d).await,
            // Boxed: a process's future is large, and the task of every client holds the largest kind's;
            // one allocation beside a fork and an exec is nothing.
            Kind::Exec(c) => Box::pin(c.run(cancel, d)).await,
            Kind::Program(c) => c.run(self.iteration, cancel, d).await,
            Kind::Ws(c) => c.run(cancel, d).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cancel::{Alarms, Cancel};
    use crate::spec::ClientSpec;

    /// Every client's task holds an operation's future of the largest kind: kept under 768 bytes for each
    /// kind (10 000 keep-alive clients in ≤ 100 MB; docs/performance.md, memory per connection).
    #[test]
    fn an_operation_s_future_is_small_for_every_kind_of_client() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let alarms = Alarms::default();
            let alarm = alarms.alarm(false);
            let (_tx, mut stop) = tokio::sync::watch::channel(false);
            for spec in [
                r#"{"kind": "http", "url": "http://127.0.0.1:1/"}"#,
                r#"{"kind": "http", "url": "http://127.0.0.1:1/", "http2": true}"#,
                r#"{"kind": "tcp", "addr": "127.0.0.1:1"}"#,
                r#"{"kind": "exec", "argv": ["true"]}"#,
                r#"{"kind": "websocket", "url": "ws://127.0.0.1:1/", "message": "hi"}"#,
            ] {
                let spec: ClientSpec = serde_json::from_str(spec).unwrap();
                let mut c = Client::new(
                    Prepared::new(&spec, 1, &crate::data::Feeders::default(), "k").unwrap(),
                    0,
                    None,
                );
                let mut cancel = Cancel {
                    timeout_at: std::time::Instant::now(),
                    end_at: None,
                    stop: &mut stop,
                    alarm: &alarm,
                };
                let size = std::mem::size_of_val(&c.run(&mut cancel));
                // 776: HTTP/1.1's request says what its checks want of the body (+8); its client is 16 smaller for it
                assert!(size <= 776, "{}: an operation's future is {size} bytes", spec.kind());
            }
        });
    }

    /// The descriptors a group's clients hold: HTTP/2's are streams, a descriptor a connection (5 000 clients at
    /// 100 streams: 50, not 5 000, which an open-file limit of 512 refused).
    #[test]
    fn http2_clients_hold_a_descriptor_a_connection() {
        let fds = |json: &str, clients: u64| {
            let spec: ClientSpec = serde_json::from_str(json).unwrap();
            Prepared::new(&spec, clients, &crate::data::Feeders::default(), "k")
                .unwrap()
                .fds(clients)
        };
        let h2 = r#"{"kind": "http", "url": "http://127.0.0.1:1/", "http2": true, "streams": 100}"#;
        assert_eq!(fds(h2, 5_000), 50);
        assert_eq!(fds(r#"{"kind": "http", "url": "http://127.0.0.1:1/"}"#, 5_000), 5_000);
        assert_eq!(fds(r#"{"kind": "exec", "argv": ["true"]}"#, 10), 30);
    }
}
