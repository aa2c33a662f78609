//! What can end an operation early: its timeout (→ hung), the group's end or `stop()` (→ abandoned).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use tokio::sync::watch;

use crate::outcome::{OpReport, Outcome};

pub(crate) struct Cancel<'a> {
    pub timeout_at: Instant,
    pub end_at: Option<Instant>,
    pub stop: &'a mut watch::Receiver<bool>,
}

impl Cancel<'_> {
    /// Resolves when the operation must end, with `Hung` (timeout) or `Abandoned` (group end, stop).
    pub async fn fired(&mut self) -> Outcome {
        let until = match self.end_at {
            Some(e) if e < self.timeout_at => e,
            _ => self.timeout_at,
        };
        tokio::select! {
            _ = tokio::time::sleep_until(until.into()) => {
                if until == self.timeout_at { Outcome::Hung } else { Outcome::Abandoned }
            }
            _ = self.stop.wait_for(|s| *s) => Outcome::Abandoned,
        }
    }
}

impl Cancel<'_> {
    /// Run an operation's exchange unless the operation must end first (then its report is only `Hung`
    /// or `Abandoned`).
    pub async fn race(&mut self, exchange: impl std::future::Future<Output = OpReport>) -> OpReport {
        tokio::select! {
            biased;
            r = exchange => r,
            o = self.fired() => OpReport::of(o),
        }
    }
}

/// Sleep until `at`, unless the run is stopped first (returns false then).
pub(crate) async fn sleep_unless_stopped(at: Instant, stop: &mut watch::Receiver<bool>, flag: &AtomicBool) -> bool {
    if flag.load(Ordering::Relaxed) {
        return false;
    }
    if at <= Instant::now() {
        return true;
    }
    tokio::select! {
        _ = tokio::time::sleep_until(at.into()) => true,
        _ = stop.wait_for(|s| *s) => false,
    }
}
