//! Login sessions: `POST user=NAME&password=PW` to `[login] path` hands out a session cookie;
//! paths with `session = true` answer 401 without a remembered one.

use crate::common;

use std::net::SocketAddr;

use common::{against, assert_rejected, assert_rejected_in_one_line, assert_stats, get, send, serve, stats, Reply};
use knee_demo_target::Config;

/// Fast and flat (S = 1 ms), a login endpoint and one protected path.
const CONFIG: &str = "lambda = 1000.0\nsigma = 0.0\nkappa = 0.0\n\
                      [login]\npath = \"/login\"\n\
                      [paths.\"/files/x\"]\nsession = true\n";

const FORM: (&str, &str) = ("Content-Type", "application/x-www-form-urlencoded");

async fn login(addr: SocketAddr, form: &str) -> Reply {
    send(addr, "POST", "/login", &[FORM], form).await
}

/// The token of a `Set-Cookie: session=<16 lowercase hex digits>; Path=/; HttpOnly` header.
fn token(r: &Reply) -> String {
    let cookie = r.header("set-cookie").unwrap_or_else(|| panic!("no Set-Cookie: {r:?}"));
    let t = cookie
        .strip_prefix("session=")
        .and_then(|rest| rest.strip_suffix("; Path=/; HttpOnly"))
        .unwrap_or_else(|| panic!("cookie format: {cookie}"));
    assert!(
        t.len() == 16 && t.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
        "16 lowercase hex digits: {cookie}"
    );
    t.to_string()
}

async fn fetch(addr: SocketAddr, path: &str, cookie: Option<&str>) -> Reply {
    match cookie {
        Some(c) => send(addr, "GET", path, &[("Cookie", c)], "").await,
        None => send(addr, "GET", path, &[], "").await,
    }
}

#[test]
fn login_sets_a_session_cookie_that_opens_session_paths() {
    against(CONFIG, |addr| async move {
        let r = login(addr, "user=alice&password=knee").await;
        assert_eq!((r.status, r.body.as_str()), (200, "welcome alice\n"), "{r:?}");
        let t = token(&r);
        let r = fetch(addr, "/files/x", Some(&format!("session={t}"))).await;
        assert_eq!((r.status, r.body.as_str()), (200, "ok\n"), "{r:?}");
        // Among other cookies, in any place.
        let r = fetch(addr, "/files/x", Some(&format!("theme=dark; session={t}; lang=en"))).await;
        assert_eq!(r.status, 200, "{r:?}");
        // Each login is a new session.
        let t2 = token(&login(addr, "password=knee&user=bob").await);
        assert_ne!(t, t2);
        assert_eq!(
            fetch(addr, "/files/x", Some(&format!("session={t2}"))).await.status,
            200
        );
        assert_eq!(fetch(addr, "/files/x", Some(&format!("session={t}"))).await.status, 200);
    });
}

#[test]
fn form_values_are_percent_decoded() {
    against(
        "lambda = 1000.0\n[login]\npath = \"/in\"\npassword = \"s3cret & more\"\n",
        |addr| async move {
            let r = send(
                addr,
                "POST",
                "/in",
                &[FORM],
                "user=J%C3%B6rg+M%C3%BCller&password=s3cret+%26+more",
            )
            .await;
            assert_eq!((r.status, r.body.as_str()), (200, "welcome Jörg Müller\n"), "{r:?}");
            token(&r);
            let r = send(addr, "POST", "/in", &[FORM], "user=a%2Bb&password=s3cret+more").await;
            assert_eq!((r.status, r.body.as_str()), (403, "bad password for a+b\n"), "{r:?}");
        },
    );
}

#[test]
fn a_wrong_password_is_403_without_a_session() {
    against(CONFIG, |addr| async move {
        let r = login(addr, "user=alice&password=nope").await;
        assert_eq!((r.status, r.body.as_str()), (403, "bad password for alice\n"), "{r:?}");
        assert_eq!(r.header("set-cookie"), None, "{r:?}");
        let r = login(addr, "user=alice").await;
        assert_eq!(
            (r.status, r.body.as_str()),
            (403, "bad password for alice\n"),
            "no password: {r:?}"
        );
    });
}

#[test]
fn session_paths_need_a_remembered_token() {
    against(CONFIG, |addr| async move {
        let r = fetch(addr, "/files/x", None).await;
        assert_eq!(
            (r.status, r.body.as_str()),
            (401, "login first: POST user=NAME&password=… to /login\n"),
            "{r:?}"
        );
        let t = token(&login(addr, "user=alice&password=knee").await);
        // A token never handed out, a malformed one, the right one under another name.
        let unknown = if t == "0123456789abcdef" {
            "fedcba9876543210"
        } else {
            "0123456789abcdef"
        };
        for cookie in [
            format!("session={unknown}"),
            "session=xyz".to_string(),
            format!("session={t}0"),
            format!("other={t}"),
            String::new(),
        ] {
            let r = fetch(addr, "/files/x", Some(&cookie)).await;
            assert_eq!(r.status, 401, "Cookie: {cookie:?}: {r:?}");
        }
        // Paths without session = true need no cookie.
        assert_eq!(fetch(addr, "/files/y", None).await.status, 200);
        assert_eq!(fetch(addr, "/", Some("session=junk")).await.status, 200);
    });
}

#[test]
fn the_login_path_takes_only_a_post_with_a_user() {
    against(CONFIG, |addr| async move {
        let r = send(addr, "GET", "/login", &[], "").await;
        assert_eq!(
            (r.status, r.body.as_str()),
            (405, "log in with POST user=NAME&password=…\n"),
            "{r:?}"
        );
        assert_eq!(r.header("allow"), Some("POST"), "{r:?}");
        let r = login(addr, "password=knee").await;
        assert_eq!(r.status, 400, "{r:?}");
        assert_eq!(r.header("set-cookie"), None, "{r:?}");
    });
}

