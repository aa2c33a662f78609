//! Raw TCP: connect, optionally send, optionally read until a regex matches, close.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use regex::bytes::Regex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{OpReport, Outcome, Prepared};
use crate::cancel::Cancel;
use crate::class::ErrorClass;
use crate::error::{EngineError, SpecError};
use crate::spec::TcpSpec;

pub(crate) struct TcpPrep {
    addr: SocketAddr,
    send: Bytes,
    expect: Option<Regex>,
}

impl TcpPrep {
    pub fn new(spec: &TcpSpec, key: &str) -> Result<TcpPrep, EngineError> {
        let addr = spec
            .addr
            .to_socket_addrs()
            .map_err(|e| e.to_string())
            .and_then(|mut a| a.next().ok_or_else(|| "no address".to_string()))
            .map_err(|reason| EngineError::Resolve {
                key: format!("{key}.addr"),
                addr: spec.addr.clone(),
                reason,
            })?;
        let expect = match &spec.expect {
            Some(p) => Some(Regex::new(p).map_err(|e| SpecError(format!("{key}.expect {p:?}: {e}")))?),
            None => None,
        };
        Ok(TcpPrep {
            addr,
            send: Bytes::from(spec.send.clone().unwrap_or_default()),
            expect,
        })
    }
}

pub(crate) struct TcpClient {
    prep: Arc<Prepared>,
    buf: Vec<u8>,
}

impl TcpClient {
    pub fn new(prep: Arc<Prepared>) -> TcpClient {
        TcpClient {
            prep,
            buf: Vec::with_capacity(4096),
        }
    }

    pub async fn run(&mut self, cancel: &mut Cancel<'_>) -> OpReport {
        tokio::select! {
            biased;
            r = self.exchange() => r,
            o = cancel.fired() => OpReport::of(o),
        }
    }

    async fn exchange(&mut self) -> OpReport {
        let Prepared::Tcp(p) = &*self.prep else {
            unreachable!("a tcp client always has a tcp prep")
        };
        let t = Instant::now();
        let mut stream = match TcpStream::connect(p.addr).await {
            Ok(s) => s,
            Err(e) => return OpReport::fail(ErrorClass::of_connect(&e), format!("connect to {}: {e}", p.addr)),
        };
        let connect = Some(t.elapsed());
        let _ = stream.set_nodelay(true);
        let fail = |class, msg| OpReport {
            outcome: Outcome::Fail(class, msg),
            connect,
            ttfb: None,
        };
        if !p.send.is_empty() {
            if let Err(e) = stream.write_all(&p.send).await {
                return fail(ErrorClass::of_io(&e, true), format!("sending to {}: {e}", p.addr));
            }
        }
        if let Some(re) = &p.expect {
            self.buf.clear();
            let mut first = None;
            loop {
                if self.buf.capacity() - self.buf.len() < 1024 {
                    self.buf.reserve(4096);
                }
                match stream.read_buf(&mut self.buf).await {
                    Ok(0) => {
                        let n = self.buf.len();
                        return fail(
                            ErrorClass::Closed,
                            format!(
                                "{} closed the connection after {n} bytes without a match for expect",
                                p.addr
                            ),
                        );
                    }
                    Ok(_) => {
                        first.get_or_insert_with(|| t.elapsed());
                        if re.is_match(&self.buf) {
                            break;
                        }
                    }
                    Err(e) => return fail(ErrorClass::of_io(&e, false), format!("reading from {}: {e}", p.addr)),
                }
            }
            return OpReport {
                outcome: Outcome::Ok,
                connect,
                ttfb: first,
            };
        }
        OpReport {
            outcome: Outcome::Ok,
            connect,
            ttfb: None,
        }
    }
}
