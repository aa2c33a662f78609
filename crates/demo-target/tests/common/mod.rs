//! A small closed-loop HTTP/1.1 client for the target's tests (keep-alive, Content-Length bodies).
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use knee_demo_target::{Config, Server};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

pub fn start(toml: &str) -> Server {
    Server::start(Config::from_toml(toml).expect("config")).expect("start")
}

/// A target started from `toml`, its HTTP address, and a runtime for the clients.
pub fn serve(toml: &str) -> (Server, SocketAddr, tokio::runtime::Runtime) {
    let server = start(toml);
    let addr = server.http_addr();
    (server, addr, runtime())
}

/// Run `test` with the HTTP address of a target started from `toml`, which runs until `test` is done.
pub fn against<Fut: std::future::Future<Output = ()>>(toml: &str, test: impl FnOnce(SocketAddr) -> Fut) {
    let (_server, addr, rt) = serve(toml);
    rt.block_on(test(addr));
}

/// The error for a config the target rejects (the test fails if it is accepted).
pub fn rejected(toml: &str) -> String {
    Config::from_toml(toml).expect_err("should be rejected").to_string()
}

/// The target rejects `toml` with an error that says every one of `says`.
pub fn assert_rejected(toml: &str, says: &[&str]) {
    let e = rejected(toml);
    assert!(says.iter().all(|s| e.contains(s)), "{e}");
}

/// The target rejects each of `tomls` with a one-line error.
pub fn assert_rejected_in_one_line(tomls: &[&str]) {
    for e in tomls.iter().map(|t| rejected(t)) {
        assert!(!e.contains('\n'), "one line: {e}");
    }
}

/// `n` milliseconds: closed-loop calls stay on one line.
pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

/// One keep-alive connection.
pub struct Conn {
    pub rd: BufReader<TcpStream>,
}

impl Conn {
    pub async fn open(addr: SocketAddr) -> std::io::Result<Conn> {
        let s = TcpStream::connect(addr).await?;
        s.set_nodelay(true)?;
        Ok(Conn { rd: BufReader::new(s) })
    }

    /// Send one request and read the response: (status, body length).
    pub async fn request(&mut self, method: &str, path: &str) -> std::io::Result<(u16, usize)> {
        let req = format!("{method} {path} HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n");
        self.rd.get_mut().write_all(req.as_bytes()).await?;
        let mut line = String::new();
        if self.rd.read_line(&mut line).await? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        let status: u16 = line.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        let mut len = 0usize;
        loop {
            line.clear();
            self.rd.read_line(&mut line).await?;
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0u8; len];
        self.rd.read_exact(&mut body).await?;
        Ok((status, len))
    }
}

/// GET a path on a fresh connection and return (status, body text).
pub async fn get(addr: SocketAddr, method: &str, path: &str) -> (u16, String) {
    let s = TcpStream::connect(addr).await.unwrap();
    let mut rd = BufReader::new(s);
    let req = format!("{method} {path} HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    rd.get_mut().write_all(req.as_bytes()).await.unwrap();
    let mut all = String::new();
    rd.read_to_string(&mut all).await.unwrap();
    let status = all.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = all
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// A response read to its end: status, headers (name lowercased) and body text.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    /// The first header of that (lowercase) name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// Send one request with extra header lines and a body on a fresh connection; read the whole reply.
pub async fn send(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Reply {
    let s = TcpStream::connect(addr).await.unwrap();
    let mut rd = BufReader::new(s);
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n");
    for (k, v) in headers {
        req += &format!("{k}: {v}\r\n");
    }
    req += &format!("Content-Length: {}\r\n\r\n{body}", body.len());
    rd.get_mut().write_all(req.as_bytes()).await.unwrap();
    let mut all = String::new();
    rd.read_to_string(&mut all).await.unwrap();
    let (head, body) = all.split_once("\r\n\r\n").unwrap_or((&all, ""));
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Reply {
        status,
        headers,
        body: body.to_string(),
    }
}

pub async fn stats(addr: SocketAddr) -> serde_json::Value {
    serde_json::from_str(&get(addr, "GET", "/admin/stats").await.1).unwrap()
}

/// The counters in /admin/stats named in `want` have the values given there.
pub async fn assert_stats(addr: SocketAddr, want: &[(&str, u64)]) {
    let s = stats(addr).await;
    let got: Vec<Option<u64>> = want.iter().map(|(k, _)| s[k].as_u64()).collect();
    let want: Vec<Option<u64>> = want.iter().map(|&(_, v)| Some(v)).collect();
    assert_eq!(got, want, "{s}");
}

/// What a closed-loop run measured.
#[derive(Debug, Default)]
pub struct Run {
    /// 2xx responses that ended inside the measured window.
    pub ok_in_window: u64,
    pub ok: u64,
    pub status_503: u64,
    pub status_504: u64,
    pub other: u64,
    /// Requests given up after the per-request limit.
    pub gave_up: u64,
    pub window: Duration,
}

impl Run {
    pub fn rate(&self) -> f64 {
        self.ok_in_window as f64 / self.window.as_secs_f64()
    }
}

/// `clients` closed-loop clients, no think time, for `warmup + window`; requests past `limit` are given up
/// (the connection is dropped and a new one opened).
pub async fn closed_loop(
    addr: SocketAddr,
    path: &str,
    clients: usize,
    warmup: Duration,
    window: Duration,
    limit: Duration,
) -> Run {
    let start = Instant::now();
    let (w0, w1) = (start + warmup, start + warmup + window);
    let stop = Arc::new(AtomicBool::new(false));
    let counts: Arc<[AtomicU64; 6]> = Arc::new(Default::default());
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (counts, stop, path) = (Arc::clone(&counts), Arc::clone(&stop), path.to_string());
        tasks.push(tokio::spawn(async move {
            let mut conn: Option<Conn> = None;
            while !stop.load(Relaxed) && Instant::now() < w1 {
                if conn.is_none() {
                    conn = Conn::open(addr).await.ok();
                }
                let Some(c) = conn.as_mut() else {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                };
                match tokio::time::timeout(limit, c.request("GET", &path)).await {
                    Ok(Ok((status, _))) => {
                        let now = Instant::now();
                        let i = match status {
                            200..=299 => {
                                if now >= w0 && now < w1 {
                                    counts[0].fetch_add(1, Relaxed);
                                }
                                1
                            }
                            503 => 2,
                            504 => 3,
                            _ => 4,
                        };
                        counts[i].fetch_add(1, Relaxed);
                    }
                    Ok(Err(_)) => {
                        conn = None;
                        counts[4].fetch_add(1, Relaxed);
                    }
                    Err(_) => {
                        conn = None;
                        counts[5].fetch_add(1, Relaxed);
                    }
                }
            }
        }));
    }
    tokio::time::sleep_until((w1 + Duration::from_millis(1)).into()).await;
    stop.store(true, Relaxed);
    // Let in-flight requests finish (bounded), so that counts match the server's.
    for t in tasks {
        let _ = tokio::time::timeout(limit + Duration::from_secs(1), t).await;
    }
    let g = |i: usize| counts[i].load(Relaxed);
    Run {
        ok_in_window: g(0),
        ok: g(1),
        status_503: g(2),
        status_504: g(3),
        other: g(4),
        gave_up: g(5),
        window,
    }
}
