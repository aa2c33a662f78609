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
use crate::data::{Draw, Exhausted};
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
    /// This operation's rows as JSON (empty when the group reads no data source).
    rows: Vec<u8>,
}

/// Append `s` as a JSON string (written in place: no String per field).
fn push_json_str(out: &mut Vec<u8>, s: &str) {
    serde_json::to_writer(&mut *out, s).expect("a string serializes into a Vec");
}

impl ProgramClient {
    pub fn new(host: Host, client: u64) -> ProgramClient {
        ProgramClient {
            host,
            client,
            rows: Vec::new(),
        }
    }

    /// Take this operation's rows of the sources the program reads, as `{"SOURCE":{"COLUMN":"value"}}`.
    pub fn prepare(&mut self, draw: &mut Draw<'_>) -> Result<(), Exhausted> {
        let uses = &self.host.proc.prep().uses;
        if uses.is_empty() {
            return Ok(());
        }
        draw.take(uses)?;
        self.rows.clear();
        self.rows.push(b'{');
        for (k, &f) in uses.iter().enumerate() {
            let source = &draw.feeders.list[f];
            if k > 0 {
                self.rows.push(b',');
            }
            push_json_str(&mut self.rows, &source.name);
            self.rows.extend_from_slice(b":{");
            for (c, column) in source.table.columns.iter().enumerate() {
                if c > 0 {
                    self.rows.push(b',');
                }
                push_json_str(&mut self.rows, column);
                self.rows.push(b':');
                push_json_str(&mut self.rows, &String::from_utf8_lossy(draw.field(f, c)));
            }
            self.rows.push(b'}');
        }
        self.rows.push(b'}');
        Ok(())
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
            &mut proc.rows.borrow_mut(),
            proc.batch.get(),
            self.client,
            iteration,
            &proc.prep().operation_json,
            (!self.rows.is_empty()).then_some(self.rows.as_slice()),
        );
        proc.wake.notify_one();
        match slot.wait().await {
            Reply::Cut { hung } => OpReport::of(if hung { Outcome::Hung } else { Outcome::Abandoned }),
            Reply::Ok { steps, bytes } => OpReport {
                bytes: Traffic {
                    sent: 0,
                    received: bytes,
                    payload: bytes,
                    ..Traffic::default()
                },
                steps,
                ..OpReport::of(Outcome::Ok)
            },
            Reply::Fail { class, message, steps } => {
                // One of knee's own classes (a flow's HTTP client says `status`, `connect_refused` …) counts as
                // that class; any other is the program's own word, kept verbatim in the grouping key.
                let known =
                    ErrorClass::from_name(&class).filter(|c| !matches!(c, ErrorClass::Worker | ErrorClass::WorkerExit));
                let d = d.clear();
                if known.is_none() {
                    d.put(format_args!("{class}")).fix().head_line(message.as_bytes(), 240);
                } else {
                    let line = message
                        .lines()
                        .map(str::trim)
                        .find(|l| !l.is_empty())
                        .unwrap_or_default();
                    d.put(format_args!("{}", &line[..line.floor_char_boundary(240)]));
                }
                OpReport {
                    steps,
                    ..OpReport::of(Outcome::Fail(known.unwrap_or(ErrorClass::Worker)))
                }
            }
            Reply::Lost { class, message } => {
                d.clear().put(format_args!("{message}"));
                OpReport::of(Outcome::Fail(class))
            }
        }
    }
}
