//! The HTTP side: every GET/POST path outside `/admin/` is a request whose service time follows
//! the USL curve; `/admin/stats`, `/admin/config` and `POST /admin/reset` report and reset.
//! With a `[login]` path, `POST user=NAME&password=PW` there hands out a session cookie, and
//! paths with `session = true` answer 401 at once to requests without a remembered one.

use std::convert::Infallible;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE, COOKIE, RETRY_AFTER, SET_COOKIE};
use hyper::{HeaderMap, Method, Request, Response, StatusCode};

use crate::state::{Admit, Shared};

type Resp = Response<Full<Bytes>>;

/// Per-connection state: has its first request (which pays `new_connection_ms`) been seen.
#[derive(Default)]
pub struct ConnState {
    first_done: AtomicBool,
}

/// Counts a served request out of flight when dropped; counted `aborted` if it never finished.
struct InFlight<'a> {
    shared: &'a Shared,
    finished: bool,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.shared.leave();
        if !self.finished {
            self.shared.counters.aborted.fetch_add(1, Relaxed);
        }
    }
}

/// Counts a hung request out of the `hanging` gauge when its client goes away.
struct Hanging<'a>(&'a Shared);

impl Drop for Hanging<'_> {
    fn drop(&mut self) {
        self.0.hanging.fetch_sub(1, Relaxed);
    }
}

fn text(status: StatusCode, body: impl Into<Bytes>) -> Resp {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    r
}

fn json(status: StatusCode, v: &serde_json::Value) -> Resp {
    let mut r = text(status, v.to_string());
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

/// What a request turns into once its service time is over.
enum Work {
    /// An ordinary request: `bytes` of body (0: a short text line).
    Plain { bytes: usize },
    /// A login by `user`; `ok` when the password matched.
    Login { user: String, ok: bool },
}

/// Count a request in `requests` (not the admin API, not a refused method), as it arrives.
pub fn count(shared: &Shared, req: &Request<Incoming>) {
    let (path, m) = (req.uri().path(), req.method());
    if path.starts_with("/admin/") || !(m == Method::GET || m == Method::POST || m == Method::HEAD) {
        return;
    }
    if shared.cfg.is_login(path) && m != Method::POST {
        return;
    }
    shared.counters.requests.fetch_add(1, Relaxed);
}

/// Handle one request on a connection.
pub async fn handle(shared: Arc<Shared>, conn: Arc<ConnState>, req: Request<Incoming>) -> Result<Resp, Infallible> {
    let path = req.uri().path().to_string();
    if path.starts_with("/admin/") {
        return Ok(admin(&shared, req.method(), &path));
    }
    if req.method() != Method::GET && req.method() != Method::POST && req.method() != Method::HEAD {
        return Ok(text(StatusCode::METHOD_NOT_ALLOWED, "only GET, HEAD and POST\n"));
    }
    let cfg = &shared.cfg;
    let login = cfg.is_login(&path);
    if login && req.method() != Method::POST {
        let mut r = text(
            StatusCode::METHOD_NOT_ALLOWED,
            "log in with POST user=NAME&password=…\n",
        );
        r.headers_mut().insert(ALLOW, HeaderValue::from_static("POST"));
        return Ok(r);
    }
    let first = !conn.first_done.swap(true, Relaxed);
    let authorized = !cfg.needs_session(&path) || has_session(&shared, req.headers());
    // Read the body (a login's form; any other is dropped) so the connection can be kept alive.
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let c = &shared.counters;
    if !authorized {
        c.unauthorized.fetch_add(1, Relaxed);
        return Ok(text(
            StatusCode::UNAUTHORIZED,
            format!("login first: POST user=NAME&password=… to {}\n", cfg.login.path),
        ));
    }
    let (cost, work) = if login {
        let Some(user) = form_value(&body, "user") else {
            return Ok(text(StatusCode::BAD_REQUEST, "log in with POST user=NAME&password=…\n"));
        };
        let ok = form_value(&body, "password").is_some_and(|pw| pw == cfg.login.password);
        (cfg.login.cost, Work::Login { user, ok })
    } else {
        let (cost, bytes) = cfg.path_cost(&path);
        (cost, Work::Plain { bytes })
    };
    if let Err(failed) = serve(&shared, first, cost).await {
        return Ok(failed);
    }
    Ok(match work {
        Work::Plain { bytes } => {
            c.served.fetch_add(1, Relaxed);
            let body = if bytes == 0 {
                Bytes::from_static(b"ok\n")
            } else {
                shared.body.slice(..bytes)
            };
            add(&c.bytes_sent, body.len());
            text(StatusCode::OK, body)
        }
        Work::Login { user, ok: true } => {
            c.served.fetch_add(1, Relaxed);
            c.logins.fetch_add(1, Relaxed);
            let token = shared.new_session();
            let body = format!("welcome {user}\n");
            add(&c.bytes_sent, body.len());
            let mut r = text(StatusCode::OK, body);
            let cookie = format!("session={token:016x}; Path=/; HttpOnly");
            if let Ok(v) = HeaderValue::from_str(&cookie) {
                r.headers_mut().insert(SET_COOKIE, v);
            }
            r
        }
        Work::Login { user, ok: false } => {
            c.logins_refused.fetch_add(1, Relaxed);
            text(StatusCode::FORBIDDEN, format!("bad password for {user}\n"))
        }
    })
}

/// Admit a request, wait for a worker (`workers`), then wait its service time (`cost` × the USL
/// curve of the requests being served × degradation, warm-up and noise, plus the connection's
/// setup on its first request). Err: the response it got instead (503 from the pool; 504 when
/// it is not done `timeout_s` after its admission, whether it was still waiting for a worker or
/// being served). A hung request never returns.
async fn serve(shared: &Shared, first: bool, cost: f64) -> Result<(), Resp> {
    let c = &shared.counters;
    let admitted = Instant::now();
    let n = match shared.admit() {
        Admit::Reject => {
            shared
                .sleep(Duration::from_secs_f64(shared.cfg.reject_ms / 1000.0))
                .await;
            c.rejected_pool.fetch_add(1, Relaxed);
            let mut r = text(StatusCode::SERVICE_UNAVAILABLE, "busy: worker pool exhausted\n");
            r.headers_mut().insert(RETRY_AFTER, HeaderValue::from_static("1"));
            return Err(r);
        }
        Admit::Hang => {
            c.hung.fetch_add(1, Relaxed);
            shared.hanging.fetch_add(1, Relaxed);
            let _guard = Hanging(shared);
            // Never answered: the connection stays open and silent until the client goes away,
            // which drops this future.
            std::future::pending::<()>().await;
            unreachable!("a hung request is never answered");
        }
        Admit::Serve(n) => n,
    };
    let mut guard = InFlight {
        shared,
        finished: false,
    };
    let timeout = shared.cfg.timeout_s;
    let deadline = (timeout > 0.0).then(|| admitted + Duration::from_secs_f64(timeout));
    let timed_out = |guard: &mut InFlight<'_>, what: &str| {
        guard.finished = true;
        c.timed_out.fetch_add(1, Relaxed);
        text(StatusCode::GATEWAY_TIMEOUT, format!("timeout: {what}\n"))
    };
    let Some(worker) = shared.workers.take(n, deadline, &shared.timer).await else {
        return Err(timed_out(&mut guard, "no worker was free in time"));
    };
    let mut s = shared.service_time(worker.n, cost);
    if first && shared.cfg.new_connection_ms > 0.0 {
        s += Duration::from_secs_f64(shared.cfg.new_connection_ms / 1000.0);
    }
    if let Some(deadline) = deadline {
        if Instant::now() + s > deadline {
            // It holds its worker until the deadline, as a real server's worker would.
            shared.timer.sleep_until(deadline).await;
            return Err(timed_out(&mut guard, "request took too long"));
        }
    }
    shared.sleep(s).await;
    drop(worker);
    guard.finished = true;
    Ok(())
}

