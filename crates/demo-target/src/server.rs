//! Start, run and stop a target: two listening sockets, a tokio runtime on its own threads,
//! the accept loops, and the recovery ticker.

use std::net::{SocketAddr, TcpListener as StdListener};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

use crate::config::{Config, RecoveryMode};
use crate::error::TargetError;
use crate::http::{self, ConnState};
use crate::state::Shared;
use crate::tcp;
use crate::timer::Timer;

/// A running target. Dropping it stops it.
pub struct Server {
    shared: Arc<Shared>,
    stop_tx: watch::Sender<bool>,
    done: Arc<(Mutex<bool>, Condvar)>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Server {
    /// Validate, bind both ports, start the runtime thread, and return at once.
    pub fn start(cfg: Config) -> Result<Server, TargetError> {
        cfg.validate()?;
        let ip = cfg.host_ip()?;
        let fd_limit = raise_fd_limit();
        let http_std = bind(SocketAddr::new(ip, cfg.port), cfg.backlog, "HTTP")?;
        let tcp_std = bind(SocketAddr::new(ip, cfg.tcp_port), cfg.backlog, "the TCP line protocol")?;
        let http_addr = http_std.local_addr().map_err(TargetError::Runtime)?;
        let tcp_addr = tcp_std.local_addr().map_err(TargetError::Runtime)?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(cfg.threads)
            .thread_name("knee-target")
            .enable_all()
            .build()
            .map_err(TargetError::Runtime)?;
        let (http_l, tcp_l) = {
            let _enter = rt.enter();
            (
                TcpListener::from_std(http_std).map_err(TargetError::Runtime)?,
                TcpListener::from_std(tcp_std).map_err(TargetError::Runtime)?,
            )
        };
        let timer = Timer::start().map_err(TargetError::Runtime)?;
        let shared = Arc::new(Shared::new(cfg, timer, http_addr, tcp_addr, fd_limit));
        let (stop_tx, stop_rx) = watch::channel(false);
        let done = Arc::new((Mutex::new(false), Condvar::new()));
        let (s2, d2) = (Arc::clone(&shared), Arc::clone(&done));
        let thread = std::thread::Builder::new()
            .name("knee-target-main".into())
            .spawn(move || {
                rt.block_on(run(Arc::clone(&s2), http_l, tcp_l, stop_rx));
                rt.shutdown_timeout(Duration::from_secs(1));
                s2.timer.shutdown();
                let (lock, cv) = &*d2;
                *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
                cv.notify_all();
            })
            .map_err(TargetError::Runtime)?;
        Ok(Server {
            shared,
            stop_tx,
            done,
            thread: Mutex::new(Some(thread)),
        })
    }

    pub fn http_addr(&self) -> SocketAddr {
        self.shared.http_addr
    }

    pub fn tcp_addr(&self) -> SocketAddr {
        self.shared.tcp_addr
    }

    pub fn config(&self) -> &Config {
        &self.shared.cfg
    }

    /// The `/admin/stats` document as JSON text.
    pub fn stats_json(&self) -> String {
        self.shared.stats().to_string()
    }

    /// The `/admin/config` document (the config and what its curve predicts) as JSON text.
    pub fn config_json(&self) -> String {
        self.shared.config_doc().to_string()
    }

    /// Back to normal with totals zeroed, as `POST /admin/reset`.
    pub fn reset(&self) {
        self.shared.reset();
    }

    /// Ask it to stop (returns at once; `wait` for the end). Open connections are dropped.
    pub fn stop(&self) {
        let _ = self.stop_tx.send(true);
    }

    /// Wait until it has stopped; None waits for ever. True when it has stopped.
    pub fn wait(&self, timeout: Option<Duration>) -> bool {
        let (lock, cv) = &*self.done;
        let mut done = lock.lock().unwrap_or_else(|e| e.into_inner());
        let deadline = timeout.map(|t| Instant::now() + t);
        while !*done {
            done = match deadline {
                None => cv.wait(done).unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return false;
                    }
                    cv.wait_timeout(done, d - now).unwrap_or_else(|e| e.into_inner()).0
                }
            };
        }
        drop(done);
        if let Some(t) = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = t.join();
        }
        true
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
        self.wait(Some(Duration::from_secs(3)));
    }
}

