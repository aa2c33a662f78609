//! This network namespace's TCP sockets, counted the way `knee.machine.sockets.tcp_census` says: by
//! state (TIME_WAIT left out), the most local ports of the ephemeral range held toward one
//! destination (TIME_WAIT included), and the connections waiting in each listening socket's accept
//! queue. One netlink sock_diag dump per address family and state set, as `ss` does; the sockets in
//! TIME_WAIT asked for with a filter on their local port, so a server's (on its own port) are never
//! sent. Here rather than in Python: a run of new connections leaves tens of thousands of sockets in
//! TIME_WAIT, and Python's parse of each took about 1 µs of the sampler's CPU (19 ms a census with
//! 14 000, 5.7 here; the kernel's walk of its tables, some 3 ms, in both).

use std::collections::{HashMap, HashSet};
use std::io;

const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLM_F_REQUEST_DUMP: u16 = 0x1 | 0x300;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NETLINK_SOCK_DIAG: libc::c_int = 4;
const INET_DIAG_REQ_BYTECODE: u16 = 1;
const INET_DIAG_BC_S_GE: u8 = 2;
const INET_DIAG_BC_S_LE: u8 = 3;
const ALL_STATES: u32 = 0xFFF;
const TIME_WAIT: u8 = 6;
const LISTEN: u8 = 10;
/// nlmsghdr, then inet_diag_msg's fixed part (family … inode).
const NLMSG_HDR: usize = 16;
const DIAG_MSG: usize = 72;

/// One census of the namespace's TCP sockets.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Census {
    /// Sockets by state code (include/net/tcp_states.h), TIME_WAIT left out.
    pub states: HashMap<u8, u32>,
    /// The most local ports of the ephemeral range held toward one destination (local address,
    /// remote address and port) by sockets that are not listening, TIME_WAIT included.
    pub held: u32,
    /// Listening port → connections waiting in its accept queue (only ports with some).
    pub waiting: HashMap<u16, u32>,
}

/// A socket as the census reads it out of an inet_diag_msg.
struct Sock<'a> {
    state: u8,
    local_port: u16,
    recv_queue: u32,
    /// Remote port, local address, remote address: the bytes of the sockid, unparsed.
    peer: &'a [u8],
}

type Destinations = HashMap<[u8; 34], HashSet<u16>>;

/// The census of this network namespace's TCP sockets; `ports` is the ephemeral range (lo, hi).
pub fn tcp_census(ports: (u16, u16)) -> Census {
    let (lo, hi) = ports;
    let mut census = Census::default();
    let mut held: Destinations = HashMap::new();
    dump(ALL_STATES & !(1 << TIME_WAIT), &[], |s| {
        *census.states.entry(s.state).or_default() += 1;
        if s.state == LISTEN {
            if s.recv_queue > 0 {
                *census.waiting.entry(s.local_port).or_default() += s.recv_queue;
            }
        } else if (lo..=hi).contains(&s.local_port) {
            hold(&mut held, &s);
        }
    });
    dump(1 << TIME_WAIT, &local_ports(lo, hi), |s| hold(&mut held, &s));
    census.held = held.values().map(|p| p.len() as u32).max().unwrap_or(0);
    census
}

fn hold(held: &mut Destinations, s: &Sock<'_>) {
    let mut key = [0u8; 34];
    key.copy_from_slice(s.peer);
    held.entry(key).or_default().insert(s.local_port);
}

/// A sock_diag filter that passes the sockets whose local port is in lo..=hi, as `ss 'sport >= lo
/// and sport <= hi'` builds it: each test jumps to the next (`yes`) or past the end (`no`:
/// rejected); a port test is followed by an op whose `no` holds the port.
fn local_ports(lo: u16, hi: u16) -> Vec<u8> {
    let op = |code: u8, yes: u8, no: u16| {
        let mut b = vec![code, yes];
        b.extend_from_slice(&no.to_ne_bytes());
        b
    };
    [
        op(INET_DIAG_BC_S_GE, 8, 20),
        op(0, 0, lo),
        op(INET_DIAG_BC_S_LE, 8, 12),
        op(0, 0, hi),
    ]
    .concat()
}