/// Does a `Cookie` header carry `session=TOKEN` with a token handed out since the last reset?
fn has_session(shared: &Shared, headers: &HeaderMap) -> bool {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .filter(|(name, _)| name.trim() == "session")
        .filter_map(|(_, value)| parse_token(value.trim().trim_matches('"')))
        .any(|token| shared.has_session(token))
}

/// A session token: exactly 16 hex digits.
fn parse_token(s: &str) -> Option<u64> {
    if s.len() == 16 && s.bytes().all(|b| b.is_ascii_hexdigit()) {
        u64::from_str_radix(s, 16).ok()
    } else {
        None
    }
}

/// The first value of `key` in an application/x-www-form-urlencoded body, decoded.
fn form_value(body: &[u8], key: &str) -> Option<String> {
    let body = body.trim_ascii_end();
    body.split(|&b| b == b'&').find_map(|pair| {
        let (k, v) = match pair.iter().position(|&b| b == b'=') {
            Some(i) => (&pair[..i], &pair[i + 1..]),
            None => (pair, &pair[pair.len()..]),
        };
        (url_decode(k) == key).then(|| url_decode(v))
    })
}

/// Form decoding: `+` is a space, `%XX` a byte; anything else (a stray `%`) is kept as is.
fn url_decode(s: &[u8]) -> String {
    let hex = |b: u8| (b as char).to_digit(16);
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'+' => out.push(b' '),
            b'%' => match (s.get(i + 1).and_then(|&b| hex(b)), s.get(i + 2).and_then(|&b| hex(b))) {
                (Some(hi), Some(lo)) => {
                    out.push((hi * 16 + lo) as u8);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn add(a: &AtomicU64, n: usize) {
    a.fetch_add(n as u64, Relaxed);
}

fn admin(shared: &Shared, method: &Method, path: &str) -> Resp {
    match (method, path) {
        (&Method::GET, "/admin/stats") => json(StatusCode::OK, &shared.stats()),
        (&Method::GET, "/admin/config") => json(StatusCode::OK, &shared.config_doc()),
        (&Method::POST, "/admin/reset") => {
            let before = shared.stats();
            shared.reset();
            json(StatusCode::OK, &before)
        }
        _ => {
            shared.counters.not_found.fetch_add(1, Relaxed);
            text(
                StatusCode::NOT_FOUND,
                "admin endpoints: GET /admin/stats, GET /admin/config, POST /admin/reset\n",
            )
        }
    }
}
