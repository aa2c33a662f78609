//! Starting exec clients' commands at a cost that does not grow with the descriptors knee holds.
//!
//! posix_spawn (std's and tokio's way) copies knee's whole descriptor table into the child and closes
//! it again at exec. With 5 000 exec clients alive knee holds 15 000 descriptors (a pidfd and two
//! pipes each), and every spawn paid for all of them: 0.48 ms per spawn with 10 descriptors open,
//! 2.2 ms with 15 000 (bench/forkexec.c-style loop, this machine). Here the child shares knee's table
//! (`CLONE_FILES`) and its first act is `close_range(first, ~0, CLOSE_RANGE_UNSHARE)`: the kernel
//! gives it a table of only the descriptors below `first`, a few low "slots" that the parent filled
//! with the child's stdout and stderr pipe ends just before the clone. The cost is then flat (0.45 ms
//! at 10 and at 15 000 descriptors).
//!
//! Like glibc's posix_spawn, the child runs on its own stack in knee's memory (`CLONE_VM |
//! CLONE_VFORK`: the calling thread waits until the child has exec'd or failed), with every signal
//! blocked, and calls only async-signal-safe functions; a failure's stage and errno come back
//! through the shared memory. `CLONE_PIDFD` gives the child's pidfd, which the runtime polls for its
//! exit. Kernels without `CLOSE_RANGE_UNSHARE` (before 5.9) or `CLONE_PIDFD` (before 5.2) are
//! detected at the first spawn and get tokio's `Command` from then on.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::net::unix::pipe;

use super::group::command;

/// The child's stack: it runs a handful of system calls, on memory of the calling thread's.
const STACK: usize = 64 * 1024;

/// Set once a spawn found the kernel without what the fast path needs.
static FALLBACK: AtomicBool = AtomicBool::new(false);
/// Slots no thread holds right now (a thread takes one for its life; they are reused by later runs).
static IDLE_SLOTS: Mutex<Vec<Slots>> = Mutex::new(Vec::new());
/// Children whose handle was dropped before they were reaped: reaped (without blocking) at later spawns.
static ORPHANS: Mutex<Vec<libc::pid_t>> = Mutex::new(Vec::new());

thread_local! {
    static MINE: std::cell::RefCell<Option<Slots>> = const { std::cell::RefCell::new(None) };
}

/// One thread's low descriptors for a child's stdout and stderr (holding /dev/null between spawns) and
/// the child's stack.
struct Slots {
    out: OwnedFd,
    err: OwnedFd,
    null: OwnedFd,
    stack: Vec<u128>,
}

impl Slots {
    fn open() -> io::Result<Slots> {
        let null = std::fs::OpenOptions::new().write(true).open("/dev/null")?;
        // At least 3 (0, 1 and 2 are the child's to fill), and as low as free: the child copies all below.
        let low = |fd: RawFd| -> io::Result<OwnedFd> {
            // SAFETY: F_DUPFD_CLOEXEC returns a new descriptor that we own, or -1.
            let n = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: `n` is a fresh descriptor of ours.
            Ok(unsafe { OwnedFd::from_raw_fd(n) })
        };
        let null = OwnedFd::from(null);
        Ok(Slots {
            out: low(null.as_raw_fd())?,
            err: low(null.as_raw_fd())?,
            null,
            stack: vec![0u128; STACK / 16],
        })
    }
}

/// Take slots for this thread now, while knee holds few descriptors (so they are low), before any spawn;
/// they go back to the idle ones (for later runs) when the returned guard drops.
pub(crate) fn prepare_thread() -> ThreadSlots {
    if !FALLBACK.load(Ordering::Relaxed) {
        MINE.with(|m| {
            let mut m = m.borrow_mut();
            if m.is_none() {
                let idle = IDLE_SLOTS.lock().unwrap_or_else(|e| e.into_inner()).pop();
                *m = idle.or_else(|| Slots::open().ok());
            }
        });
    }
    ThreadSlots(std::marker::PhantomData)
}

