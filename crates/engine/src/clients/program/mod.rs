//! Program clients (the scenario's `worker` client): long-lived programs in any language speaking
//! knee's line protocol (docs/worker-protocol.md) over stdin/stdout, one JSON object a line.
//!
//! Each engine thread starts its share of a group's processes (`WorkerSpec::processes`, one per
//! thread by default), each hosting some of the thread's clients of the group, and does the start
//! handshake before the common start, so a slow start (a JVM) is never measured. Per operation the
//! client writes `{"op":"run","client":C,"id":I,"operation":"…"}` into its process's outgoing buffer
//! (written in batches by the process's writer) and waits for the reply that echoes its client and
//! id. A program that answers start with `"batch": true` gets the operations due at once as
//! `client, id` pairs in one `run` line; plain successes may come back as one `done` line. knee
//! times the operation itself; its timeout makes it hung and a late reply is discarded (one
//! watchdog task per process applies the timeouts, the group's end and the run's stop, rather than
//! a timer and a stop watch per operation). A process that exits (or writes a line that is not a
//! reply) fails its clients' in-flight operations (`worker_exit`, with the last line of its stderr;
//! `protocol`, quoting the line) and is started again. Every process leads its own process group,
//! killed at the end.
//!
//! `protocol`: the line protocol; `process`: a process's start, pump, watchdog and restarts;
//! `client`: a client's mailbox and operation; here: the group's program (`ProgramPrep`) and one
//! engine thread's processes (`Hosts`).

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use super::group::kill_group;
use super::Prepared;
use crate::data::Feeders;
use crate::error::{EngineError, SpecError};
use crate::spec::WorkerSpec;

mod client;
mod process;
mod protocol;

pub(crate) use client::{Host, ProgramClient};
use process::{running, Proc, GRACE};

/// A `worker` group's program and its start, prepared once.
pub(crate) struct ProgramPrep {
    argv: Vec<String>,
    env: Vec<(String, String)>,
    cwd: Option<String>,
    processes: u64,
    /// The `vars` object of the start message, serialized once.
    vars_json: String,
    /// The operation's name as a JSON string, serialized once.
    operation_json: String,
    start_timeout: Duration,
    /// The data sources whose rows every operation takes and sends (`data` on the run line).
    pub(super) uses: Vec<usize>,
}

impl ProgramPrep {
    pub fn new(spec: &WorkerSpec, feeders: &Feeders, key: &str) -> Result<ProgramPrep, SpecError> {
        let mut uses = Vec::new();
        for (i, name) in spec.data.iter().enumerate() {
            let f = feeders.index(name).ok_or_else(|| {
                let have: Vec<&str> = feeders.list.iter().map(|f| f.name.as_str()).collect();
                SpecError(format!(
                    "{key}.data[{i}] {name:?} names no data source (the shard's: {}); fix the name",
                    if have.is_empty() {
                        "none".to_string()
                    } else {
                        have.join(", ")
                    }
                ))
            })?;
            uses.push(f);
        }
        Ok(ProgramPrep {
            argv: spec.argv.clone(),
            env: spec.env.clone(),
            cwd: spec.cwd.clone(),
            processes: spec.processes,
            vars_json: serde_json::to_string(&spec.vars).expect("a map of strings serializes"),
            operation_json: serde_json::to_string(&spec.operation).expect("a string serializes"),
            start_timeout: Duration::from_millis(spec.start_timeout_ms),
            uses,
        })
    }

    fn program(&self) -> &str {
        &self.argv[0]
    }
}

/// What `Hosts::start` needs of a group.
pub(crate) struct HostedGroup {
    pub prep: Arc<Prepared>,
    pub name: String,
    pub client_offset: u64,
}

/// One engine thread's part of the run, what `Hosts::start` lays out: every group, this thread's clients of
/// each (their numbers in the group; a client's slot is its place in the list), the thread's index of `threads`.
#[derive(Clone, Copy)]
pub(crate) struct ThreadPart<'a> {
    pub groups: &'a [HostedGroup],
    pub mine: &'a [Vec<u64>],
    pub thread: usize,
    pub threads: usize,
}

/// One engine thread's program processes, per group.
#[derive(Default)]
pub(crate) struct Hosts {
    groups: Vec<Vec<(Rc<Proc>, Vec<usize>)>>,
    /// Each process's first `Io`, until the run starts (then `supervise` owns it).
    tasks: RefCell<Vec<tokio::task::JoinHandle<()>>>,
    killed: Cell<bool>,
}

impl Hosts {
    /// Start this thread's program processes (for each `worker` group with clients here) and do their
    /// handshakes; the error is the first start that failed.
    pub async fn start(part: ThreadPart<'_>) -> Result<Hosts, EngineError> {
        let ThreadPart {
            groups,
            mine,
            thread,
            threads,
        } = part;
        let mut hosts = Hosts::default();
        let mut pending = Vec::new();
        for (g, (hg, clients)) in groups.iter().zip(mine).enumerate() {
            let (prep, name) = (&hg.prep, &hg.name);
            let Prepared::Program(w) = &**prep else {
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

    /// Client `slot` of group `g`'s place, if the group is a `worker` group.
    pub fn host(&self, g: usize, slot: usize) -> Option<Host> {
        let procs = self.groups.get(g)?;
        procs.iter().find_map(|(proc, slots)| {
            slots.iter().position(|s| *s == slot).map(|index| Host {
                proc: proc.clone(),
                index,
            })
        })
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
