//! Commands: spawned without a shell in their own process group (so std can use posix_spawn),
//! checked by exit code, output regexes and a produced file. On timeout or stop the whole
//! group is killed and the leader reaped before the client moves on; after a normal exit any
//! process the command left behind in its group is killed too.

use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::sync::Arc;

use regex::bytes::Regex;
use tokio::io::AsyncReadExt;

use super::template::Template;
use super::{OpReport, Outcome, Prepared};
use crate::cancel::Cancel;
use crate::class::ErrorClass;
use crate::spec::ExecSpec;

pub(crate) struct ExecPrep {
    program: Template,
    args: Vec<Template>,
    env: Vec<(String, Template)>,
    cwd: Option<String>,
    pub(super) stdout: Option<Regex>,
    pub(super) stderr: Option<Regex>,
    file: Option<(Template, u64)>,
}

impl ExecPrep {
    /// The spec is validated, so the regexes compile.
    pub fn new(spec: &ExecSpec) -> ExecPrep {
        let re = |p: &Option<String>| {
            p.as_deref()
                .map(|p| Regex::new(p).expect("validated by Spec::validate"))
        };
        ExecPrep {
            program: Template::new(&spec.argv[0]),
            args: spec.argv[1..].iter().map(|a| Template::new(a)).collect(),
            env: spec.env.iter().map(|(k, v)| (k.clone(), Template::new(v))).collect(),
            cwd: spec.cwd.clone(),
            stdout: re(&spec.expect_stdout),
            stderr: re(&spec.expect_stderr),
            file: spec.expect_file.as_ref().map(|f| (Template::new(&f.path), f.min_size)),
        }
    }
}

/// Kill a whole process group (ignoring "no such process").
fn kill_group(pgid: i32) {
    if pgid > 0 {
        // SAFETY: kill(2) with a negative pid signals a process group; it has no memory effects.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
}

/// Kills the process group if the operation is dropped before it reaped its leader.
struct GroupGuard(i32);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        kill_group(self.0);
    }
}

pub(crate) struct ExecClient {
    prep: Arc<Prepared>,
    client: u64,
    out: Vec<u8>,
    err: Vec<u8>,
}

async fn read_all<R: tokio::io::AsyncRead + Unpin>(r: &mut Option<R>, buf: &mut Vec<u8>) {
    buf.clear();
    if let Some(r) = r {
        let _ = r.read_to_end(buf).await;
    }
}

impl ExecClient {
    pub fn new(prep: Arc<Prepared>, client: u64) -> ExecClient {
        ExecClient {
            prep,
            client,
            out: Vec::new(),
            err: Vec::new(),
        }
    }

    pub async fn run(&mut self, iteration: u64, cancel: &mut Cancel<'_>) -> OpReport {
        let Prepared::Exec(p) = &*self.prep else {
            unreachable!("an exec client always has an exec prep")
        };
        let (c, i) = (self.client, iteration);
        let program = p.program.render(c, i);
        let mut cmd = tokio::process::Command::new(&program);
        cmd.args(p.args.iter().map(|a| a.render(c, i)))
            .envs(p.env.iter().map(|(k, v)| (k, v.render(c, i))))
            .stdin(Stdio::null())
            .stdout(if p.stdout.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stderr(if p.stderr.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .process_group(0);
        if let Some(dir) = &p.cwd {
            cmd.current_dir(dir);
        }
        let mut child = match cmd.spawn() {
            Ok(child) => child,
            Err(e) => return OpReport::fail(ErrorClass::Spawn, format!("{program}: {e}")),
        };
        let pgid = child.id().map_or(0, |id| id as i32);
        let guard = GroupGuard(pgid);
        let mut stdout = child.stdout.take();
        let mut stderr = child.stderr.take();
        let waited = {
            let work = async {
                let (status, (), ()) = tokio::join!(
                    child.wait(),
                    read_all(&mut stdout, &mut self.out),
                    read_all(&mut stderr, &mut self.err)
                );
                status
            };
            tokio::select! {
                biased;
                status = work => Ok(status),
                o = cancel.fired() => Err(o),
            }
        };
        // Kill the group: on timeout/stop the command itself, after an exit whatever it left behind.
        kill_group(pgid);
        std::mem::forget(guard);
        let status = match waited {
            Err(outcome) => {
                let _ = child.wait().await;
                return OpReport::of(outcome);
            }
            Ok(Err(e)) => return OpReport::fail(ErrorClass::Spawn, format!("waiting for {program}: {e}")),
            Ok(Ok(status)) => status,
        };
        let outcome = if let Some(sig) = status.signal() {
            Outcome::Fail(ErrorClass::Signal, format!("{program} was killed by signal {sig}"))
        } else if status.code() != Some(0) {
            Outcome::Fail(
                ErrorClass::ExitCode,
                format!("{program} exited with code {}", status.code().unwrap_or(-1)),
            )
        } else if p.stdout.as_ref().is_some_and(|re| !re.is_match(&self.out)) {
            Outcome::Fail(
                ErrorClass::Stdout,
                format!("stdout of {program} does not match expect_stdout"),
            )
        } else if p.stderr.as_ref().is_some_and(|re| !re.is_match(&self.err)) {
            Outcome::Fail(
                ErrorClass::Stderr,
                format!("stderr of {program} does not match expect_stderr"),
            )
        } else if let Some((path, min)) = &p.file {
            let path = path.render(c, i);
            match std::fs::metadata(&path) {
                Ok(m) if m.len() >= *min => Outcome::Ok,
                Ok(m) => Outcome::Fail(
                    ErrorClass::File,
                    format!("{path} has {} bytes, expected at least {min}", m.len()),
                ),
                Err(e) => Outcome::Fail(ErrorClass::File, format!("{path}: {e}")),
            }
        } else {
            Outcome::Ok
        };
        OpReport::of(outcome)
    }
}
