//! Process groups: every program knee starts (exec clients, worker programs) leads its own group,
//! so killing the group ends whatever it started too.

use std::ffi::OsStr;
use std::process::Stdio;

use tokio::process::Command;

/// A command that starts `program` as the leader of its own process group, with `args`, `env`
/// added to knee's environment, `stdin` as given, stdout and stderr piped (knee reads both), in
/// `cwd` when one is set.
pub(crate) fn command<A, E, K, V>(program: &str, args: A, env: E, stdin: Stdio, cwd: Option<&str>) -> Command
where
    A: IntoIterator,
    A::Item: AsRef<OsStr>,
    E: IntoIterator<Item = (K, V)>,
    K: AsRef<OsStr>,
    V: AsRef<OsStr>,
{
    let mut cmd = Command::new(program);
    cmd.args(args)
        .envs(env)
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    cmd
}

/// Kill a whole process group with SIGKILL (ignoring "no such process").
pub(crate) fn kill_group(pgid: i32) {
    if pgid > 0 {
        // SAFETY: kill(2) with a negative pid signals a process group; it has no memory effects.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
}

/// Kills the process group when dropped (an operation cancelled before it reaped its leader, a worker
/// program whose host went away).
pub(crate) struct GroupGuard(pub i32);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        kill_group(self.0);
    }
}
