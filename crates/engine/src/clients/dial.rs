//! Opening a connection for HTTP/1.1 and HTTP/2 alike: the TCP connect, then (https) the TLS handshake,
//! each timed on its own, the handshake's kind (full or resumed) noted, and a failure's class and words.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use super::net;
use crate::class::ErrorClass;
use crate::error::EngineError;
use crate::outcome::{Detail, Handshake};
use crate::spec::TlsSpec;

/// Where a group's clients connect, and how: the address, for https the TLS connector and name, and the
/// time a connection may take to open.
pub(crate) struct Dialer {
    pub addr: SocketAddr,
    pub tls: Option<(TlsConnector, ServerName<'static>)>,
    pub limit: Option<Duration>,
}

/// One open connection.
pub(crate) enum Conn {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl Conn {
    /// The protocol the server chose by ALPN (None: plain TCP, or the server chose none).
    pub fn alpn(&self) -> Option<&[u8]> {
        match self {
            Conn::Plain(_) => None,
            Conn::Tls(s) => s.get_ref().1.alpn_protocol(),
        }
    }

    /// Whether an idle connection is still open and quiet: the server has neither closed it nor sent
    /// anything unasked (for TLS, a close_notify). One system call, a peek at the socket.
    pub fn quiet(&self) -> bool {
        let tcp = match self {
            Conn::Plain(s) => s,
            Conn::Tls(s) => s.get_ref().0,
        };
        let mut one = [std::mem::MaybeUninit::uninit(); 1];
        matches!(socket2::SockRef::from(tcp).peek(&mut one), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
    }
}

/// How the connection was opened: the TCP connect's time and the handshake's.
#[derive(Clone, Copy)]
pub(crate) struct Opened {
    pub connect: Duration,
    pub handshake: Option<Handshake>,
}

/// Why it could not be opened (the words are in the client's `Detail`); `connect` is set when the TCP
/// connect succeeded and the handshake failed.
pub(crate) struct DialError {
    pub class: ErrorClass,
    pub connect: Option<Duration>,
}

/// A group's URL parsed, its `${…}` placeholders standing in as a URL can hold them; an error names `key.url`.
pub(crate) fn parse_url(url: &str, key: &str) -> Result<hyper::Uri, EngineError> {
    crate::spec::untemplated(url).parse().map_err(|e| {
        EngineError::Spec(crate::error::SpecError(format!(
            "{key}.url {url:?} is not a valid URL ({e})"
        )))
    })
}

/// A URL's host as an address is written without its IPv6 brackets.
pub(crate) fn host_of(url: &hyper::Uri) -> &str {
    url.host()
        .unwrap_or_default()
        .trim_start_matches('[')
        .trim_end_matches(']')
}

impl Dialer {
    /// The dialer of a parsed URL (http(s) or ws(s)): its host resolved (`net::resolve`), or `connect_to`'s
    /// `HOST:PORT` instead (the URL's host still the TLS server name), `source_addrs` checked against its family,
    /// and, `secure`, a TLS connector with `alpn`. Errors name `key`.
    #[allow(clippy::too_many_arguments)]
    pub fn of_url(
        url: &hyper::Uri,
        connect_to: Option<&str>,
        secure: bool,
        tls_spec: &TlsSpec,
        insecure: bool,
        alpn: &[u8],
        sources: &[IpAddr],
        limit: Option<Duration>,
        key: &str,
    ) -> Result<Dialer, EngineError> {
        let host = host_of(url);
        let port = url.port_u16().unwrap_or(if secure { 443 } else { 80 });
        let addr = match connect_to {
            None => net::resolve((host, port), &format!("{host}:{port}"), &format!("{key}.url"))?,
            Some(to) => {
                let bad = || {
                    EngineError::Spec(crate::error::SpecError(format!(
                        "{key}.connect_to {to:?} is not HOST:PORT (an IPv6 address in brackets, [::1]:8443)"
                    )))
                };
                let (name, port) = to.rsplit_once(':').ok_or_else(bad)?;
                let port: u16 = port.parse().map_err(|_| bad())?;
                let name = name.trim_start_matches('[').trim_end_matches(']');
                if name.is_empty() {
                    return Err(bad());
                }
                net::resolve((name, port), to, &format!("{key}.connect_to"))?
            }
        };
        net::check_sources(sources, addr, key)?;
        let tls = if secure {
            let config = super::tls::client_config(tls_spec, insecure, alpn).map_err(|reason| EngineError::Tls {
                key: key.to_string(),
                reason,
            })?;
            let name = ServerName::try_from(host.to_string()).map_err(|e| EngineError::Tls {
                key: format!("{key}.url"),
                reason: e.to_string(),
            })?;
            Some((config, name))
        } else {
            None
        };
        Ok(Dialer::new(addr, tls, limit))
    }