/// Every TCP socket in `states` (a bit mask of state codes) that the filter passes, IPv4 then IPv6,
/// handed to `each`. A family the kernel will not dump (no IPv6, no sock_diag) is skipped.
fn dump(states: u32, filter: &[u8], mut each: impl FnMut(Sock<'_>)) {
    for family in [libc::AF_INET, libc::AF_INET6] {
        let _ = dump_family(family as u8, states, filter, &mut each);
    }
}

fn dump_family(family: u8, states: u32, filter: &[u8], each: &mut impl FnMut(Sock<'_>)) -> io::Result<()> {
    let fd = Fd::netlink()?;
    let mut req = Vec::with_capacity(NLMSG_HDR + 56 + 4 + filter.len());
    let attr_len = if filter.is_empty() { 0 } else { 4 + filter.len() };
    let total = (NLMSG_HDR + 56 + attr_len) as u32;
    req.extend_from_slice(&total.to_ne_bytes());
    req.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    req.extend_from_slice(&NLM_F_REQUEST_DUMP.to_ne_bytes());
    req.extend_from_slice(&1u32.to_ne_bytes()); // sequence
    req.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel's
    req.extend_from_slice(&[family, libc::IPPROTO_TCP as u8, 0, 0]); // inet_diag_req_v2: no extensions
    req.extend_from_slice(&states.to_ne_bytes());
    req.extend_from_slice(&[0u8; 48]); // its sockid: any
    if !filter.is_empty() {
        req.extend_from_slice(&(attr_len as u16).to_ne_bytes());
        req.extend_from_slice(&INET_DIAG_REQ_BYTECODE.to_ne_bytes());
        req.extend_from_slice(filter);
    }
    fd.send(&req)?;
    let mut buf = vec![0u8; 1 << 17];
    loop {
        let n = fd.recv(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        let data = &buf[..n];
        let mut at = 0;
        while at + NLMSG_HDR <= data.len() {
            let len = u32::from_ne_bytes(data[at..at + 4].try_into().expect("4 bytes")) as usize;
            let kind = u16::from_ne_bytes(data[at + 4..at + 6].try_into().expect("2 bytes"));
            if kind == NLMSG_DONE || kind == NLMSG_ERROR || len < NLMSG_HDR {
                return Ok(());
            }
            if len >= NLMSG_HDR + DIAG_MSG && at + NLMSG_HDR + DIAG_MSG <= data.len() {
                let m = &data[at + NLMSG_HDR..at + NLMSG_HDR + DIAG_MSG];
                let u32_at = |i: usize| u32::from_ne_bytes(m[i..i + 4].try_into().expect("4 bytes"));
                each(Sock {
                    state: m[1],
                    local_port: u16::from_be_bytes([m[4], m[5]]),
                    recv_queue: u32_at(56),
                    peer: &m[6..40],
                });
            }
            at += (len + 3) & !3;
        }
    }
}

/// A netlink socket of the sock_diag family, closed when dropped.
struct Fd(libc::c_int);

impl Fd {
    fn netlink() -> io::Result<Fd> {
        // SAFETY: socket(2) with constant arguments; the descriptor is owned by the returned Fd.
        let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, NETLINK_SOCK_DIAG) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Fd(fd))
    }

    fn send(&self, b: &[u8]) -> io::Result<()> {
        // SAFETY: `b` is a live slice of b.len() bytes; the kernel reads the whole request at once.
        let n = unsafe { libc::send(self.0, b.as_ptr().cast(), b.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn recv(&self, b: &mut [u8]) -> io::Result<usize> {
        loop {
            // SAFETY: `b` is a live, writable slice of b.len() bytes.
            let n = unsafe { libc::recv(self.0, b.as_mut_ptr().cast(), b.len(), 0) };
            if n >= 0 {
                return Ok(n as usize);
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
    }
}

impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: the descriptor was opened by Fd::netlink and is closed once, here.
        unsafe { libc::close(self.0) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::{TcpListener, TcpStream};

    fn ephemeral() -> (u16, u16) {
        let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").expect("the range");
        let mut it = text.split_whitespace().map(|p| p.parse::<u16>().expect("a port"));
        (it.next().expect("lo"), it.next().expect("hi"))
    }

    /// Ports of the sockets in TIME_WAIT that a dump with `filter` sends.
    fn time_wait_ports(filter: &[u8]) -> Vec<u16> {
        let mut ports = vec![];
        dump(1 << TIME_WAIT, filter, |s| ports.push(s.local_port));
        ports
    }

    #[test]
    fn a_servers_time_wait_is_never_sent_and_a_clients_is_held() {
        let (lo, hi) = ephemeral();
        // a service's port outside the ephemeral range, as a service's is
        let listener = (1025..lo)
            .rev()
            .chain(hi.saturating_add(1)..=u16::MAX)
            .find_map(|p| TcpListener::bind(("127.0.0.1", p)).ok())
            .expect("a free port outside the ephemeral range");
        let addr = listener.local_addr().expect("addr");
        // 30 connections whose client closes first (its side keeps the TIME_WAIT, on an ephemeral
        // port), 30 whose server does (on the service's port)
        for client_first in [true, false] {
            for _ in 0..30 {
                let mut c = TcpStream::connect(addr).expect("connect");
                let (mut a, _) = listener.accept().expect("accept");
                if client_first {
                    drop(c);
                    let _ = a.read(&mut [0u8; 1]); // the FIN
                } else {
                    drop(a);
                    let _ = c.read(&mut [0u8; 1]);
                }
            }
        }
        // and 3 left waiting in the listener's accept queue
        let queued: Vec<TcpStream> = (0..3).map(|_| TcpStream::connect(addr).expect("connect")).collect();
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(time_wait_ports(&[]).iter().filter(|p| **p == addr.port()).count() >= 30);
        let asked = time_wait_ports(&local_ports(lo, hi));
        assert!(asked.iter().all(|p| (lo..=hi).contains(p)), "{asked:?}");
        let census = tcp_census((lo, hi));
        assert!(census.held >= 30, "{census:?}");
        assert!(!census.states.contains_key(&TIME_WAIT), "{census:?}");
        assert_eq!(census.waiting.get(&addr.port()), Some(&3), "{census:?}");
        assert!(census.states.get(&LISTEN).copied().unwrap_or(0) >= 1, "{census:?}");
        drop(queued);
    }
}
