//! Process supervision: one program's process on one engine thread (`Proc`): its start and
//! handshake, the pump that writes requests and hands replies to their clients, the watchdog that
//! ends operations past their timeout, the group's end or the run's stop, and the restart of a
//! process that dies (its clients' in-flight operations fail with its last words).

use std::cell::{Cell, RefCell};
use std::process::Stdio;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::sync::{watch, Notify};

use super::client::{Reply, Slot};
use super::protocol::{self, quote, Answer, Said, MAX_LINE, QUOTED};
use super::ProgramPrep;
use crate::class::ErrorClass;
use crate::clients::group::{command, kill_group, GroupGuard};
use crate::clients::Prepared;

/// Bytes of a process's stderr kept for messages.
const TAIL: usize = 2048;
/// How long a process gets to exit after `stop` at the end of a run.
pub(super) const GRACE: Duration = Duration::from_secs(2);

/// A running process's pipes and handle.
pub(super) struct Io {
    child: Child,
    /// None once `stop` is written: the program reads the end of its input after it (docs/worker-protocol.md).
    stdin: Option<ChildStdin>,
    stdout: ChildStdout,
    /// Kills the process group when the Io goes (a restart, the end of the run).
    _guard: GroupGuard,
}

/// One program process (restarted when it dies) and the clients it hosts, on one engine thread.
pub(crate) struct Proc {
    prep: Arc<Prepared>,
    /// `groups[i]` of the spec, for messages.
    key: String,
    group: String,
    number: usize,
    /// Global client numbers hosted here, ascending; `slots` in the same order.
    clients: Vec<u64>,
    pub(super) slots: Vec<Slot>,
    /// Request lines not yet written.
    pub(super) out: RefCell<Vec<u8>>,
    /// Batch mode: the queued operations' rows (`{…},` each), when the group reads data sources.
    pub(super) rows: RefCell<Vec<u8>>,
    pub(super) wake: Notify,
    /// The tail of the current process's stderr, and the end of that stderr.
    tail: Rc<RefCell<Vec<u8>>>,
    tail_done: Rc<Notify>,
    pub(super) closing: Cell<bool>,
    pub(super) pid: Cell<i32>,
    /// The program said `"batch": true` in its start's answer: requests go as `client,id,` pairs, many in
    /// one `run` line (the writer frames them).
    pub(super) batch: Cell<bool>,
    /// The run is over: the writer sends `stop` after what is queued.
    pub(super) stop: Cell<bool>,
    /// The watchdog task runs (started by the first operation, which has the group's end and stop).
    pub(super) watched: Cell<bool>,
    /// The watchdog waits with nothing in flight: the next operation wakes it.
    pub(super) idle: Cell<bool>,
    pub(super) rouse: Notify,
    /// The group's end or the run's stop came: operations that still begin are abandoned unsent.
    pub(super) over: Cell<bool>,
}

/// Keep the last `TAIL` bytes of a process's stderr; `done` is notified at its end.
async fn keep_tail(mut err: tokio::process::ChildStderr, tail: Rc<RefCell<Vec<u8>>>, done: Rc<Notify>) {
    let mut buf = vec![0u8; 4096];
    loop {
        match err.read(&mut buf).await {
            Ok(0) | Err(_) => {
                done.notify_one();
                return;
            }
            Ok(n) => {
                let mut t = tail.borrow_mut();
                t.extend_from_slice(&buf[..n]);
                if t.len() > TAIL {
                    let cut = t.len() - TAIL;
                    t.drain(..cut);
                }
            }
        }
    }
}

/// The last non-empty line of a byte tail, trimmed and clipped.
fn last_line(tail: &[u8]) -> String {
    let line = tail
        .split(|b| *b == b'\n')
        .map(<[u8]>::trim_ascii)
        .rfind(|l| !l.is_empty())
        .unwrap_or_default();
    String::from_utf8_lossy(&line[line.len().saturating_sub(QUOTED)..]).into_owned()
}

