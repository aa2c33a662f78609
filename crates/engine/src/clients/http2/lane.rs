//! HTTP/2 connections on one engine thread. A group's clients are streams: up to `streams` of them share a
//! *lane*, which holds the lane's current connection (a `Link`) and opens a new one when there is none,
//! the last was closed, or its server sent GOAWAY. The client that opens it times the connect and the
//! handshake; the others wait for it, and fail as it did when it cannot be opened. Each connection is
//! driven by a task of its own on the thread.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::rc::Rc;
use std::time::Duration;

use tokio::sync::Notify;

use super::conn::{Driver, Link};
use crate::class::ErrorClass;
use crate::clients::dial::{DialError, Opened};
use crate::clients::http::HttpPrep;
use crate::clients::{net, HostedGroup, Prepared};
use crate::outcome::Detail;

/// How long the end of a run waits for the connections to close cleanly (GOAWAY sent, sockets shut).
const CLOSE_WAIT: Duration = Duration::from_millis(200);

/// Open a connection: connect, TLS (ALPN must choose h2); its driver (which sends the preface first)
/// runs as a task of this thread, its handle pushed on `drivers` (to wait for it at the end).
pub(crate) async fn open(
    p: &HttpPrep,
    drivers: &RefCell<Vec<tokio::task::JoinHandle<()>>>,
    source: Option<IpAddr>,
    d: &mut Detail,
) -> Result<(Rc<Link>, Opened), DialError> {
    let (conn, opened) = p.dialer.dial(true, source, d).await?;
    if p.dialer.tls.is_some() && conn.alpn() != Some(b"h2") {
        let chose = conn.alpn().map_or("none".into(), String::from_utf8_lossy);
        // Kept verbatim (fixed): the protocol's digits are not a number to mask.
        d.clear()
            .put(format_args!(
                "HTTP/2 not agreed by ALPN: the server chose {chose}; drop http2 for this service"
            ))
            .fix();
        return Err(DialError {
            class: ErrorClass::Protocol,
            connect: Some(opened.connect),
        });
    }
    let link = Rc::new(Link::new());
    let mut drivers = drivers.borrow_mut();
    drivers.retain(|h| !h.is_finished());
    drivers.push(tokio::task::spawn_local(Driver::new(conn, link.clone())));
    Ok((link, opened))
}

/// Up to `streams` clients sharing one connection at a time.
#[derive(Default)]
pub(crate) struct Lane {
    link: RefCell<Option<Rc<Link>>>,
    dialing: Cell<bool>,
    dialed: Notify,
    /// Dials begun on this lane; the last one that failed, with its class and words: the clients that waited
    /// for that dial fail as it did (one after another would each wait for a dial of its own, a connect
    /// timeout each).
    dials: Cell<u64>,
    failed: RefCell<Option<(u64, ErrorClass, Detail)>>,
    drivers: Rc<RefCell<Vec<tokio::task::JoinHandle<()>>>>,
    /// The local address its connections come from (connection `k` of the shard from the group's
    /// `k % len`-th source address; None: the kernel picks, or the client's own when it has no shared lane).
    pub source: Option<IpAddr>,
}

/// Clears the lane's "dialing" mark however the dial ends (an operation cancelled while dialing too).
struct Dialing<'a>(&'a Lane);

impl Drop for Dialing<'_> {
    fn drop(&mut self) {
        self.0.dialing.set(false);
        self.0.dialed.notify_waiters();
    }
}

