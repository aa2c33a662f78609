//! The client side: a hosted client's mailbox in its process (`Slot`), its place (`Host`), and the
//! operation (`ProgramClient::run`): queue the request, wait for the reply, turn it into a report.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use super::process::Proc;
use super::protocol::push_request;
use crate::cancel::Cancel;
use crate::class::ErrorClass;
use crate::outcome::{Detail, OpReport, Outcome, Traffic};

/// What came back for one operation.
pub(super) enum Reply {
    /// The watchdog ended it: its timeout (`hung`), or the group's end or the run's stop (abandoned).
    Cut {
        hung: bool,
    },
    Ok {
        steps: Vec<(String, Duration)>,
        bytes: u64,
    },
    /// The program said the operation failed: its error class and message (and the steps it timed).
    Fail {
        class: String,
        message: String,
        steps: Vec<(String, Duration)>,
    },
    /// The process went away (or broke the protocol) while the operation ran.
    Lost {
        class: ErrorClass,
        message: Rc<str>,
    },
}

/// One hosted client's mailbox (the client and the process's tasks share one thread).
#[derive(Default)]
pub(super) struct Slot {
    /// The operation waiting for its reply, if any: its id (iteration) and when it times out.
    pub(super) pending: Cell<Option<(u64, Instant)>>,
    reply: RefCell<Option<Reply>>,
    waiter: Cell<Option<Waker>>,
}

impl Slot {
    pub(super) fn deliver(&self, reply: Reply) {
        *self.reply.borrow_mut() = Some(reply);
        self.pending.set(None);
        if let Some(w) = self.waiter.take() {
            w.wake();
        }
    }

    fn wait(&self) -> impl Future<Output = Reply> + '_ {
        std::future::poll_fn(|cx| match self.reply.borrow_mut().take() {
            Some(r) => Poll::Ready(r),
            None => {
                self.waiter.set(Some(cx.waker().clone()));
                Poll::Pending
            }
        })
    }
}

/// A client's place in a program's process.
#[derive(Clone)]
pub(crate) struct Host {
    pub(super) proc: Rc<Proc>,
    pub(super) index: usize,
}

/// A client whose operations a long-lived program runs (the scenario's `worker` client).
pub(crate) struct ProgramClient {
    host: Host,
    client: u64,
}

impl ProgramClient {
    pub fn new(host: Host, client: u64) -> ProgramClient {
        ProgramClient { host, client }
    }

    pub async fn run(&mut self, iteration: u64, cancel: &mut Cancel<'_>, d: &mut Detail) -> OpReport {
        let proc = &self.host.proc;
        if !proc.watched.replace(true) {
            let watchdog = proc.clone().watchdog(cancel.stop.clone(), cancel.end_at);
            tokio::task::spawn_local(watchdog);
        }
        if proc.over.get() {
            return OpReport {
                unsent: true,
                ..OpReport::of(Outcome::Abandoned)
            };
        }
        let slot = &proc.slots[self.host.index];
        slot.reply.borrow_mut().take();
        slot.pending.set(Some((iteration, cancel.timeout_at)));
        if proc.idle.replace(false) {
            proc.rouse.notify_one();
        }
        push_request(
            &mut proc.out.borrow_mut(),
            proc.batch.get(),
            self.client,
            iteration,
            &proc.prep().operation_json,
        );
        proc.wake.notify_one();
        match slot.wait().await {
            Reply::Cut { hung } => OpReport::of(if hung { Outcome::Hung } else { Outcome::Abandoned }),
            Reply::Ok { steps, bytes } => OpReport {
                bytes: Traffic {
                    sent: 0,
                    received: bytes,
                    payload: bytes,
                },
                steps,
                ..OpReport::of(Outcome::Ok)
            },
            Reply::Fail { class, message, steps } => {
                // The program's own class is kept verbatim in the grouping key, its message normalised.
                d.clear()
                    .put(format_args!("{class}"))
                    .fix()
                    .head_line(message.as_bytes(), 240);
                OpReport {
                    steps,
                    ..OpReport::of(Outcome::Fail(ErrorClass::Worker))
                }
            }
            Reply::Lost { class, message } => {
                d.clear().put(format_args!("{message}"));
                OpReport::of(Outcome::Fail(class))
            }
        }
    }
}