/// This thread holds slots until it drops (not `Send`: the slots are the thread's).
pub(crate) struct ThreadSlots(std::marker::PhantomData<*const ()>);

impl Drop for ThreadSlots {
    fn drop(&mut self) {
        if let Some(s) = MINE.with(|m| m.borrow_mut().take()) {
            IDLE_SLOTS.lock().unwrap_or_else(|e| e.into_inner()).push(s);
        }
    }
}

/// What to start: argv[0] as given, the program's path, arguments, environment and working directory.
pub(crate) struct Cmd<'a> {
    pub program: &'a str,
    pub args: Vec<String>,
    /// Set in the child's environment over knee's own.
    pub env: Vec<(&'a str, String)>,
    pub cwd: Option<&'a str>,
}

/// knee's environment at the group's start, as `KEY=VALUE` strings (each spawn adds its own over it).
pub(crate) struct BaseEnv(Vec<(usize, CString)>);

impl BaseEnv {
    pub fn capture() -> BaseEnv {
        BaseEnv(
            std::env::vars_os()
                .filter_map(|(k, v)| {
                    let mut kv = k.into_vec();
                    let key = kv.len();
                    kv.push(b'=');
                    kv.extend_from_slice(v.as_bytes());
                    CString::new(kv).ok().map(|c| (key, c))
                })
                .collect(),
        )
    }

    fn get(&self, key: &str) -> Option<&[u8]> {
        self.0
            .iter()
            .find(|(n, kv)| &kv.as_bytes()[..*n] == key.as_bytes())
            .map(|(n, kv)| &kv.as_bytes()[n + 1..])
    }
}

/// A started command: its pid (the leader of its own process group), its output pipes, its exit.
pub(crate) struct Child {
    pid: libc::pid_t,
    wait: Wait,
    pub stdout: Option<pipe::Receiver>,
    pub stderr: Option<pipe::Receiver>,
}

enum Wait {
    /// Started here: its pidfd, readable once it has exited; None once reaped.
    Pidfd(Option<AsyncFd<OwnedFd>>),
    /// Started by tokio's `Command` (the fallback): tokio reaps it.
    Tokio(tokio::process::Child),
}

impl Child {
    pub fn id(&self) -> libc::pid_t {
        self.pid
    }

    /// Wait for it to exit and reap it.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        match &mut self.wait {
            Wait::Tokio(c) => c.wait().await,
            Wait::Pidfd(fd) => loop {
                let Some(afd) = fd.as_ref() else {
                    return Err(io::Error::other("the child was already reaped"));
                };
                let reaped = {
                    let mut ready = afd.readable().await?;
                    let reaped = reap(self.pid, libc::WNOHANG)?;
                    if reaped.is_none() {
                        ready.clear_ready();
                    }
                    reaped
                };
                if let Some(status) = reaped {
                    *fd = None;
                    return Ok(status);
                }
            },
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if let Wait::Pidfd(Some(_)) = &self.wait {
            // Not reaped (its operation was dropped): it was killed with its group; reap it later.
            if !matches!(reap(self.pid, libc::WNOHANG), Ok(Some(_)) | Err(_)) {
                ORPHANS.lock().unwrap_or_else(|e| e.into_inner()).push(self.pid);
            }
        }
    }
}

