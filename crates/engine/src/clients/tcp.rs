//! Raw TCP: connect, optionally send, optionally read until a regex matches, close.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::template::{uses_of, Filled, Pattern, Template};
use super::{net, Prepared};
use crate::cancel::{race, Cancel};
use crate::class::ErrorClass;
use crate::data::{Draw, Exhausted, Feeders};
use crate::error::{EngineError, SpecError};
use crate::outcome::{Detail, OpReport, Outcome};
use crate::spec::TcpSpec;

/// The most of a reply kept and matched against `expect`: a service that streams (a feed, chargen) or a long reply
/// the pattern never matches held every byte per client, and matched all of it again at each read.
const MAX_REPLY: usize = 1 << 20;

pub(crate) struct TcpPrep {
    addr: SocketAddr,
    send: Template,
    /// Data sources `send` and `expect` read.
    pub(super) uses: Vec<usize>,
    expect: Option<Pattern>,
    pub(super) sources: Vec<IpAddr>,
    connect_timeout: Option<Duration>,
}

impl TcpPrep {
    pub fn new(spec: &TcpSpec, feeders: &Feeders, key: &str) -> Result<TcpPrep, EngineError> {
        let send = Template::compile(
            spec.send.as_deref().unwrap_or_default(),
            feeders,
            &format!("{key}.send"),
            true,
        )
        .map_err(SpecError)?;
        let expect = match spec.expect.as_deref() {
            Some(e) => Some(Pattern::compile(e, feeders, &format!("{key}.expect")).map_err(SpecError)?),
            None => None,
        };
        let addr = net::resolve(spec.addr.as_str(), &spec.addr, &format!("{key}.addr"))?;
        net::check_sources(&spec.source_addrs, addr, key)?;
        let uses = uses_of([&send.uses[..], expect.as_ref().map_or(&[][..], Pattern::uses)]);
        Ok(TcpPrep {
            addr,
            uses,
            send,
            expect,
            sources: spec.source_addrs.clone(),
            connect_timeout: spec.connect_timeout_ms.map(Duration::from_millis),
        })
    }
}

pub(crate) struct TcpClient {
    prep: Arc<Prepared>,
    buf: Vec<u8>,
    /// This operation's `send`, rendered.
    out: Vec<u8>,
    /// This operation's `expect`, when templated.
    expect_now: Filled,
    /// The local address this client connects from (None: the kernel picks).
    source: Option<IpAddr>,
    /// This operation's connection is open: the service has seen it (before, cut short, it never started).
    connected: bool,
}

impl TcpClient {
    /// `client`: the client's number in its group (it picks the source address).
    pub fn new(prep: Arc<Prepared>, client: u64) -> TcpClient {
        TcpClient {
            source: prep.source_for(client),
            prep,
            buf: Vec::with_capacity(4096),
            out: Vec::new(),
            expect_now: None,
            connected: false,
        }
    }

    /// Take this operation's rows and write what it sends.
    pub fn prepare(&mut self, draw: &mut Draw<'_>) -> Result<(), Exhausted> {
        let Prepared::Tcp(p) = &*self.prep else {
            unreachable!("a tcp client always has a tcp prep")
        };
        draw.take(&p.uses)?;
        self.out.clear();
        p.send.render(&mut self.out, draw);
        self.expect_now = p.expect.as_ref().and_then(|e| e.fill(draw));
        Ok(())
    }

    pub async fn run(&mut self, cancel: &mut Cancel<'_>, d: &mut Detail) -> OpReport {
        self.connected = false;
        let mut report = race!(cancel, self.exchange(d));
        // cut short while connecting: the service never saw it, as an HTTP request never written
        report.unsent = report.outcome.unsent(self.connected);
        report
    }

    async fn exchange(&mut self, d: &mut Detail) -> OpReport {
        let Prepared::Tcp(p) = &*self.prep else {
            unreachable!("a tcp client always has a tcp prep")
        };
        if let Some(Err(why)) = &self.expect_now {
            d.clear().put(format_args!("{why}"));
            return OpReport::of(Outcome::Fail(ErrorClass::Request));
        }
        let t = Instant::now();
        let mut stream = match net::connect(p.addr, self.source, p.connect_timeout).await {
            Ok(s) => s,
            Err(e) => {
                d.clear()
                    .put(format_args!("connect to {}: ", net::Peer(p.addr, self.source)))
                    .io(&e);
                return OpReport::of(Outcome::Fail(ErrorClass::of_connect(&e)));
            }
        };
        let connect = Some(t.elapsed());
        self.connected = true;
        let _ = stream.set_nodelay(true);
        let mut report = OpReport {
            connect,
            ..OpReport::of(Outcome::Ok)
        };
        if !self.out.is_empty() {
            if let Err(e) = stream.write_all(&self.out).await {
                d.clear().put(format_args!("sending to {}: ", p.addr)).io(&e);
                report.outcome = Outcome::Fail(ErrorClass::of_io(&e, true));
                return report;
            }
            report.bytes.sent = self.out.len() as u64;
        }
        let Some(re) = p.expect.as_ref().and_then(|e| e.current(&self.expect_now)) else {
            return report;
        };
        self.buf.clear();
        if self.buf.capacity() > 64 * 1024 {
            self.buf = Vec::with_capacity(4096); // a long reply's buffer is not kept for the client's life
        }
        loop {
            if self.buf.capacity() - self.buf.len() < 1024 {
                self.buf.reserve(4096);
            }
            match stream.read_buf(&mut self.buf).await {
                Ok(0) => {
                    let n = self.buf.len();
                    d.clear()
                        .put(format_args!(
                            "{} closed the connection after {n} bytes without a match for expect",
                            p.addr
                        ))
                        .quoted(&self.buf, 120);
                    report.outcome = Outcome::Fail(ErrorClass::Closed);
                    break;
                }
                Ok(_) => {
                    report.ttfb.get_or_insert_with(|| t.elapsed());
                    if re.is_match(&self.buf) {
                        report.bytes.payload = self.buf.len() as u64;
                        break;
                    }
                    if self.buf.len() >= MAX_REPLY {
                        d.clear()
                            .put(format_args!(
                                "{} sent {} bytes without a match for expect (knee reads at most {} MiB of a reply)",
                                p.addr,
                                self.buf.len(),
                                MAX_REPLY >> 20
                            ))
                            .quoted(&self.buf, 120);
                        report.outcome = Outcome::Fail(ErrorClass::Protocol);
                        break;
                    }
                }
                Err(e) => {
                    d.clear().put(format_args!("reading from {}: ", p.addr)).io(&e);
                    report.outcome = Outcome::Fail(ErrorClass::of_io(&e, false));
                    break;
                }
            }
        }
        report.bytes.received = self.buf.len() as u64;
        report
    }
}
