//! Shared test helpers: a real hyper server on 127.0.0.1:0 that counts requests and accepted
//! connections, a TCP echo server, and small spec builders.
#![allow(dead_code)]

use std::convert::Infallible;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use knee_engine::{GroupResult, ShardResult, Spec};

mod h2raw;
mod h2tap;
mod raw;
#[allow(unused_imports)]
pub use h2raw::*;
#[allow(unused_imports)]
pub use h2tap::*;
#[allow(unused_imports)]
pub use raw::*;
use serde_json::{json, Value};

/// How the test server answers.
#[derive(Clone)]
pub struct ServerOpts {
    pub status: u16,
    pub body: &'static str,
    /// Sleep (precisely, on a blocking thread) before answering.
    pub delay: Duration,
    /// Answer with `Connection: close` and close after each response.
    pub close: bool,
}

impl Default for ServerOpts {
    fn default() -> Self {
        ServerOpts {
            status: 200,
            body: "hello knee\n",
            delay: Duration::ZERO,
            close: false,
        }
    }
}

/// A server on 127.0.0.1:0 that counts the requests it answered and the connections it accepted: hyper's
/// (`start`) or one that writes raw bytes (`raw`, in raw.rs).
pub struct TestServer {
    pub addr: SocketAddr,
    pub requests: Arc<AtomicU64>,
    pub connections: Arc<AtomicU64>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl TestServer {
    pub fn start(opts: ServerOpts) -> TestServer {
        let requests = Arc::new(AtomicU64::new(0));
        let connections = Arc::new(AtomicU64::new(0));
        let (tx, mut rx) = tokio::sync::oneshot::channel::<()>();
        let (req, conns) = (requests.clone(), connections.clone());
        let (addr, thread) = tokio_server(2, move |listener| async move {
            loop {
                let (stream, _) = tokio::select! {
                    r = listener.accept() => match r { Ok(s) => s, Err(_) => continue },
                    _ = &mut rx => break,
                };
                conns.fetch_add(1, Ordering::Relaxed);
                let _ = stream.set_nodelay(true);
                let (req, opts) = (req.clone(), opts.clone());
                let keep_alive = !opts.close;
                tokio::spawn(async move {
                    let svc = service_fn(move |_r: Request<hyper::body::Incoming>| {
                        // Counted when hyper hands over the parsed request, not when the response
                        // future is first polled: a client that closes right after sending would
                        // otherwise make the count race hyper's dropping of that future.
                        req.fetch_add(1, Ordering::Relaxed);
                        let opts = opts.clone();
                        async move {
                            if !opts.delay.is_zero() {
                                let d = opts.delay;
                                let _ = tokio::task::spawn_blocking(move || std::thread::sleep(d)).await;
                            }
                            let mut resp = Response::builder().status(opts.status);
                            if opts.close {
                                resp = resp.header("connection", "close");
                            }
                            Ok::<_, Infallible>(resp.body(Full::new(Bytes::from_static(opts.body.as_bytes()))).unwrap())
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .keep_alive(keep_alive)
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        TestServer {
            addr,
            requests,
            connections,
            shutdown: Some(tx),
            thread: Some(thread),
        }
    }

    /// The default answer, after `delay`.
    pub fn delayed(delay: Duration) -> TestServer {
        TestServer::start(ServerOpts {
            delay,
            ..ServerOpts::default()
        })
    }

    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::Relaxed)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A thread with a tokio runtime of `worker_threads` that runs `serve` on a listener bound to 127.0.0.1:0, then
/// shuts the runtime down: the listener's address, once bound, and the thread.
pub fn tokio_server<F, Fut>(worker_threads: usize, serve: F) -> (SocketAddr, JoinHandle<()>)
where
    F: FnOnce(tokio::net::TcpListener) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(worker_threads)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            addr_tx.send(listener.local_addr().unwrap()).unwrap();
            serve(listener).await;
        });
        rt.shutdown_background();
    });
    let addr = addr_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("test server started");
    (addr, thread)
}

/// An HTTPS server on 127.0.0.1:0 with `config`: each connection's handshake shown to `handshaken`, then every
/// HTTP/1.1 request on it answered 200 `body` and counted in `requests` (when hyper hands it over, as
/// `TestServer` counts). Its address.
pub fn https_server(
    config: rustls::ServerConfig,
    body: &'static [u8],
    requests: Arc<AtomicU64>,
    handshaken: impl Fn(&rustls::ServerConnection) + Clone + Send + 'static,
) -> SocketAddr {
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let (addr, _thread) = tokio_server(1, move |listener| async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (acceptor, requests, handshaken) = (acceptor.clone(), requests.clone(), handshaken.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(stream).await else { return };
                handshaken(tls.get_ref().1);
                let svc = service_fn(move |_r: Request<hyper::body::Incoming>| {
                    requests.fetch_add(1, Ordering::Relaxed);
                    async move { Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(body)))) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    addr
}

/// A TCP server on 127.0.0.1 that runs `each` on every connection it accepts, in a thread of its own.
pub fn serve_each(each: impl Fn(std::net::TcpStream) + Send + Clone + 'static) -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(s) = stream else { continue };
            let each = each.clone();
            std::thread::spawn(move || each(s));
        }
    });
    addr
}

/// A TCP server that echoes what it reads, one thread per connection.
pub fn echo_server() -> SocketAddr {
    serve_each(|mut s| {
        let mut buf = [0u8; 4096];
        while let Ok(n) = s.read(&mut buf) {
            if n == 0 || s.write_all(&buf[..n]).is_err() {
                break;
            }
        }
    })
}

/// A port on which nothing listens (bound, then closed).
pub fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// A listener whose accept queue is full (backlog 1, two connections queued and never accepted): the kernel
/// drops further SYNs, so a connect to it neither succeeds nor fails until SYN retries run out (minutes).
/// Keep the returned pair alive as long as the test needs it full.
pub fn full_listener() -> (std::net::TcpListener, [std::net::TcpStream; 2]) {
    use std::os::fd::AsRawFd;
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    // SAFETY: listen() on our own socket; on a listening socket it only changes the backlog. Backlog 1 (two
    // connections queued fill it): with 0 the kernel's SYN queue counts as full too, and the queued
    // connections would get through only by syncookies.
    assert_eq!(unsafe { libc::listen(l.as_raw_fd(), 1) }, 0);
    let queue = || std::net::TcpStream::connect_timeout(&l.local_addr().unwrap(), Duration::from_secs(2)).unwrap();
    let queued = [queue(), queue()];
    (l, queued)
}

/// A server that accepts connections and then neither reads nor writes (a TLS handshake with it stalls);
/// its connections stay open for the test's life.
pub fn silent_server() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in l.incoming() {
            let Ok(s) = s else { break };
            held.push(s);
        }
    });
    addr
}