    /// `limit`: the time the connection may take to open, connect and handshake together (None: no limit
    /// but the operation's).
    pub fn new(
        addr: SocketAddr,
        tls: Option<(Arc<ClientConfig>, ServerName<'static>)>,
        limit: Option<Duration>,
    ) -> Dialer {
        Dialer {
            addr,
            tls: tls.map(|(config, name)| (TlsConnector::from(config), name)),
            limit,
        }
    }

    /// Connect (from `source` when given) and shake hands; `nodelay`: set TCP_NODELAY.
    pub async fn dial(
        &self,
        nodelay: bool,
        source: Option<IpAddr>,
        d: &mut Detail,
    ) -> Result<(Conn, Opened), DialError> {
        let t = Instant::now();
        let stream = match net::connect(self.addr, source, self.limit).await {
            Ok(s) => s,
            Err(e) => return Err(self.connect_failed(source, &e, None, d)),
        };
        let connect = t.elapsed();
        if nodelay {
            let _ = stream.set_nodelay(true);
        }
        let Some((connector, name)) = &self.tls else {
            return Ok((
                Conn::Plain(stream),
                Opened {
                    connect,
                    handshake: None,
                },
            ));
        };
        let t = Instant::now();
        // Boxed: the handshake future is large and would otherwise sit in every client's task.
        let done = match self.limit {
            None => Box::pin(connector.connect(name.clone(), stream)).await,
            // What the connect left of the limit (none: the connect itself took it all).
            Some(limit) if connect >= limit => {
                return Err(self.connect_failed(source, &net::timed_out(limit), Some(connect), d));
            }
            Some(limit) => match Box::pin(tokio::time::timeout(
                limit - connect,
                connector.connect(name.clone(), stream),
            ))
            .await
            {
                Ok(done) => done,
                Err(_) => {
                    d.clear().put(format_args!(
                        "TLS handshake with {}: handshake timeout (the connection not open within {}, \
                         connect_timeout)",
                        self.addr,
                        net::Millis(limit)
                    ));
                    return Err(DialError {
                        class: ErrorClass::Tls,
                        connect: Some(connect),
                    });
                }
            },
        };
        match done {
            Ok(tls) => {
                let resumed = matches!(tls.get_ref().1.handshake_kind(), Some(rustls::HandshakeKind::Resumed));
                let handshake = Some(Handshake {
                    time: t.elapsed(),
                    resumed,
                });
                Ok((Conn::Tls(Box::new(tls)), Opened { connect, handshake }))
            }
            Err(e) => {
                d.clear().put(format_args!("TLS handshake with {}: ", self.addr)).io(&e);
                // TLS's own failures are `tls`; a connection reset or closed during the handshake (an overloaded
                // service's accept queue, a connection cap) is the overload it is over http too, not a certificate
                Err(DialError {
                    class: ErrorClass::of_io(&e, false),
                    connect: Some(connect),
                })
            }
        }
    }

    /// A connect that failed (or took the whole limit): its words and class; `connect`, its time if it ended.
    fn connect_failed(
        &self,
        source: Option<IpAddr>,
        e: &io::Error,
        connect: Option<Duration>,
        d: &mut Detail,
    ) -> DialError {
        d.clear()
            .put(format_args!("connect to {}: ", net::Peer(self.addr, source)))
            .io(e);
        DialError {
            class: ErrorClass::of_connect(e),
            connect,
        }
    }
}

impl AsyncRead for Conn {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Conn::Tls(s) => Pin::new(&mut **s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Conn::Tls(s) => Pin::new(&mut **s).poll_write(cx, buf),
        }
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Conn::Tls(s) => Pin::new(&mut **s).poll_write_vectored(cx, bufs),
        }
    }
    fn is_write_vectored(&self) -> bool {
        match self {
            Conn::Plain(s) => s.is_write_vectored(),
            Conn::Tls(s) => s.is_write_vectored(),
        }
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_flush(cx),
            Conn::Tls(s) => Pin::new(&mut **s).poll_flush(cx),
        }
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Conn::Tls(s) => Pin::new(&mut **s).poll_shutdown(cx),
        }
    }
}