impl Lane {
    /// A connection to open a stream on: the lane's, or one this client opens now (then its opening is
    /// returned, to be recorded with this operation).
    /// `source`: the local address a connection this client opens comes from.
    pub async fn link(
        &self,
        p: &HttpPrep,
        source: Option<IpAddr>,
        d: &mut Detail,
    ) -> Result<(Rc<Link>, Option<Opened>), DialError> {
        loop {
            if let Some(l) = self.current() {
                return Ok((l, None));
            }
            if self.dialing.get() {
                let dial = self.dials.get();
                self.dialed.notified().await;
                if let Some((n, class, words)) = &*self.failed.borrow() {
                    if *n == dial {
                        d.clone_from(words);
                        return Err(DialError {
                            class: *class,
                            connect: None,
                        });
                    }
                }
                continue;
            }
            self.dialing.set(true);
            self.dials.set(self.dials.get() + 1);
            let _mark = Dialing(self);
            if let Some(old) = self.link.borrow_mut().take() {
                old.close(); // it closes once its streams are done
            }
            let (link, opened) = match open(p, &self.drivers, source, d).await {
                Ok(opened) => opened,
                Err(e) => {
                    *self.failed.borrow_mut() = Some((self.dials.get(), e.class, d.clone()));
                    return Err(e);
                }
            };
            *self.link.borrow_mut() = Some(link.clone());
            return Ok((link, Some(opened)));
        }
    }

    /// The lane's connection, if new streams may be opened on it.
    pub fn current(&self) -> Option<Rc<Link>> {
        self.link.borrow().as_ref().filter(|l| l.usable()).cloned()
    }

    /// Stop opening streams on `link` (it failed, or the server stopped taking streams on it): it
    /// closes once its open streams are done.
    pub fn forget(&self, link: &Rc<Link>) {
        let mut current = self.link.borrow_mut();
        if current.as_ref().is_some_and(|l| Rc::ptr_eq(l, link)) {
            current.take();
        }
        link.close();
    }

    /// The handles of this lane's connection drivers (shared with operations that open their own).
    pub fn drivers(&self) -> &RefCell<Vec<tokio::task::JoinHandle<()>>> {
        &self.drivers
    }
}

/// One engine thread's lanes, per group: each client slot's lane (empty for other groups).
#[derive(Default)]
pub(crate) struct Lanes {
    groups: Vec<Vec<Rc<Lane>>>,
}

impl Lanes {
    /// The lanes of this thread's clients (`mine`, per group): client `c` of an HTTP/2 group with `C`
    /// connections in the shard is on connection `c % C` (the engine put those clients on this thread).
    pub fn new(groups: &[HostedGroup], mine: &[Vec<u64>]) -> Lanes {
        let mut lanes = Lanes::default();
        for (hg, clients) in groups.iter().zip(mine) {
            let h2 = match &*hg.prep {
                Prepared::Http(p) => p.h2.as_ref().filter(|_| !p.new_connection),
                _ => None,
            };
            let (Some(h2), Prepared::Http(p)) = (h2, &*hg.prep) else {
                lanes.groups.push(Vec::new());
                continue;
            };
            let mut by_connection: BTreeMap<u64, Rc<Lane>> = BTreeMap::new();
            let slots = clients
                .iter()
                .map(|c| {
                    let k = c % h2.connections;
                    let source = net::source_for(p.sources(), k);
                    by_connection
                        .entry(k)
                        .or_insert_with(|| {
                            Rc::new(Lane {
                                source,
                                ..Lane::default()
                            })
                        })
                        .clone()
                })
                .collect();
            lanes.groups.push(slots);
        }
        lanes
    }

    /// Client `slot` of group `g`'s lane, if the group speaks HTTP/2 over shared connections.
    pub fn lane(&self, g: usize, slot: usize) -> Option<Rc<Lane>> {
        self.groups.get(g)?.get(slot).cloned()
    }

    /// Close every connection (each ends with a GOAWAY once its streams are done), and wait a moment for
    /// them to close.
    pub async fn close(&self) {
        let mut drivers = Vec::new();
        for lane in self.groups.iter().flatten() {
            if let Some(link) = lane.link.borrow_mut().take() {
                link.close();
            }
            drivers.append(&mut lane.drivers.borrow_mut());
        }
        let all = async {
            for d in drivers {
                let _ = d.await;
            }
        };
        let _ = tokio::time::timeout(CLOSE_WAIT, all).await;
    }
}