/// The process still runs (not gone, not a zombie waiting for its reaper).
pub(super) fn running(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(s) => !s
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

impl Proc {
    pub(super) fn new(prep: Arc<Prepared>, key: String, group: String, number: usize, clients: Vec<u64>) -> Proc {
        let slots = clients.iter().map(|_| Slot::default()).collect();
        Proc {
            prep,
            key,
            group,
            number,
            clients,
            slots,
            out: RefCell::new(Vec::new()),
            rows: RefCell::new(Vec::new()),
            wake: Notify::new(),
            tail: Rc::new(RefCell::new(Vec::new())),
            tail_done: Rc::new(Notify::new()),
            closing: Cell::new(false),
            pid: Cell::new(0),
            batch: Cell::new(false),
            stop: Cell::new(false),
            watched: Cell::new(false),
            idle: Cell::new(false),
            rouse: Notify::new(),
            over: Cell::new(false),
        }
    }

    /// The group's program and its start.
    pub(super) fn prep(&self) -> &ProgramPrep {
        match &*self.prep {
            Prepared::Program(p) => p,
            _ => unreachable!("a program host always has a program prep"),
        }
    }

    /// End operations that run past their timeout (hung) or past the group's end or the run's stop
    /// (abandoned): one task per process instead of a timer and a stop watch per operation. Every
    /// operation of the group has the same timeout and begins at the time it is sent, so one that
    /// begins later never times out earlier: sleeping until the earliest deadline in flight is enough.
    pub(super) async fn watchdog(self: Rc<Proc>, mut stop: watch::Receiver<bool>, end_at: Option<Instant>) {
        loop {
            let now = Instant::now();
            if end_at.is_some_and(|e| now >= e) {
                break;
            }
            let mut earliest: Option<Instant> = None;
            for slot in &self.slots {
                match slot.pending.get() {
                    Some((_, d)) if d <= now => slot.deliver(Reply::Cut { hung: true }),
                    Some((_, d)) => earliest = Some(earliest.map_or(d, |e| e.min(d))),
                    None => {}
                }
            }
            // Nothing in flight: the next operation to begin wakes the watchdog (its deadline may come
            // before the group's end).
            self.idle.set(earliest.is_none());
            let sleep = async {
                match earliest.into_iter().chain(end_at).min() {
                    Some(at) => tokio::time::sleep_until(at.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = sleep => {}
                () = self.rouse.notified(), if earliest.is_none() => {}
                _ = stop.wait_for(|s| *s) => break,
            }
        }
        self.over.set(true);
        self.end_in_flight(|| Reply::Cut { hung: false });
    }

    /// Start the program and do the start handshake; the error is one sentence for the user.
    pub(super) async fn spawn(&self) -> Result<Io, String> {
        let w = self.prep();
        let mut child = command(
            w.program(),
            &w.argv[1..],
            w.env.iter().map(|(k, v)| (k, v)),
            Stdio::piped(),
            w.cwd.as_deref(),
        )
        .spawn()
        .map_err(|e| format!("{}: cannot start the worker program {:?} ({e})", self.key, w.program()))?;
        let pid = child.id().map_or(0, |id| id as i32);
        let guard = GroupGuard(pid);
        self.pid.set(pid);
        self.tail.borrow_mut().clear();
        let (Some(mut stdin), Some(mut stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(format!("{}: the worker program's pipes could not be opened", self.key));
        };
        tokio::task::spawn_local(keep_tail(stderr, self.tail.clone(), self.tail_done.clone()));
        let start = protocol::start_message(&self.group, self.number, &self.clients, &w.vars_json);
        let said = async {
            if stdin.write_all(start.as_bytes()).await.is_err() {
                return Err(None);
            }
            protocol::first_line(&mut stdout).await
        };
        let answer = tokio::time::timeout(w.start_timeout, said).await;
        let why = |what: String| {
            let said = last_line(&self.tail.borrow());
            let said = if said.is_empty() {
                String::new()
            } else {
                format!("; it said: {said}")
            };
            format!("{}: the worker program {:?} {what}{said}", self.key, w.program())
        };
        let (line, rest) = match answer {
            Err(_) => {
                return Err(why(format!(
                    "did not answer start within {} s (it must reply {{\"ready\": true}} on stdout)",
                    w.start_timeout.as_secs_f64()
                )))
            }
            Ok(Err(None)) => {
                // Give stderr a moment to arrive before quoting it.
                tokio::time::sleep(Duration::from_millis(50)).await;
                let status = child.try_wait().ok().flatten();
                let ended = status.map_or("closed its stdout".to_string(), |s| format!("exited ({s})"));
                return Err(why(format!("{ended} before answering start")));
            }
            Ok(Err(Some(buf))) => return Err(why(format!("wrote a line over {MAX_LINE} bytes: {}", quote(&buf)))),
            Ok(Ok(got)) => got,
        };
        match protocol::start_answer(&line) {
            Answer::Ready { batch } => self.batch.set(batch),
            Answer::Refused(said) => {
                return Err(format!("{}: the worker program refused to start: {said}", self.key));
            }
            Answer::Other => {
                return Err(why(format!(
                    "answered start with {} instead of {{\"ready\": true}}",
                    quote(&line)
                )))
            }
        }
        if !rest.is_empty() {
            return Err(why(format!("wrote {} before any request", quote(&rest))));
        }
        Ok(Io {
            child,
            stdin: Some(stdin),
            stdout,
            _guard: guard,
        })
    }

    /// Write request lines as they come, read replies and hand them to their clients, until the process
    /// goes away; returns why (the class and message its clients' in-flight operations fail with).
    async fn pump(&self, io: &mut Io) -> (ErrorClass, String) {
        let Io { stdin, stdout, .. } = io;
        let writer = async {
            let mut buf = Vec::new();
            let mut rows = Vec::new();
            let mut frame = Vec::new();
            let operation = &self.prep().operation_json;
            loop {
                std::mem::swap(&mut buf, &mut *self.out.borrow_mut());
                std::mem::swap(&mut rows, &mut *self.rows.borrow_mut());
                let Some(pipe) = stdin.as_mut() else {
                    return std::future::pending().await; // stopped: nothing more is written
                };
                if buf.is_empty() {
                    if self.stop.replace(false) {
                        if pipe.write_all(protocol::STOP).await.is_err() {
                            return;
                        }
                        *stdin = None; // closed: a program reading to the end of its input ends too
                        continue;
                    }
                    self.wake.notified().await;
                    continue;
                }
                let data = if self.batch.get() {
                    protocol::frame_batch(&mut frame, operation, &buf, &rows);
                    &frame
                } else {
                    &buf
                };
                if pipe.write_all(data).await.is_err() {
                    return;
                }
                buf.clear();
                rows.clear();
            }
        };
        let reader = async {
            let mut buf: Vec<u8> = Vec::with_capacity(8192);
            let mut start = 0usize;
            loop {
                while let Some(i) = buf[start..].iter().position(|b| *b == b'\n') {
                    let end = start + i;
                    if let Err(bad) = self.dispatch(buf[start..end].trim_ascii()) {
                        return (ErrorClass::Protocol, bad);
                    }
                    start = end + 1;
                }
                buf.drain(..start);
                start = 0;
                if buf.len() > MAX_LINE {
                    return (
                        ErrorClass::Protocol,
                        format!("the worker wrote a line over {MAX_LINE} bytes"),
                    );
                }
                if buf.capacity() - buf.len() < 4096 {
                    buf.reserve(8192);
                }
                match stdout.read_buf(&mut buf).await {
                    Ok(0) | Err(_) => return (ErrorClass::WorkerExit, String::new()),
                    Ok(_) => {}
                }
            }
        };
        tokio::select! {
            () = writer => (ErrorClass::WorkerExit, String::new()),
            r = reader => r,
        }
    }

    /// Hand one reply to its client; an error names a line that is not a reply.
    fn dispatch(&self, line: &[u8]) -> Result<(), String> {
        match protocol::read_reply(line)? {
            Said::Blank => Ok(()),
            Said::Ok { client, id } => self.succeeded(client, id, line),
            Said::Done(done) => done
                .chunks_exact(2)
                .try_for_each(|pair| self.succeeded(pair[0], pair[1], line)),
            Said::Reply { client, id, reply } => {
                if let Some(slot) = self.expecting(client, id, line)? {
                    slot.deliver(reply.into_reply());
                }
                // else a late reply of an operation that hung (or a duplicate): discarded
                Ok(())
            }
        }
    }

    /// The slot of `client` if it waits for operation `id` (else the reply is late, and discarded); an error
    /// if the process does not host that client.
    fn expecting(&self, client: u64, id: u64, line: &[u8]) -> Result<Option<&Slot>, String> {
        let Ok(i) = self.clients.binary_search(&client) else {
            return Err(format!(
                "the worker replied for client {client}, which it does not host: {}",
                quote(line)
            ));
        };
        let slot = &self.slots[i];
        Ok((slot.pending.get().is_some_and(|(p, _)| p == id)).then_some(slot))
    }

    /// Operation `id` of `client` succeeded, with no steps and no bytes.
    fn succeeded(&self, client: u64, id: u64, line: &[u8]) -> Result<(), String> {
        if let Some(slot) = self.expecting(client, id, line)? {
            slot.deliver(Reply::Ok {
                steps: Vec::new(),
                bytes: 0,
            });
        }
        Ok(())
    }

    /// Fail every client waiting for a reply (its process went away) and drop requests not yet written.
    fn fail_pending(&self, class: ErrorClass, message: &str) {
        let message: Rc<str> = Rc::from(message);
        self.end_in_flight(|| Reply::Lost {
            class,
            message: message.clone(),
        });
        self.out.borrow_mut().clear();
        self.rows.borrow_mut().clear();
    }

    /// Hand `reply()` to every client whose operation is in flight.
    fn end_in_flight(&self, reply: impl Fn() -> Reply) {
        for slot in self.slots.iter().filter(|s| s.pending.get().is_some()) {
            slot.deliver(reply());
        }
    }

    /// Why the process went away, in words: its exit status and the last line of its stderr.
    async fn obituary(&self, io: &mut Io, class: ErrorClass, detail: String) -> String {
        if class == ErrorClass::Protocol {
            kill_group(self.pid.get());
        }
        let status = tokio::time::timeout(Duration::from_millis(500), io.child.wait()).await;
        kill_group(self.pid.get());
        // Its last words: what it wrote to stderr before going (they may still be in the pipe).
        let _ = tokio::time::timeout(Duration::from_millis(200), self.tail_done.notified()).await;
        let ended = match status {
            Ok(Ok(s)) => format!("worker process exited ({s})"),
            _ => "worker process closed its stdout".to_string(),
        };
        let said = last_line(&self.tail.borrow());
        match (detail.is_empty(), said.is_empty()) {
            (false, _) => detail,
            (true, true) => ended,
            (true, false) => format!("{ended}: {said}"),
        }
    }

    /// Run the process until the end of the run, starting it again each time it dies.
    pub(super) async fn supervise(self: Rc<Proc>, mut io: Io) {
        let mut backoff = Duration::from_millis(50);
        loop {
            let (class, detail) = self.pump(&mut io).await;
            if self.closing.get() {
                // It ends after stop, or is killed by `close`: reap it, so its CPU counts as knee's children's.
                let _ = tokio::time::timeout(GRACE, io.child.wait()).await;
                return;
            }
            let why = self.obituary(&mut io, class, detail).await;
            self.fail_pending(class, &why);
            drop(io);
            loop {
                if self.closing.get() {
                    return;
                }
                match self.spawn().await {
                    Ok(next) => {
                        io = next;
                        break;
                    }
                    Err(e) => {
                        // Ops waiting meanwhile time out as hung; say why in the next obituary.
                        self.tail.borrow_mut().extend_from_slice(format!("\n{e}\n").as_bytes());
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_secs(2));
                    }
                }
            }
            backoff = Duration::from_millis(50);
            self.wake.notify_one();
        }
    }
}
