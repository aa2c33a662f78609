//! Worker clients: long-lived programs in any language speaking knee's line protocol
//! (docs/worker-protocol.md) over stdin/stdout, one JSON object a line.
//!
//! Each engine thread starts its share of a group's worker processes (`WorkerSpec::processes`, one
//! per thread by default), each hosting some of the thread's clients of the group, and does the
//! start handshake before the common start, so a slow start (a JVM) is never measured. Per
//! operation the client writes `{"op":"run","client":C,"id":I,"operation":"…"}` into its process's
//! outgoing buffer (written in batches by the process's writer) and waits for the reply that echoes
//! its client and id. A program that answers start with `"batch": true` gets the operations due at
//! once as `client, id` pairs in one `run` line; plain successes may come back as one `done` line.
//! knee times the operation itself; its timeout makes it hung and a late reply is discarded (one
//! watchdog task per process applies the timeouts, the group's end and the run's stop, rather than
//! a timer and a stop watch per operation). A process that exits (or writes a line that is not a
//! reply) fails its clients' in-flight operations (`worker_exit`, with the last line of its stderr;
//! `protocol`, quoting the line) and is started again. Every process leads its own process group,
//! killed at the end.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::fmt::Write as _;
use std::future::Future;
use std::process::Stdio;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use serde::Deserialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::{watch, Notify};

use super::group::{kill_group, GroupGuard};
use super::Prepared;
use crate::cancel::Cancel;
use crate::class::ErrorClass;
use crate::error::EngineError;
use crate::outcome::{Detail, OpReport, Outcome, Traffic};
use crate::spec::WorkerSpec;

/// The protocol's version, sent in the start message.
pub const PROTOCOL: u32 = 1;
/// Bytes of a worker's stderr kept for messages.
const TAIL: usize = 2048;
/// A line longer than this is not a reply.
const MAX_LINE: usize = 1 << 20;
/// Longest part of a line quoted in a message.
const QUOTED: usize = 200;
/// How long a process gets to exit after `stop` at the end of a run.
const GRACE: Duration = Duration::from_secs(2);

pub(crate) struct WorkerPrep {
    argv: Vec<String>,
    env: Vec<(String, String)>,
    cwd: Option<String>,
    processes: u64,
    /// The `vars` object of the start message, serialized once.
    vars_json: String,
    /// The operation's name as a JSON string, serialized once.
    operation_json: String,
    start_timeout: Duration,
}

impl WorkerPrep {
    pub fn new(spec: &WorkerSpec) -> WorkerPrep {
        WorkerPrep {
            argv: spec.argv.clone(),
            env: spec.env.clone(),
            cwd: spec.cwd.clone(),
            processes: spec.processes,
            vars_json: serde_json::to_string(&spec.vars).expect("a map of strings serializes"),
            operation_json: serde_json::to_string(&spec.operation).expect("a string serializes"),
            start_timeout: Duration::from_millis(spec.start_timeout_ms),
        }
    }

    fn program(&self) -> &str {
        &self.argv[0]
    }
}

