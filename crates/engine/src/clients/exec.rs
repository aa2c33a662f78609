//! Commands: spawned without a shell in their own process group (`spawn`: at a cost that does not
//! grow with the clients alive), checked by exit code, output regexes and a produced file. On timeout or stop the whole
//! group is killed and the leader reaped before the client moves on; after a normal exit any
//! process the command left behind in its group is killed too.
//!
//! stdout and stderr are always read: a failure's reason is the last line of stderr (of stdout
//! when stderr is empty), because many CLIs say why only there. Only their last `TAIL` bytes are
//! kept, unless a regex check needs the whole stream.

use std::os::unix::process::ExitStatusExt;
use std::sync::Arc;

use regex::bytes::Regex;
use tokio::io::AsyncReadExt;

use super::group::{kill_group, GroupGuard};
use super::spawn::{spawn, BaseEnv, Cmd};
use super::template::{uses_of, Template};
use super::Prepared;
use crate::cancel::Cancel;
use crate::class::ErrorClass;
use crate::data::{Draw, Exhausted, Feeders};
use crate::error::SpecError;
use crate::outcome::{Detail, OpReport, Outcome, Traffic};
use crate::spec::{line_regex, ExecSpec};

/// Bytes of each output stream kept for the failure's reason.
const TAIL: usize = 512;
/// A stream's buffer grows to this before its head is dropped (when only the tail is kept).
const READ_CAP: usize = 8 * 1024;
/// Longest line of output quoted in a failure's message.
const QUOTED: usize = 200;

/// Where an operation's payload size comes from.
enum Payload {
    None,
    /// The bytes it wrote to stdout.
    Stdout,
    /// The size of its `expect_file`.
    ExpectFile,
    /// The size of this file (`bytes_from`) after it ended.
    File(Template),
}

pub(crate) struct ExecPrep {
    program: Template,
    args: Vec<Template>,
    env: Vec<(String, Template)>,
    cwd: Option<String>,
    pub(super) stdout: Option<Regex>,
    pub(super) stderr: Option<Regex>,
    file: Option<(Template, u64)>,
    payload: Payload,
    /// knee's environment at the start (the command's `env` goes over it).
    base_env: BaseEnv,
    /// Data sources its templates read.
    pub(super) uses: Vec<usize>,
}

impl ExecPrep {
    /// The spec is validated, so the regexes compile; a template naming a data source or column that is not
    /// there is an error. A `${…}` that is none of knee's stays as it is (a shell's own, in an argument).
    pub fn new(spec: &ExecSpec, feeders: &Feeders, key: &str) -> Result<ExecPrep, SpecError> {
        let re = |p: &Option<String>| {
            p.as_deref()
                .map(|p| line_regex(p).expect("validated by Spec::validate"))
        };
        let t = |s: &str, k: String| Template::compile(s, feeders, &k, false).map_err(SpecError);
        let prep = ExecPrep {
            program: t(&spec.argv[0], format!("{key}.argv[0]"))?,
            args: (spec.argv[1..].iter().enumerate())
                .map(|(i, a)| t(a, format!("{key}.argv[{}]", i + 1)))
                .collect::<Result<_, _>>()?,
            env: (spec.env.iter())
                .map(|(k, v)| Ok((k.clone(), t(v, format!("{key}.env.{k}"))?)))
                .collect::<Result<_, SpecError>>()?,
            cwd: spec.cwd.clone(),
            stdout: re(&spec.expect_stdout),
            stderr: re(&spec.expect_stderr),
            file: match &spec.expect_file {
                Some(f) => Some((t(&f.path, format!("{key}.expect_file.path"))?, f.min_size)),
                None => None,
            },
            payload: match spec.bytes_from.as_deref() {
                Some("stdout") => Payload::Stdout,
                Some(path) => Payload::File(t(path, format!("{key}.bytes_from"))?),
                None if spec.expect_file.is_some() => Payload::ExpectFile,
                None => Payload::None,
            },
            base_env: BaseEnv::capture(),
            uses: Vec::new(),
        };
        let files = [
            prep.file.as_ref().map(|f| &f.0),
            if let Payload::File(p) = &prep.payload {
                Some(p)
            } else {
                None
            },
        ];
        let all = std::iter::once(&prep.program)
            .chain(&prep.args)
            .chain(prep.env.iter().map(|(_, v)| v))
            .chain(files.into_iter().flatten());
        Ok(ExecPrep {
            uses: uses_of(all.map(|t| t.uses.as_slice())),
            ..prep
        })
    }
}

/// An operation's command line, its files' paths: rendered before it starts.
#[derive(Default)]
struct Rendered {
    program: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
    file: Option<String>,
    payload_file: Option<String>,
}

pub(crate) struct ExecClient {
    prep: Arc<Prepared>,
    out: Vec<u8>,
    err: Vec<u8>,
    now: Rendered,
}

/// Read a stream to its end into `buf` (cleared first): all of it when `whole`, else only its last
/// `TAIL`-odd bytes. Returns the bytes read.
async fn drain<R: tokio::io::AsyncRead + Unpin>(r: &mut Option<R>, buf: &mut Vec<u8>, whole: bool) -> u64 {
    buf.clear();
    let Some(r) = r else { return 0 };
    let mut total = 0u64;
    loop {
        // Grow from a small buffer: most commands print little or nothing, and 5 000 clients holding
        // two 4 KiB buffers each would be 40 MB of memory for nothing.
        if buf.capacity() - buf.len() < 128 {
            if whole || buf.capacity() < READ_CAP {
                buf.reserve(buf.capacity().max(256));
            } else {
                buf.drain(..buf.len() - TAIL);
            }
        }
        match r.read_buf(buf).await {
            Ok(0) | Err(_) => return total,
            Ok(n) => total += n as u64,
        }
    }
}

