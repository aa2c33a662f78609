//! What an HTTP client keeps for its operations, HTTP/1.1's (`http::HttpClient`) and HTTP/2's
//! (`http2::H2Client`) alike: the group's prep, the request chosen, the source address, the body.

use std::net::IpAddr;
use std::sync::Arc;

use super::bodycheck::BodyCheck;
use super::http::Chosen;
use super::Prepared;
use crate::data::{Draw, Exhausted};
use crate::outcome::Outcome;

/// An HTTP client's operation state, whichever version it speaks.
pub(super) struct HttpOp {
    pub(super) prep: Arc<Prepared>,
    /// The body as its checks take it (or the start of it, to quote an unexpected status's).
    pub(super) body: BodyCheck,
    /// The current operation has begun writing its request, or handed it to a connection (it may have reached
    /// the server).
    pub(super) wrote: bool,
    /// HTTP/1.1: the current operation's request met a kept connection closed before any answer, after some of it
    /// was written, and was sent again (`OpReport::resent`: kept here, so that a cut-short operation still says it).
    pub(super) resent: bool,
    /// The local address the client connects from (None: the kernel picks; HTTP/2: its lane's, when it has one).
    pub(super) source: Option<IpAddr>,
    /// This operation's request (its bytes, or HTTP/2's block and body, when templated).
    pub(super) chosen: Chosen,
}

impl HttpOp {
    /// `client`: the client's number in its group (it picks the source address).
    pub fn new(prep: Arc<Prepared>, client: u64) -> HttpOp {
        HttpOp {
            source: prep.source_for(client),
            prep,
            body: BodyCheck::default(),
            wrote: false,
            resent: false,
            chosen: Chosen::default(),
        }
    }

    /// Pick this operation's request, take its rows and fill it in.
    pub fn prepare(&mut self, draw: &mut Draw<'_>) -> Result<(), Exhausted> {
        self.chosen.prepare(&self.prep, draw)
    }

    /// The request this operation sends (its index in the group's mix).
    pub fn request(&self) -> usize {
        self.chosen.index()
    }

    /// An abandoned operation that had not begun writing: its request never reached the server.
    pub fn unsent(&self, outcome: &Outcome) -> bool {
        outcome.unsent(self.wrote)
    }
}
