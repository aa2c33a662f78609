//! Process groups: every program knee starts (exec clients, worker programs) leads its own group,
//! so killing the group ends whatever it started too.

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
