//! What can end an operation early: its timeout (→ hung), the group's end or `stop()` (→ abandoned).
//!
//! Each client has one `Alarm`, a timer kept for its whole life rather than one made, registered and
//! removed per operation (with a watch on the stop signal beside it, that was a sixth of the
//! engine's instructions per keep-alive request). Operations start later and later, so the alarm
//! may stay armed for an earlier due time: when it rings before the operation in flight is due, it
//! is re-armed for that one (about once per timeout, per client). A thread's `Alarms` ring every
//! alarm of a group at once when its stop signal comes.

use std::cell::{Cell, RefCell};
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::time::Sleep;

use crate::outcome::Outcome;

pub(crate) struct Cancel<'a> {
    pub timeout_at: Instant,
    pub end_at: Option<Instant>,
    /// The run's (or the background groups') stop signal: program clients watch it for their process.
    pub stop: &'a mut watch::Receiver<bool>,
    pub alarm: &'a Alarm,
}

impl Cancel<'_> {
    /// Resolves when the operation must end, with `Hung` (timeout) or `Abandoned` (group end, stop).
    pub async fn fired(&mut self) -> Outcome {
        let until = match self.end_at {
            Some(e) if e < self.timeout_at => e,
            _ => self.timeout_at,
        };
        let a = &self.alarm.0;
        loop {
            if a.stopped.get() {
                return Outcome::Abandoned;
            }
            if a.armed.get() > until {
                a.arm(until);
            }
            poll_fn(|cx| a.poll(cx)).await;
            if a.stopped.get() {
                return Outcome::Abandoned;
            }
            if Instant::now() >= until {
                return if until == self.timeout_at {
                    Outcome::Hung
                } else {
                    Outcome::Abandoned
                };
            }
            a.arm(until); // it rang for an earlier operation
        }
    }
}

/// A client's timer for the operation in flight, and whether the client's stop signal has come.
pub(crate) struct Alarm(Rc<AlarmState>);

struct AlarmState {
    sleep: RefCell<Pin<Box<Sleep>>>,
    /// When `sleep` rings.
    armed: Cell<Instant>,
    /// `sleep` has been polled since it was armed: it holds the waker of the client's task (the one task that
    /// waits on it) until it rings.
    waiting: Cell<bool>,
    stopped: Cell<bool>,
}

impl AlarmState {
    fn arm(&self, at: Instant) {
        self.armed.set(at);
        self.waiting.set(false);
        self.sleep.borrow_mut().as_mut().reset(at.into());
    }

    /// Ready once the alarm has rung. A timer keeps the waker it was polled with until it rings, so it is polled
    /// once per arming, not again for every operation that waits on it (the poll registering the same waker again was
    /// about 130 of the engine's 4 200 instructions per keep-alive request). A poll made when the task's budget is
    /// spent registers no waker with the timer (tokio only asks for the task to be polled again): it does not count.
    fn poll(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut sleep = self.sleep.borrow_mut();
        if self.waiting.get() && !sleep.is_elapsed() {
            return Poll::Pending;
        }
        self.waiting.set(tokio::task::coop::has_budget_remaining());
        sleep.as_mut().poll(cx)
    }
}

/// One thread's alarms, by stop signal (the run's, or the background groups').
#[derive(Default)]
pub(crate) struct Alarms {
    of: RefCell<[Vec<Rc<AlarmState>>; 2]>,
}

impl Alarms {
    /// A new alarm for a client whose group obeys the background stop (`background`) or the run's.
    pub fn alarm(&self, background: bool) -> Alarm {
        // Far enough never to ring before it is armed for an operation.
        let never = Instant::now() + Duration::from_secs(86_400 * 365);
        let state = Rc::new(AlarmState {
            sleep: RefCell::new(Box::pin(tokio::time::sleep_until(never.into()))),
            armed: Cell::new(never),
            waiting: Cell::new(false),
            stopped: Cell::new(false),
        });
        self.of.borrow_mut()[usize::from(background)].push(state.clone());
        Alarm(state)
    }

    /// Ring the alarms of `background` or foreground clients once `stop` says so: their operations in
    /// flight end as abandoned.
    pub async fn ring_on(self: Rc<Self>, mut stop: watch::Receiver<bool>, background: bool) {
        if stop.wait_for(|s| *s).await.is_err() {
            return;
        }
        let now = Instant::now();
        for a in &self.of.borrow()[usize::from(background)] {
            a.stopped.set(true);
            a.arm(now);
        }
    }
}

/// Run an operation's exchange unless the operation must end first (then its report is only `Hung` or
/// `Abandoned`): `race!(cancel, self.exchange(d))`. A macro, not an async fn: an async fn keeps its
/// argument in its future beside the copy it polls, so every client's task held its exchange twice
/// (some 500 bytes per client, 5 MB for 10 000).
macro_rules! race {
    ($cancel:expr, $exchange:expr) => {
        tokio::select! {
            biased;
            r = $exchange => r,
            o = $cancel.fired() => $crate::outcome::OpReport::of(o),
        }
    };
}
pub(crate) use race;

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

#[cfg(test)]
mod tests {
    use super::*;

    /// An operation whose exchange spent the task's last budget before its alarm was first polled (a write that made
    /// progress, then a read that must wait) still ends as hung at its timeout: that poll registered no waker.
    #[test]
    fn an_alarm_first_polled_with_no_budget_left_still_rings() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let local = tokio::task::LocalSet::new();
        let fired = local.block_on(&rt, async {
            let alarms = Alarms::default();
            let alarm = alarms.alarm(false);
            let (_tx, mut stop) = watch::channel(false);
            let mut cancel = Cancel {
                timeout_at: Instant::now() + Duration::from_millis(50),
                end_at: None,
                stop: &mut stop,
                alarm: &alarm,
            };
            let mut spent = false;
            let exchange = poll_fn(move |cx| {
                while !spent && tokio::task::coop::has_budget_remaining() {
                    if let Poll::Ready(unit) = tokio::task::coop::poll_proceed(cx) {
                        unit.made_progress();
                    }
                }
                spent = true;
                Poll::<()>::Pending
            });
            // The first branch wins if the alarm's ring woke nobody (then only it wakes the task again).
            tokio::select! {
                biased;
                () = tokio::time::sleep(Duration::from_secs(2)) => None,
                () = exchange => None,
                o = cancel.fired() => Some(o),
            }
        });
        assert!(matches!(fired, Some(Outcome::Hung)), "the alarm's ring woke nobody");
    }
}