impl ExecClient {
    pub fn new(prep: Arc<Prepared>) -> ExecClient {
        ExecClient {
            prep,
            out: Vec::new(),
            err: Vec::new(),
            now: Rendered::default(),
        }
    }

    /// Take this operation's rows and write its command line.
    pub fn prepare(&mut self, draw: &mut Draw<'_>) -> Result<(), Exhausted> {
        let Prepared::Exec(p) = &*self.prep else {
            unreachable!("an exec client always has an exec prep")
        };
        draw.take(&p.uses)?;
        self.now = Rendered {
            program: p.program.render_string(draw),
            args: p.args.iter().map(|a| a.render_string(draw)).collect(),
            env: p.env.iter().map(|(k, v)| (k.clone(), v.render_string(draw))).collect(),
            file: p.file.as_ref().map(|(t, _)| t.render_string(draw)),
            payload_file: match &p.payload {
                Payload::File(t) => Some(t.render_string(draw)),
                _ => None,
            },
        };
        Ok(())
    }

    pub async fn run(&mut self, cancel: &mut Cancel<'_>, d: &mut Detail) -> OpReport {
        let Prepared::Exec(p) = &*self.prep else {
            unreachable!("an exec client always has an exec prep")
        };
        let program = self.now.program.clone();
        let cmd = Cmd {
            program: &program,
            args: self.now.args.clone(),
            env: self.now.env.iter().map(|(k, v)| (k.as_str(), v.clone())).collect(),
            cwd: p.cwd.as_deref(),
        };
        let mut child = match spawn(&cmd, &p.base_env) {
            Ok(child) => child,
            Err(e) => {
                d.clear().put(format_args!("cannot run {program}: ")).io(&e);
                return OpReport::of(Outcome::Fail(ErrorClass::Spawn));
            }
        };
        let pgid = child.id();
        let guard = GroupGuard(pgid);
        let mut stdout = child.stdout.take();
        let mut stderr = child.stderr.take();
        let (whole_out, whole_err) = (p.stdout.is_some(), p.stderr.is_some());
        let waited = {
            let exited = async {
                let status = child.wait().await;
                // What the command left running ends with it: a `sleep 300 &` holds its pipes open, and the
                // operation waited for them to its timeout (hung) where the command had succeeded.
                kill_group(pgid);
                status
            };
            let work = async {
                tokio::join!(
                    exited,
                    drain(&mut stdout, &mut self.out, whole_out),
                    drain(&mut stderr, &mut self.err, whole_err)
                )
            };
            tokio::select! {
                biased;
                done = work => Ok(done),
                o = cancel.fired() => Err(o),
            }
        };
        // Kill the group: on timeout/stop the command itself, after an exit whatever it left behind.
        kill_group(pgid);
        std::mem::forget(guard);
        let (status, out_bytes) = match waited {
            Err(outcome) => {
                let _ = child.wait().await;
                return OpReport::of(outcome);
            }
            Ok((Err(e), _, _)) => {
                d.clear().put(format_args!("waiting for {program}: ")).io(&e);
                return OpReport::of(Outcome::Fail(ErrorClass::Spawn));
            }
            Ok((Ok(status), out_bytes, _)) => (status, out_bytes),
        };
        // The reason a failing command gives: its last line on stderr, else on stdout.
        let said = if self.err.iter().any(|b| !b.is_ascii_whitespace()) {
            &self.err
        } else {
            &self.out
        };
        let mut file_size = 0u64;
        let class = if let Some(sig) = status.signal() {
            d.clear()
                .put(format_args!("{program} was killed by signal {sig}"))
                .fix();
            d.tail_line(said, QUOTED);
            Some(ErrorClass::Signal)
        } else if status.code() != Some(0) {
            let code = status.code().unwrap_or(-1);
            d.clear().put(format_args!("{program} exited with code {code}")).fix();
            d.tail_line(said, QUOTED);
            Some(ErrorClass::ExitCode)
        } else if let Some((name, _, text, class)) = [
            ("stdout", &p.stdout, &self.out, ErrorClass::Stdout),
            ("stderr", &p.stderr, &self.err, ErrorClass::Stderr),
        ]
        .into_iter()
        .find(|(_, re, text, _)| re.as_ref().is_some_and(|re| !re.is_match(text)))
        {
            d.clear()
                .put(format_args!("{name} of {program} does not match expect_{name}"))
                .fix()
                .quoted(text, QUOTED);
            Some(class)
        } else if let Some((_, min)) = &p.file {
            let path = self.now.file.clone().unwrap_or_default();
            match std::fs::metadata(&path) {
                Ok(m) if m.len() >= *min => {
                    file_size = m.len();
                    None
                }
                Ok(m) => {
                    d.clear()
                        .put(format_args!("{path} has {} bytes, expected at least {min}", m.len()));
                    Some(ErrorClass::File)
                }
                Err(e) => {
                    d.clear().put(format_args!("{path}: ")).io(&e);
                    Some(ErrorClass::File)
                }
            }
        } else {
            None
        };
        let payload = match &p.payload {
            Payload::None => 0,
            Payload::Stdout => out_bytes,
            Payload::ExpectFile => file_size,
            Payload::File(_) => {
                std::fs::metadata(self.now.payload_file.as_deref().unwrap_or_default()).map_or(0, |m| m.len())
            }
        };
        OpReport {
            bytes: Traffic {
                sent: 0,
                received: out_bytes,
                payload,
                ..Traffic::default()
            },
            ..OpReport::of(class.map_or(Outcome::Ok, Outcome::Fail))
        }
    }
}