/// waitpid: `Some(status)` once the child has exited (and is reaped), None while it runs.
fn reap(pid: libc::pid_t, flags: libc::c_int) -> io::Result<Option<ExitStatus>> {
    let mut status = 0;
    loop {
        // SAFETY: waitpid writes the status into our integer.
        let r = unsafe { libc::waitpid(pid, &mut status, flags) };
        if r == pid {
            return Ok(Some(ExitStatus::from_raw(status)));
        }
        if r == 0 {
            return Ok(None);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

fn reap_orphans() {
    let mut orphans = ORPHANS.lock().unwrap_or_else(|e| e.into_inner());
    orphans.retain(|&pid| matches!(reap(pid, libc::WNOHANG), Ok(None)));
}

/// Start `cmd` as the leader of a new process group, stdin /dev/null, stdout and stderr piped to knee.
pub(crate) fn spawn(cmd: &Cmd<'_>, base: &BaseEnv) -> io::Result<Child> {
    if !FALLBACK.load(Ordering::Relaxed) {
        if let Some(r) = MINE.with(|m| m.borrow_mut().as_mut().map(|s| fast(cmd, base, s))) {
            match r {
                Err(Unsupported) => FALLBACK.store(true, Ordering::Relaxed),
                Ok(r) => return r,
            }
        }
    }
    fallback(cmd)
}

/// tokio's `Command` (posix_spawn): for kernels without what `fast` needs.
pub(crate) fn fallback(cmd: &Cmd<'_>) -> io::Result<Child> {
    let mut c = command(
        cmd.program,
        &cmd.args,
        cmd.env.iter().map(|(k, v)| (k, v)),
        Stdio::null(),
        cmd.cwd,
    );
    let mut child = c.spawn()?;
    let pid = child.id().map_or(0, |id| id as libc::pid_t);
    let pipe = |fd: Option<io::Result<OwnedFd>>| fd.transpose()?.map(pipe::Receiver::from_owned_fd).transpose();
    let stdout = pipe(child.stdout.take().map(tokio::process::ChildStdout::into_owned_fd))?;
    let stderr = pipe(child.stderr.take().map(tokio::process::ChildStderr::into_owned_fd))?;
    Ok(Child {
        pid,
        wait: Wait::Tokio(child),
        stdout,
        stderr,
    })
}

/// The kernel lacks `CLOSE_RANGE_UNSHARE` or `CLONE_PIDFD`.
struct Unsupported;

/// The program's path: as given when it has a slash, else the first executable file of that name on
/// PATH (the command's own PATH when it sets one), as execvp finds it.
fn resolve(cmd: &Cmd<'_>, base: &BaseEnv) -> io::Result<CString> {
    let not_found = || io::Error::from_raw_os_error(libc::ENOENT);
    if cmd.program.is_empty() {
        return Err(not_found());
    }
    if cmd.program.contains('/') {
        return CString::new(cmd.program).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL));
    }
    let own = cmd
        .env
        .iter()
        .rev()
        .find(|(k, _)| *k == "PATH")
        .map(|(_, v)| v.as_bytes());
    let path = own.or_else(|| base.get("PATH")).unwrap_or(b"/bin:/usr/bin");
    for dir in path.split(|b| *b == b':') {
        let dir = if dir.is_empty() { b"." as &[u8] } else { dir };
        let mut full = OsString::from(OsStr::from_bytes(dir)).into_vec();
        full.push(b'/');
        full.extend_from_slice(cmd.program.as_bytes());
        let Ok(c) = CString::new(full) else { continue };
        // SAFETY: c is NUL-terminated; access and stat only read it.
        let executable = unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0;
        if executable && std::fs::metadata(OsStr::from_bytes(c.as_bytes())).is_ok_and(|m| m.is_file()) {
            return Ok(c);
        }
    }
    Err(not_found())
}

/// What the child needs, in memory it shares with the parent; the child writes `stage` and `errno` on
/// failure.
#[repr(C)]
struct ChildArgs {
    path: *const libc::c_char,
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    cwd: *const libc::c_char,
    out: RawFd,
    err: RawFd,
    keep_below: libc::c_uint,
    stage: libc::c_int,
    errno: libc::c_int,
}

const STAGE_UNSHARE: libc::c_int = 1;
const STAGE_SETUP: libc::c_int = 2;
const STAGE_EXEC: libc::c_int = 3;

/// The child, between clone and exec. Only async-signal-safe calls; it never returns.
extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the parent's `ChildArgs`, alive and untouched while the parent waits (CLONE_VFORK).
    let a = unsafe { &mut *arg.cast::<ChildArgs>() };
    fn fail(a: &mut ChildArgs, stage: libc::c_int) -> ! {
        a.stage = stage;
        // SAFETY: errno of the (suspended) calling thread; _exit ends the child without running anything.
        unsafe {
            a.errno = *libc::__errno_location();
            libc::_exit(127)
        }
    }
    // SAFETY: system calls on the child's own descriptor table (after the first) and its own process.
    unsafe {
        // Until this succeeds the table is knee's: touch nothing else.
        let unshare = libc::CLOSE_RANGE_UNSHARE as libc::c_long;
        if libc::syscall(libc::SYS_close_range, a.keep_below, libc::c_uint::MAX, unshare) != 0 {
            fail(a, STAGE_UNSHARE);
        }
        if libc::dup2(a.out, 1) < 0 || libc::dup2(a.err, 2) < 0 {
            fail(a, STAGE_SETUP);
        }
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY);
        if null < 0 || (null != 0 && libc::dup2(null, 0) < 0) {
            fail(a, STAGE_SETUP);
        }
        if libc::setpgid(0, 0) != 0 {
            fail(a, STAGE_SETUP);
        }
        if !a.cwd.is_null() && libc::chdir(a.cwd) != 0 {
            fail(a, STAGE_SETUP);
        }
        // Handlers are knee's code: default them before unblocking (exec would, but a signal could come
        // first). SIGPIPE goes back to its default, as std does (Python and Rust ignore it).
        for sig in 1..=libc::SIGRTMAX() {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 {
                continue;
            }
            let handled = old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN;
            if handled || sig == libc::SIGPIPE {
                let mut dfl: libc::sigaction = std::mem::zeroed();
                dfl.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(sig, &dfl, std::ptr::null_mut());
            }
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        libc::syscall(libc::SYS_close_range, 3 as libc::c_uint, libc::c_uint::MAX, 0);
        libc::execve(a.path, a.argv, a.envp);
        fail(a, STAGE_EXEC)
    }
}