/// What came back for one operation.
enum Reply {
    /// The watchdog ended it: its timeout (`hung`), or the group's end or the run's stop (abandoned).
    Cut {
        hung: bool,
    },
    Ok {
        steps: Vec<(String, Duration)>,
        bytes: u64,
    },
    /// The worker said the operation failed: its error class and message (and the steps it timed).
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
struct Slot {
    /// The operation waiting for its reply, if any: its id (iteration) and when it times out.
    pending: Cell<Option<(u64, Instant)>>,
    reply: RefCell<Option<Reply>>,
    waiter: Cell<Option<Waker>>,
}

impl Slot {
    fn deliver(&self, reply: Reply) {
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

/// A running process's pipes and handle.
struct Io {
    child: Child,
    stdin: ChildStdin,
    stdout: ChildStdout,
    /// Kills the process group when the Io goes (a restart, the end of the run).
    _guard: GroupGuard,
}

/// One worker process (restarted when it dies) and the clients it hosts, on one engine thread.
pub(crate) struct Proc {
    prep: Arc<Prepared>,
    /// `groups[i]` of the spec, for messages.
    key: String,
    group: String,
    number: usize,
    /// Global client numbers hosted here, ascending; `slots` in the same order.
    clients: Vec<u64>,
    slots: Vec<Slot>,
    /// Request lines not yet written.
    out: RefCell<Vec<u8>>,
    wake: Notify,
    /// The tail of the current process's stderr, and the end of that stderr.
    tail: Rc<RefCell<Vec<u8>>>,
    tail_done: Rc<Notify>,
    closing: Cell<bool>,
    pid: Cell<i32>,
    /// The program said `"batch": true` in its start's answer: requests go as `client,id,` pairs, many in
    /// one `run` line (the writer frames them).
    batch: Cell<bool>,
    /// The run is over: the writer sends `stop` after what is queued.
    stop: Cell<bool>,
    /// The watchdog task runs (started by the first operation, which has the group's end and stop).
    watched: Cell<bool>,
    /// The watchdog waits with nothing in flight: the next operation wakes it.
    idle: Cell<bool>,
    rouse: Notify,
    /// The group's end or the run's stop came: operations that still begin are abandoned unsent.
    over: Cell<bool>,
}

fn worker(prep: &Prepared) -> &WorkerPrep {
    match prep {
        Prepared::Worker(w) => w,
        _ => unreachable!("a worker host always has a worker prep"),
    }
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

fn quote(line: &[u8]) -> String {
    let s = String::from_utf8_lossy(&line[..line.len().min(QUOTED)]).into_owned();
    if line.len() > QUOTED {
        format!("{s:?}…")
    } else {
        format!("{s:?}")
    }
}

/// A reply's `steps` object, in the order the worker wrote them (the reports keep that order).
#[derive(Default)]
struct Steps(Vec<(String, f64)>);

impl<'de> Deserialize<'de> for Steps {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Steps, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Steps;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object of step names and seconds")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Steps, A::Error> {
                let mut out = Vec::new();
                while let Some((name, seconds)) = map.next_entry::<String, f64>()? {
                    out.push((name, seconds));
                }
                Ok(Steps(out))
            }
        }
        d.deserialize_map(Visit)
    }
}

/// `{"client":C,"id":I,"ok":true}` to the letter, the commonest reply, read without the JSON parser (any
/// other spelling goes to it).
fn plain_ok(line: &[u8]) -> Option<(u64, u64)> {
    let (client, rest) = number(line.strip_prefix(br#"{"client":"#)?)?;
    let (id, rest) = number(rest.strip_prefix(br#","id":"#)?)?;
    (rest == br#","ok":true}"#).then_some((client, id))
}

/// The JSON unsigned integer `b` starts with, and what follows it.
fn number(b: &[u8]) -> Option<(u64, &[u8])> {
    let digits = b.iter().take_while(|c| c.is_ascii_digit()).count();
    if digits == 0 || (digits > 1 && b[0] == b'0') {
        return None;
    }
    let n = std::str::from_utf8(&b[..digits]).ok()?.parse().ok()?;
    Some((n, &b[digits..]))
}

/// One line from a worker: the start's answer or an operation's reply.
#[derive(Deserialize)]
struct Line<'a> {
    #[serde(default)]
    ready: Option<bool>,
    #[serde(default)]
    client: Option<u64>,
    #[serde(default)]
    id: Option<u64>,
    #[serde(default)]
    ok: Option<bool>,
    #[serde(default, borrow)]
    error: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    message: Option<Cow<'a, str>>,
    #[serde(default)]
    steps: Option<Steps>,
    #[serde(default)]
    bytes: Option<u64>,
    /// In the start's answer: the worker takes many operations in one `run` line.
    #[serde(default)]
    batch: Option<bool>,
    /// Operations that succeeded with nothing to add: `client, id` after `client, id`.
    #[serde(default)]
    done: Option<Vec<u64>>,
}

impl Proc {
    fn new(prep: Arc<Prepared>, key: String, group: String, number: usize, clients: Vec<u64>) -> Proc {
        let slots = clients.iter().map(|_| Slot::default()).collect();
        Proc {
            prep,
            key,
            group,
            number,
            clients,
            slots,
            out: RefCell::new(Vec::new()),
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

    /// End operations that run past their timeout (hung) or past the group's end or the run's stop
    /// (abandoned): one task per process instead of a timer and a stop watch per operation. Every
    /// operation of the group has the same timeout and begins at the time it is sent, so one that
    /// begins later never times out earlier: sleeping until the earliest deadline in flight is enough.
    async fn watchdog(self: Rc<Proc>, mut stop: watch::Receiver<bool>, end_at: Option<Instant>) {
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
    async fn spawn(&self) -> Result<Io, String> {
        let w = worker(&self.prep);
        let mut cmd = Command::new(w.program());
        cmd.args(&w.argv[1..])
            .envs(w.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        if let Some(dir) = &w.cwd {
            cmd.current_dir(dir);
        }
        let mut child = cmd
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
        let mut start = String::new();
        let _ = write!(
            start,
            r#"{{"op":"start","protocol":{PROTOCOL},"group":{},"process":{},"clients":{:?},"vars":{}}}"#,
            serde_json::to_string(&self.group).expect("a string serializes"),
            self.number,
            self.clients,
            w.vars_json
        );
        start.push('\n');
        let said = async {
            if stdin.write_all(start.as_bytes()).await.is_err() {
                return Err(None);
            }
            let mut buf = Vec::with_capacity(256);
            loop {
                if let Some(i) = buf.iter().position(|b| *b == b'\n') {
                    let line = buf[..i].trim_ascii().to_vec();
                    if line.is_empty() {
                        buf.drain(..=i);
                        continue;
                    }
                    buf.drain(..=i);
                    return Ok((line, buf));
                }
                let mut chunk = [0u8; 4096];
                match stdout.read(&mut chunk).await {
                    Ok(0) | Err(_) => return Err(None),
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
                if buf.len() > MAX_LINE {
                    return Err(Some(buf));
                }
            }
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
        match serde_json::from_slice::<Line<'_>>(&line) {
            Ok(Line {
                ready: Some(true),
                batch,
                ..
            }) => self.batch.set(batch == Some(true)),
            Ok(Line {
                ready: Some(false),
                error,
                message,
                ..
            }) => {
                let said = error.or(message).unwrap_or_default();
                return Err(format!("{}: the worker program refused to start: {said}", self.key));
            }
            _ => {
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
            stdin,
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
            let mut frame = Vec::new();
            let operation = &worker(&self.prep).operation_json;
            loop {
                std::mem::swap(&mut buf, &mut *self.out.borrow_mut());
                if buf.is_empty() {
                    if self.stop.replace(false) && stdin.write_all(b"{\"op\":\"stop\"}\n").await.is_err() {
                        return;
                    }
                    self.wake.notified().await;
                    continue;
                }
                let data = if self.batch.get() {
                    // `c,i,c,i,` → one run line for every operation due by now.
                    frame.clear();
                    frame.extend_from_slice(br#"{"op":"run","operation":"#);
                    frame.extend_from_slice(operation.as_bytes());
                    frame.extend_from_slice(br#","ops":["#);
                    frame.extend_from_slice(&buf[..buf.len() - 1]);
                    frame.extend_from_slice(b"]}\n");
                    &frame
                } else {
                    &buf
                };
                if stdin.write_all(data).await.is_err() {
                    return;
                }
                buf.clear();
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
        if line.is_empty() {
            return Ok(());
        }
        if let Some((client, id)) = plain_ok(line) {
            return self.succeeded(client, id, line);
        }
        let bad = || format!("the worker wrote a line that is not a reply: {}", quote(line));
        let l: Line<'_> = serde_json::from_slice(line).map_err(|_| bad())?;
        if let Some(done) = l.done {
            if done.len() % 2 != 0 {
                return Err(bad());
            }
            return done
                .chunks_exact(2)
                .try_for_each(|pair| self.succeeded(pair[0], pair[1], line));
        }
        let (Some(client), Some(id), Some(ok)) = (l.client, l.id, l.ok) else {
            return Err(bad());
        };
        let Some(slot) = self.expecting(client, id, line)? else {
            return Ok(()); // a late reply of an operation that hung (or a duplicate): discarded
        };
        let steps = l
            .steps
            .unwrap_or_default()
            .0
            .into_iter()
            .filter(|(_, s)| s.is_finite() && *s >= 0.0)
            .map(|(name, s)| (name, Duration::from_secs_f64(s)))
            .collect();
        let reply = if ok {
            Reply::Ok {
                steps,
                bytes: l.bytes.unwrap_or(0),
            }
        } else {
            Reply::Fail {
                class: l.error.map(Cow::into_owned).unwrap_or_else(|| "error".to_string()),
                message: l.message.map(Cow::into_owned).unwrap_or_default(),
                steps,
            }
        };
        slot.deliver(reply);
        Ok(())
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
    async fn supervise(self: Rc<Proc>, mut io: Io) {
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

/// What `Hosts::start` needs of a group.
pub(crate) struct HostedGroup {
    pub prep: Arc<Prepared>,
    pub name: String,
    pub client_offset: u64,
}

/// A client's place in a worker process.
#[derive(Clone)]
pub(crate) struct Host {
    proc: Rc<Proc>,
    index: usize,
}

/// One engine thread's worker processes, per group.
#[derive(Default)]
pub(crate) struct Hosts {
    groups: Vec<Vec<(Rc<Proc>, Vec<usize>)>>,
    /// Each process's first `Io`, until the run starts (then `supervise` owns it).
    tasks: RefCell<Vec<tokio::task::JoinHandle<()>>>,
    killed: Cell<bool>,
}

impl Hosts {
    /// Start this thread's worker processes (for each worker group with clients here) and do their
    /// handshakes; the error is the first start that failed.
    pub async fn start(
        groups: &[HostedGroup],
        mine: &[Vec<u64>],
        thread: usize,
        threads: usize,
    ) -> Result<Hosts, EngineError> {
        let mut hosts = Hosts::default();
        let mut pending = Vec::new();
        for (g, (hg, clients)) in groups.iter().zip(mine).enumerate() {
            let (prep, name) = (&hg.prep, &hg.name);
            let Prepared::Worker(w) = &**prep else {
                hosts.groups.push(Vec::new());
                continue;
            };
            if clients.is_empty() {
                hosts.groups.push(Vec::new());
                continue;
            }
            // The group's clients are on `over` threads (engine::hosting_threads); this thread's share
            // of the processes, at least one.
            let over = if w.processes == 0 {
                threads
            } else {
                (w.processes as usize).min(threads)
            };
            let wanted = if w.processes == 0 {
                threads
            } else {
                w.processes as usize
            };
            let here = ((wanted + over - 1 - thread.min(over - 1)) / over).clamp(1, clients.len());
            let mut procs = Vec::with_capacity(here);
            for p in 0..here {
                let slots: Vec<usize> = (p..clients.len()).step_by(here).collect();
                let ids = slots.iter().map(|&s| hg.client_offset + clients[s]).collect();
                let number = thread + p * threads;
                let proc = Rc::new(Proc::new(
                    prep.clone(),
                    format!("groups[{g}]"),
                    name.clone(),
                    number,
                    ids,
                ));
                pending.push(proc.clone());
                procs.push((proc, slots));
            }
            hosts.groups.push(procs);
        }
        // Start them together: a slow start (a JVM) is paid once, not once per process.
        let starts: Vec<_> = pending
            .iter()
            .map(|p| {
                let p = p.clone();
                tokio::task::spawn_local(async move { p.spawn().await.map(|io| (p, io)) })
            })
            .collect();
        let mut first_error = None;
        for s in starts {
            match s.await {
                Ok(Ok((proc, io))) => hosts
                    .tasks
                    .borrow_mut()
                    .push(tokio::task::spawn_local(proc.supervise(io))),
                Ok(Err(e)) => {
                    first_error.get_or_insert(e);
                }
                Err(e) => {
                    first_error.get_or_insert(format!("a worker start failed ({e})"));
                }
            }
        }
        if let Some(e) = first_error {
            hosts.close(true).await;
            return Err(EngineError::Worker(e));
        }
        Ok(hosts)
    }

    /// Client `slot` of group `g`'s place, if the group is a worker group.
    pub fn host(&self, g: usize, slot: usize) -> Option<Host> {
        let procs = self.groups.get(g)?;
        procs.iter().find_map(|(proc, slots)| {
            slots.iter().position(|s| *s == slot).map(|index| Host {
                proc: proc.clone(),
                index,
            })
        })
    }

    /// Every client slot's place in group `g` (in slot order), for the open-loop scheduler.
    pub fn of(&self, g: usize, clients: usize) -> Vec<Option<Host>> {
        (0..clients).map(|s| self.host(g, s)).collect()
    }

    /// End every process: after a normal end, `stop` and a grace period; after `stop()` (`kill`), at once.
    pub async fn close(&self, kill: bool) {
        if self.killed.replace(true) {
            return;
        }
        let procs: Vec<Rc<Proc>> = self.groups.iter().flatten().map(|(p, _)| p.clone()).collect();
        for p in &procs {
            p.closing.set(true);
            if !kill {
                p.stop.set(true);
                p.wake.notify_one();
            }
        }
        if !kill {
            let deadline = tokio::time::Instant::now() + GRACE;
            for p in &procs {
                // The program ends by itself after stop (stdout closed), or is killed below.
                while p.pid.get() > 0 && running(p.pid.get()) && tokio::time::Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        }
        for p in &procs {
            kill_group(p.pid.get());
        }
        // Each process's task reaps it once it is gone; one that does not finish by then is aborted.
        let tasks: Vec<_> = self.tasks.borrow_mut().drain(..).collect();
        let deadline = tokio::time::Instant::now() + Duration::from_millis(500);
        for t in tasks {
            let abort = t.abort_handle();
            if tokio::time::timeout_at(deadline, t).await.is_err() {
                abort.abort();
            }
        }
    }
}

/// The process still runs (not gone, not a zombie waiting for its reaper).
fn running(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(s) => !s
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

pub(crate) struct WorkerClient {
    host: Host,
    client: u64,
}

impl WorkerClient {
    pub fn new(host: Host, client: u64) -> WorkerClient {
        WorkerClient { host, client }
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
        {
            let mut out = proc.out.borrow_mut();
            let mut n = itoa::Buffer::new();
            if proc.batch.get() {
                out.extend_from_slice(n.format(self.client).as_bytes());
                out.push(b',');
                out.extend_from_slice(n.format(iteration).as_bytes());
                out.push(b',');
            } else {
                out.extend_from_slice(br#"{"op":"run","client":"#);
                out.extend_from_slice(n.format(self.client).as_bytes());
                out.extend_from_slice(br#","id":"#);
                out.extend_from_slice(n.format(iteration).as_bytes());
                out.extend_from_slice(br#","operation":"#);
                out.extend_from_slice(worker(&proc.prep).operation_json.as_bytes());
                out.extend_from_slice(b"}\n");
            }
        }
        proc.wake.notify_one();
        match slot.wait().await {
            Reply::Cut { hung } => OpReport::of(if hung { Outcome::Hung } else { Outcome::Abandoned }),
            Reply::Ok { steps, bytes } => OpReport {
                outcome: Outcome::Ok,
                connect: None,
                ttfb: None,
                bytes: Traffic {
                    sent: 0,
                    received: bytes,
                    payload: bytes,
                },
                steps,
                unsent: false,
            },
            Reply::Fail { class, message, steps } => {
                // The worker's own class is kept verbatim in the grouping key, its message normalised.
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

#[cfg(test)]
mod tests {
    use super::plain_ok;

    #[test]
    fn only_the_exact_plain_reply_skips_the_parser() {
        assert_eq!(plain_ok(br#"{"client":4,"id":17,"ok":true}"#), Some((4, 17)));
        assert_eq!(
            plain_ok(br#"{"client":0,"id":18446744073709551615,"ok":true}"#),
            Some((0, u64::MAX))
        );
        for other in [
            &br#"{"client": 4,"id":17,"ok":true}"#[..],             // spaces: the parser's
            br#"{"client":4,"id":17,"ok":false}"#,                  // a failure
            br#"{"client":4,"id":17,"ok":true,"bytes":9}"#,         // more keys
            br#"{"client":04,"id":17,"ok":true}"#,                  // not JSON
            br#"{"client":4,"id":18446744073709551616,"ok":true}"#, // over u64
            br#"{"client":,"id":17,"ok":true}"#,
        ] {
            assert_eq!(plain_ok(other), None, "{}", String::from_utf8_lossy(other));
        }
    }
}