/// Bind a listening socket with the configured backlog.
fn bind(addr: SocketAddr, backlog: u32, what: &'static str) -> Result<StdListener, TargetError> {
    let err = |source| TargetError::Bind { what, addr, source };
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP)).map_err(err)?;
    sock.set_reuse_address(true).map_err(err)?;
    if addr.is_ipv6() {
        sock.set_only_v6(true).map_err(err)?;
    }
    sock.bind(&addr.into()).map_err(err)?;
    sock.listen(backlog.min(i32::MAX as u32) as i32).map_err(err)?;
    sock.set_nonblocking(true).map_err(err)?;
    Ok(sock.into())
}

/// Raise the soft open-files limit to the hard one; returns the limit in force.
fn raise_fd_limit() -> u64 {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct we pass.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) != 0 {
            return 0;
        }
        if rl.rlim_cur < rl.rlim_max {
            let want = libc::rlimit {
                rlim_cur: rl.rlim_max,
                rlim_max: rl.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 {
                rl.rlim_cur = rl.rlim_max;
            }
        }
    }
    rl.rlim_cur
}

async fn run(shared: Arc<Shared>, http_l: TcpListener, tcp_l: TcpListener, mut stop: watch::Receiver<bool>) {
    // Each listener has its own max_connections: an accept loop holds the permit of the next
    // connection while it waits in accept(), so a shared semaphore would lend it to the idle one.
    let limit = || (shared.cfg.max_connections > 0).then(|| Arc::new(Semaphore::new(shared.cfg.max_connections)));
    let http = tokio::spawn(accept_loop(Arc::clone(&shared), http_l, limit(), Kind::Http));
    let tcp = tokio::spawn(accept_loop(Arc::clone(&shared), tcp_l, limit(), Kind::Tcp));
    let ticker = (shared.cfg.recovery.mode != RecoveryMode::Recover).then(|| tokio::spawn(tick(Arc::clone(&shared))));
    while !*stop.borrow_and_update() {
        if stop.changed().await.is_err() {
            break;
        }
    }
    http.abort();
    tcp.abort();
    if let Some(t) = ticker {
        t.abort();
    }
}

async fn tick(shared: Arc<Shared>) {
    let mut every = tokio::time::interval(Duration::from_millis(10));
    loop {
        every.tick().await;
        shared.tick(Instant::now());
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Http,
    Tcp,
}

/// Counts an open connection (and holds its `max_connections` permit) until dropped.
struct Open {
    shared: Arc<Shared>,
    _permit: Option<OwnedSemaphorePermit>,
}

impl Drop for Open {
    fn drop(&mut self) {
        self.shared.connections_open.fetch_sub(1, Relaxed);
    }
}

async fn accept_loop(shared: Arc<Shared>, l: TcpListener, limit: Option<Arc<Semaphore>>, kind: Kind) {
    loop {
        // Past max_connections, stop accepting: the kernel's backlog fills, then connects are refused or time out.
        let permit = match &limit {
            Some(s) => match Arc::clone(s).acquire_owned().await {
                Ok(p) => Some(p),
                Err(_) => return,
            },
            None => None,
        };
        let stream = match l.accept().await {
            Ok((s, _)) => s,
            Err(e) => {
                shared.counters.accept_errors.fetch_add(1, Relaxed);
                let msg = if e.raw_os_error() == Some(libc::EMFILE) || e.raw_os_error() == Some(libc::ENFILE) {
                    format!(
                        "{e}: the open-files limit ({}) is reached; raise it with ulimit -n",
                        shared.fd_limit
                    )
                } else {
                    e.to_string()
                };
                *shared.last_accept_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(msg);
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        shared.counters.connections_accepted.fetch_add(1, Relaxed);
        shared.connections_open.fetch_add(1, Relaxed);
        let open = Open {
            shared: Arc::clone(&shared),
            _permit: permit,
        };
        let shared = Arc::clone(&shared);
        match kind {
            Kind::Http => tokio::spawn(serve_http(shared, stream, open)),
            Kind::Tcp => tokio::spawn(async move {
                let _open = open;
                tcp::serve(shared, stream).await;
            }),
        };
    }
}

async fn serve_http(shared: Arc<Shared>, stream: TcpStream, open: Open) {
    let _open = open;
    let _ = stream.set_nodelay(true);
    let conn = Arc::new(ConnState::default());
    let svc = service_fn(move |req| {
        // Counted when hyper hands the request over: a client that closes right after sending
        // may have this future dropped unpolled, and the server still saw the request.
        http::count(&shared, &req);
        http::handle(Arc::clone(&shared), Arc::clone(&conn), req)
    });
    let keep_alive = _open.shared.cfg.keep_alive;
    let _ = http1::Builder::new()
        .keep_alive(keep_alive)
        .serve_connection(TokioIo::new(stream), svc)
        .await;
}