fn cstring(s: &str) -> io::Result<CString> {
    CString::new(s).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in an argument"))
}

fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn pipe_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two new descriptors into our array.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: both are fresh descriptors of ours.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// The read end of a pipe, non-blocking, for the runtime.
fn reader(fd: OwnedFd) -> io::Result<pipe::Receiver> {
    // SAFETY: fcntl on our own descriptor.
    unsafe {
        let flags = check(libc::fcntl(fd.as_raw_fd(), libc::F_GETFL))?;
        check(libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK))?;
    }
    pipe::Receiver::from_owned_fd_unchecked(fd)
}

/// Spawn with `CLONE_FILES` and `close_range(CLOSE_RANGE_UNSHARE)`; `Err(Unsupported)` when the kernel
/// cannot.
fn fast(cmd: &Cmd<'_>, base: &BaseEnv, slots: &mut Slots) -> Result<io::Result<Child>, Unsupported> {
    reap_orphans();
    let built = (|| {
        let path = resolve(cmd, base)?;
        let argv: Vec<CString> = std::iter::once(cmd.program)
            .chain(cmd.args.iter().map(String::as_str))
            .map(cstring)
            .collect::<io::Result<_>>()?;
        let own: Vec<CString> = cmd
            .env
            .iter()
            .map(|(k, v)| cstring(&format!("{k}={v}")))
            .collect::<io::Result<_>>()?;
        let cwd = cmd.cwd.map(cstring).transpose()?;
        Ok::<_, io::Error>((path, argv, own, cwd))
    })();
    let (path, argv, own, cwd) = match built {
        Ok(b) => b,
        Err(e) => return Ok(Err(e)),
    };
    let overridden = |key: &[u8]| cmd.env.iter().any(|(k, _)| k.as_bytes() == key);
    let mut envp: Vec<*const libc::c_char> = base
        .0
        .iter()
        .filter(|(n, kv)| !overridden(&kv.as_bytes()[..*n]))
        .map(|(_, kv)| kv.as_ptr())
        .chain(own.iter().map(|c| c.as_ptr()))
        .collect();
    envp.push(std::ptr::null());
    let mut argp: Vec<*const libc::c_char> = argv.iter().map(|c| c.as_ptr()).collect();
    argp.push(std::ptr::null());

    let pipes = pipe_pair().and_then(|o| Ok((o, pipe_pair()?)));
    let ((out_r, out_w), (err_r, err_w)) = match pipes {
        Ok(p) => p,
        Err(e) => return Ok(Err(e)),
    };
    let (slot_out, slot_err, null) = (slots.out.as_raw_fd(), slots.err.as_raw_fd(), slots.null.as_raw_fd());
    // SAFETY: dup3 onto our own slots (replacing the /dev/null they held).
    let placed = unsafe {
        check(libc::dup3(out_w.as_raw_fd(), slot_out, libc::O_CLOEXEC))
            .and_then(|_| check(libc::dup3(err_w.as_raw_fd(), slot_err, libc::O_CLOEXEC)))
    };
    drop((out_w, err_w));
    let mut args = ChildArgs {
        path: path.as_ptr(),
        argv: argp.as_ptr(),
        envp: envp.as_ptr(),
        cwd: cwd.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
        out: slot_out,
        err: slot_err,
        keep_below: (slot_out.max(slot_err) + 1) as libc::c_uint,
        stage: 0,
        errno: 0,
    };
    let mut pidfd: libc::c_int = -1;
    let pid = if let Err(e) = placed {
        Err(e)
    } else {
        // SAFETY: every signal is blocked across the clone (the child must not run knee's handlers); the
        // child runs `child_main` on the slots' stack, which nothing else uses while this thread waits for
        // it (CLONE_VFORK); `args` and everything it points to outlive the call.
        unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
            let top = slots.stack.as_mut_ptr().add(slots.stack.len()).cast::<libc::c_void>();
            let flags = libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_FILES | libc::CLONE_PIDFD | libc::SIGCHLD;
            let pid = libc::clone(
                child_main,
                top,
                flags,
                std::ptr::addr_of_mut!(args).cast(),
                std::ptr::addr_of_mut!(pidfd),
            );
            let e = io::Error::last_os_error();
            libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
            if pid < 0 {
                Err(e)
            } else {
                Ok(pid)
            }
        }
    };
    // The pipes' write ends now live only in the child: knee sees end-of-file when it is done.
    // SAFETY: dup3 onto our own slots.
    unsafe {
        libc::dup3(null, slot_out, libc::O_CLOEXEC);
        libc::dup3(null, slot_err, libc::O_CLOEXEC);
    }
    let pid = match pid {
        Ok(pid) => pid,
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => return Err(Unsupported),
        Err(e) => return Ok(Err(e)),
    };
    // SAFETY: CLONE_PIDFD wrote a descriptor of ours (the child's pidfd) into `pidfd`.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    // SAFETY: the child wrote it (or not) before this thread resumed.
    let (stage, errno) = unsafe {
        (
            std::ptr::read_volatile(&args.stage),
            std::ptr::read_volatile(&args.errno),
        )
    };
    if stage != 0 {
        // The child has already exited (_exit): reap it now.
        let _ = reap(pid, 0);
        if stage == STAGE_UNSHARE {
            return Err(Unsupported);
        }
        return Ok(Err(io::Error::from_raw_os_error(errno)));
    }
    let child = (|| {
        // SAFETY: the AsyncFd owns the pidfd: it stays open, and the same, until the AsyncFd drops.
        let pidfd = unsafe { AsyncFd::register_with_interest(pidfd, Interest::READABLE) }?;
        Ok(Child {
            pid,
            wait: Wait::Pidfd(Some(pidfd)),
            stdout: Some(reader(out_r)?),
            stderr: Some(reader(err_r)?),
        })
    })();
    Ok(child)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(cmd: &Cmd<'_>, fast_path: bool) -> (ExitStatus, Vec<u8>, Vec<u8>) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let _slots = prepare_thread();
            let base = BaseEnv::capture();
            let mut child = if fast_path { spawn(cmd, &base) } else { fallback(cmd) }.unwrap();
            // This machine's kernel (5.9 or later) takes the fast path; it did not fall back.
            assert!(!fast_path || matches!(child.wait, Wait::Pidfd(_)));
            use tokio::io::AsyncReadExt;
            let (mut out, mut err) = (Vec::new(), Vec::new());
            let (mut o, mut e) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
            let (status, _, _) = tokio::join!(child.wait(), o.read_to_end(&mut out), e.read_to_end(&mut err));
            (status.unwrap(), out, err)
        })
    }

    /// Both paths give the command its arguments, environment, directory, its own process group, and
    /// stdin at /dev/null; knee's other descriptors (200 held here) stay out of the child. The fast path
    /// passes 0, 1 and 2 only: also none that knee inherited without close-on-exec (a `flock` lock, a
    /// jobserver's pipe), which posix_spawn passes on.
    #[test]
    fn both_paths_start_the_command_as_asked() {
        // Numbered from 300 up, apart from any the child opens itself (`ls`'s directory).
        let null = std::fs::File::open("/dev/null").unwrap();
        // SAFETY: F_DUPFD_CLOEXEC makes new descriptors of ours, owned here.
        let held: Vec<OwnedFd> = (0..200)
            .map(|_| unsafe { OwnedFd::from_raw_fd(libc::fcntl(null.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 300)) })
            .collect();
        let held_fds: Vec<String> = held.iter().map(|f| f.as_raw_fd().to_string()).collect();
        let script = "echo $0 $1 $KNEE_T; pwd; [ $(cut -d' ' -f5 /proc/$$/stat) = $$ ] && echo leader; \
                      wc -c; ls /proc/self/fd; echo bye >&2; exit 3";
        for fast_path in [true, false] {
            let cmd = Cmd {
                program: "sh",
                args: vec!["-c".into(), script.into(), "a".into(), "b c".into()],
                env: vec![("KNEE_T", "t1".into())],
                cwd: Some("/tmp"),
            };
            let (status, out, err) = run(&cmd, fast_path);
            assert_eq!(status.code(), Some(3));
            let out = String::from_utf8(out).unwrap();
            let lines: Vec<&str> = out.lines().map(str::trim).collect();
            // `wc -c` read nothing from stdin; then the descriptors `ls` holds.
            assert_eq!(
                lines[..4],
                ["a b c t1", "/tmp", "leader", "0"],
                "fast path: {fast_path}"
            );
            assert!(
                lines[4..].iter().all(|fd| !held_fds.iter().any(|h| h == fd)),
                "{lines:?}"
            );
            if fast_path {
                // 0, 1, 2 and the directory `ls` reads (3).
                assert_eq!(lines[4..], ["0", "1", "2", "3"]);
            }
            assert_eq!(err, b"bye\n");
        }
        drop(held);
    }

    #[test]
    fn a_missing_program_is_an_os_error() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _in = rt.enter();
        let _slots = prepare_thread();
        for program in ["no-such-program-knee", "/no/such/program"] {
            let cmd = Cmd {
                program,
                args: Vec::new(),
                env: Vec::new(),
                cwd: None,
            };
            let e = spawn(&cmd, &BaseEnv::capture()).err().unwrap();
            assert_eq!(e.raw_os_error(), Some(libc::ENOENT), "{program}: {e}");
        }
    }
}