#[test]
fn counters_count_logins_refusals_and_401s_and_reset_forgets_sessions() {
    let (server, addr, rt) = serve(CONFIG);
    rt.block_on(async {
        let t = token(&login(addr, "user=alice&password=knee").await);
        let cookie = format!("session={t}");
        assert_eq!(login(addr, "user=alice&password=x").await.status, 403);
        assert_eq!(login(addr, "user=bob&password=y").await.status, 403);
        assert_eq!(fetch(addr, "/files/x", None).await.status, 401);
        assert_eq!(fetch(addr, "/files/x", Some("session=0")).await.status, 401);
        assert_eq!(fetch(addr, "/files/x", Some(&cookie)).await.status, 200);
        assert_eq!(fetch(addr, "/other", None).await.status, 200);
        let s = stats(addr).await;
        let n = |k: &str| s[k].as_u64();
        assert_eq!(
            (n("logins"), n("logins_refused"), n("unauthorized"), n("sessions")),
            (Some(1), Some(2), Some(2), Some(1)),
            "{s}"
        );
        assert_eq!((n("requests"), n("served")), (Some(7), Some(3)), "{s}");
        assert_eq!(
            n("bytes_sent"),
            Some(("welcome alice\n".len() + 2 * "ok\n".len()) as u64),
            "{s}"
        );

        let (status, before) = get(addr, "POST", "/admin/reset").await;
        assert_eq!(status, 200);
        let before: serde_json::Value = serde_json::from_str(&before).unwrap();
        assert_eq!(before["logins"].as_u64(), Some(1), "{before}");
        let s = stats(addr).await;
        for k in [
            "logins",
            "logins_refused",
            "unauthorized",
            "sessions",
            "requests",
            "served",
        ] {
            assert_eq!(s[k].as_u64(), Some(0), "{k} after reset: {s}");
        }
        let r = fetch(addr, "/files/x", Some(&cookie)).await;
        assert_eq!(r.status, 401, "the reset forgot the session: {r:?}");
        let t2 = token(&login(addr, "user=alice&password=knee").await);
        assert_ne!(t, t2, "tokens are not reused after a reset");
        assert_eq!(
            fetch(addr, "/files/x", Some(&format!("session={t2}"))).await.status,
            200
        );
        // Server::reset does the same.
        server.reset();
        assert_eq!(
            fetch(addr, "/files/x", Some(&format!("session={t2}"))).await.status,
            401
        );
    });
}

#[test]
fn a_login_is_served_like_any_request() {
    // S(1) = 10 ms; a login costs 10 of them, past the 50 ms timeout: 504 and no session.
    against(
        "lambda = 100.0\nsigma = 0.0\nkappa = 0.0\ntimeout_s = 0.05\n\
         [login]\npath = \"/login\"\ncost = 10.0\n",
        |addr| async move {
            let r = login(addr, "user=alice&password=knee").await;
            assert_eq!(r.status, 504, "{r:?}");
            assert_eq!(r.header("set-cookie"), None, "{r:?}");
            assert_stats(addr, &[("timed_out", 1), ("logins", 0), ("sessions", 0)]).await;
        },
    );
    // At cost 0 a login waits no service time but is still admitted and counted served.
    against("[login]\npath = \"/login\"\ncost = 0.0\n", |addr| async move {
        assert_eq!(login(addr, "user=a&password=knee").await.status, 200);
        assert_stats(addr, &[("served", 1), ("in_flight", 0)]).await;
    });
}

#[test]
fn login_config_defaults_errors_and_admin_config() {
    let cfg = Config::from_toml("").unwrap();
    assert_eq!(
        (cfg.login.path.as_str(), cfg.login.password.as_str(), cfg.login.cost),
        ("", "knee", 1.0)
    );
    let cfg = Config::from_toml("[paths.\"/a\"]\ncost = 2.0\n").unwrap();
    assert!(!cfg.paths["/a"].session);

    assert_rejected(
        "[login]\npath = \"/login\"\ncost = -1.0\n",
        &["login.cost = -1", "cost ≥ 0"],
    );
    assert_rejected("[login]\npath = \"login\"\n", &["login.path = \"login\"", "'/'"]);
    assert_rejected("[login]\npath = \"/admin/login\"\n", &["login.path = \"/admin/login\""]);
    assert_rejected(
        "[paths.\"/x\"]\nsession = true\n",
        &["paths.\"/x\".session = true", "[login] path"],
    );
    assert_rejected(
        "[login]\npath = \"/in\"\n[paths.\"/in\"]\nsession = true\n",
        &["paths.\"/in\".session = true", "login path"],
    );
    assert_rejected("[login]\npasword = \"x\"\n", &["pasword"]);
    assert_rejected("[paths.\"/x\"]\nsession = \"yes\"\n", &["paths"]);
    assert_rejected_in_one_line(&[
        "[login]\ncost = -1.0\n",
        "[paths.\"/x\"]\nsession = true\n",
        "[login]\npath = \"x\"\n",
    ]);

    against(CONFIG, |addr| async move {
        let (status, body) = get(addr, "GET", "/admin/config").await;
        assert_eq!(status, 200);
        let doc: serde_json::Value = serde_json::from_str(&body).unwrap();
        let login = &doc["config"]["login"];
        assert_eq!(
            (&login["path"], &login["password"], login["cost"].as_f64()),
            (&serde_json::json!("/login"), &serde_json::json!("knee"), Some(1.0)),
            "{doc}"
        );
        assert_eq!(doc["config"]["paths"]["/files/x"]["session"], true, "{doc}");
    });
}
