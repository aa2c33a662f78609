//! The HTTP side: every GET/POST path outside `/admin/` is a request whose service time follows
//! the USL curve; `/admin/stats`, `/admin/config` and `POST /admin/reset` report and reset.

use std::convert::Infallible;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use hyper::{Method, Request, Response, StatusCode};

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

/// Handle one request on a connection.
pub async fn handle(shared: Arc<Shared>, conn: Arc<ConnState>, req: Request<Incoming>) -> Result<Resp, Infallible> {
    let path = req.uri().path().to_string();
    if path.starts_with("/admin/") {
        return Ok(admin(&shared, req.method(), &path));
    }
    if req.method() != Method::GET && req.method() != Method::POST && req.method() != Method::HEAD {
        return Ok(text(StatusCode::METHOD_NOT_ALLOWED, "only GET, HEAD and POST\n"));
    }
    let first = !conn.first_done.swap(true, Relaxed);
    // Read (and drop) any request body so the connection can be kept alive.
    let _ = req.into_body().collect().await;
    let c = &shared.counters;
    c.requests.fetch_add(1, Relaxed);
    let n = match shared.admit() {
        Admit::Reject => {
            shared
                .sleep(Duration::from_secs_f64(shared.cfg.reject_ms / 1000.0))
                .await;
            c.rejected_pool.fetch_add(1, Relaxed);
            let mut r = text(StatusCode::SERVICE_UNAVAILABLE, "busy: worker pool exhausted\n");
            r.headers_mut().insert(RETRY_AFTER, HeaderValue::from_static("1"));
            return Ok(r);
        }
        Admit::Hang => {
            c.hung.fetch_add(1, Relaxed);
            shared.hanging.fetch_add(1, Relaxed);
            let _guard = Hanging(&shared);
            // Never answered: the connection stays open and silent until the client goes away,
            // which drops this future.
            std::future::pending::<()>().await;
            unreachable!("a hung request is never answered");
        }
        Admit::Serve(n) => n,
    };
    let mut guard = InFlight {
        shared: &shared,
        finished: false,
    };
    let (cost, bytes) = shared.cfg.path_cost(&path);
    let mut s = shared.service_time(n, cost);
    if first && shared.cfg.new_connection_ms > 0.0 {
        s += Duration::from_secs_f64(shared.cfg.new_connection_ms / 1000.0);
    }
    let timeout = shared.cfg.timeout_s;
    if timeout > 0.0 && s.as_secs_f64() > timeout {
        shared.sleep(Duration::from_secs_f64(timeout)).await;
        guard.finished = true;
        c.timed_out.fetch_add(1, Relaxed);
        return Ok(text(StatusCode::GATEWAY_TIMEOUT, "timeout: request took too long\n"));
    }
    shared.sleep(s).await;
    guard.finished = true;
    drop(guard);
    c.served.fetch_add(1, Relaxed);
    let body = if bytes == 0 {
        Bytes::from_static(b"ok\n")
    } else {
        shared.body.slice(..bytes)
    };
    add(&c.bytes_sent, body.len());
    Ok(text(StatusCode::OK, body))
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
