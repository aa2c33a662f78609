//! The connect path shared by the HTTP and TCP clients: a TCP connection to the service, from one of
//! the group's source addresses when it has them.
//!
//! One local address gives at most one connection per ephemeral port to one service address (about
//! 28 000 with Linux's default range); `source_addrs` spreads the clients over several (127.0.0.2 …
//! 127.0.0.9 on loopback, or a NIC's addresses), client `c` always from `source_addrs[c % len]`.
//! `IP_BIND_ADDRESS_NO_PORT` leaves the port to `connect`, so a port is unique per (source,
//! destination), not per source.

use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tokio::net::{TcpSocket, TcpStream};

use crate::error::{EngineError, SpecError};

/// The address to connect to for `target` (a host and port; `shown` as the error says it): its only one, or, when the name resolves to several
/// (`localhost` to ::1 and 127.0.0.1, ::1 first by RFC 6724), the first that takes a TCP connection now, as wrk
/// and curl try them in turn: a service listening on 127.0.0.1 alone was refused on ::1 at every operation. The
/// probe's connection is closed at once, unused (the service sees one more connection); none taking one, the
/// first. `key` names the spec's key in an error.
pub(crate) fn resolve(target: impl std::net::ToSocketAddrs, shown: &str, key: &str) -> Result<SocketAddr, EngineError> {
    let resolved: Vec<SocketAddr> = target
        .to_socket_addrs()
        .map_err(|e| e.to_string())
        .and_then(|a| {
            let all: Vec<SocketAddr> = a.collect();
            if all.is_empty() {
                Err("no address".to_string())
            } else {
                Ok(all)
            }
        })
        .map_err(|reason| EngineError::Resolve {
            key: key.to_string(),
            addr: shown.to_string(),
            reason,
        })?;
    if resolved.len() > 1 {
        for a in &resolved {
            if std::net::TcpStream::connect_timeout(a, PROBE_CONNECT).is_ok() {
                return Ok(*a);
            }
        }
    }
    Ok(resolved[0])
}

/// How long `resolve` waits for each address of a name that has several.
const PROBE_CONNECT: Duration = Duration::from_secs(1);

/// The source address client `client` connects from (None: the kernel picks, as without the option).
pub(crate) fn source_for(sources: &[IpAddr], client: u64) -> Option<IpAddr> {
    (!sources.is_empty()).then(|| sources[(client % sources.len() as u64) as usize])
}

/// Every source address is of the service address's family (`key`: where the list is in the spec).
pub(crate) fn check_sources(sources: &[IpAddr], to: SocketAddr, key: &str) -> Result<(), EngineError> {
    match sources.iter().find(|s| s.is_ipv4() != to.is_ipv4()) {
        Some(s) => Err(EngineError::Spec(SpecError(format!(
            "{key}.source_addrs: {s} is {} but the service's address {to} is {}; give source addresses of the \
             same family",
            family(s),
            family(&to.ip())
        )))),
        None => Ok(()),
    }
}

fn family(ip: &IpAddr) -> &'static str {
    if ip.is_ipv4() {
        "IPv4"
    } else {
        "IPv6"
    }
}

/// Connect to `to`, from `source` when given, within `limit` when given (a `TimedOut` error once it passed:
/// class `connect_timeout`).
pub(crate) async fn connect(to: SocketAddr, source: Option<IpAddr>, limit: Option<Duration>) -> io::Result<TcpStream> {
    let Some(limit) = limit else {
        return connect_from(to, source).await;
    };
    // Boxed: a timer is large, and only a group with a connect timeout pays for it.
    match Box::pin(tokio::time::timeout(limit, connect_from(to, source))).await {
        Ok(r) => r,
        Err(_) => Err(timed_out(limit)),
    }
}

/// A connection not open within `limit` (class `connect_timeout`).
pub(crate) fn timed_out(limit: Duration) -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        format!("no connection within {} (connect_timeout)", Millis(limit)),
    )
}

/// A duration in whole milliseconds, as a limit was given.
pub(crate) struct Millis(pub Duration);

impl fmt::Display for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ms", self.0.as_millis())
    }
}

async fn connect_from(to: SocketAddr, source: Option<IpAddr>) -> io::Result<TcpStream> {
    let Some(ip) = source else {
        return TcpStream::connect(to).await;
    };
    let socket = if to.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    // Best effort: without it (an old kernel) bind picks the port, and one source holds fewer connections.
    let _ = bind_address_no_port(&socket);
    socket.bind(SocketAddr::new(ip, 0))?;
    socket.connect(to).await
}

/// IP_BIND_ADDRESS_NO_PORT (Linux 4.2): `bind` takes the address only; `connect` picks the port.
fn bind_address_no_port(socket: &TcpSocket) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let one: libc::c_int = 1;
    // SAFETY: setsockopt reads an int of ours on our own socket.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_BIND_ADDRESS_NO_PORT,
            std::ptr::addr_of!(one).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// "127.0.0.1:80", or "127.0.0.1:80 from 127.0.0.2" with a source address: where a connect went.
pub(crate) struct Peer(pub SocketAddr, pub Option<IpAddr>);

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.1 {
            Some(source) => write!(f, "{} from {source}", self.0),
            None => write!(f, "{}", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_take_the_sources_in_turn_and_families_must_match() {
        let s: Vec<IpAddr> = vec!["127.0.0.2".parse().unwrap(), "127.0.0.3".parse().unwrap()];
        let picks: Vec<_> = (0..4).map(|c| source_for(&s, c).unwrap().to_string()).collect();
        assert_eq!(picks, ["127.0.0.2", "127.0.0.3", "127.0.0.2", "127.0.0.3"]);
        assert_eq!(source_for(&[], 7), None);
        assert!(check_sources(&s, "127.0.0.1:80".parse().unwrap(), "k").is_ok());
        let e = check_sources(&s, "[::1]:80".parse().unwrap(), "groups[0].client").unwrap_err();
        assert!(e.to_string().contains("127.0.0.2 is IPv4 but"), "{e}");
        assert_eq!(
            Peer("127.0.0.1:80".parse().unwrap(), s.first().copied()).to_string(),
            "127.0.0.1:80 from 127.0.0.2"
        );
    }
}