/// The first failure reason's key (numbers and addresses masked) of the first group.
pub fn first_reason(r: &ShardResult) -> String {
    summary(r)["groups"][0]["reasons"][0]["key"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Run `spec`, and hold that it ended within `limit`.
pub fn run_within(spec: Spec, limit: Duration) -> ShardResult {
    let t = std::time::Instant::now();
    let r = knee_engine::run(spec).unwrap();
    assert!(t.elapsed() < limit, "took {:?}", t.elapsed());
    r
}

/// A one-group spec.
pub fn one_group(clients: u64, stop: Value, client: Value) -> Spec {
    spec(json!({"threads": 2, "groups": [group("main", clients, stop, client)]}))
}

pub fn group(name: &str, clients: u64, stop: Value, client: Value) -> Value {
    json!({"name": name, "clients": clients, "stop": stop, "timeout_ms": 5000, "client": client})
}

pub fn spec(v: Value) -> Spec {
    Spec::from_json(&v.to_string()).expect("valid test spec")
}

pub fn http(url: &str) -> Value {
    json!({"kind": "http", "url": url})
}

pub fn summary(r: &ShardResult) -> Value {
    serde_json::from_str(&r.summary_json()).unwrap()
}

/// A group's (succeeded, failed, hung), the triple most tests check.
pub fn succeeded_failed_hung(g: &GroupResult) -> (u64, u64, u64) {
    let o = &g.counts.outcomes;
    (o.succeeded, o.failed, o.hung)
}

/// `count()` once it equals `want`, or after 2 s of waiting for that (a server may count a request
/// a moment after knee has dropped its connection).
pub fn settled(count: impl Fn() -> u64, want: u64) -> u64 {
    wait_until(Duration::from_secs(2), || count() == want);
    count()
}

/// Wait until `cond` holds, at most `timeout`; whether it held. For conditions a busy machine only delays.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + timeout;
    while !cond() {
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

/// A fresh temporary directory for one test.
pub fn temp_dir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("knee-engine-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// True when `pid` no longer runs (gone, or a zombie waiting for its reaper).
pub fn not_running(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(s) => s
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

/// A test PKI made with `openssl` (root CA, server and client certificates, a second CA).
pub mod pki;
