//! Recovery after overload: `recover` at once, `slow` after its time, `stuck` until reset.

use crate::common;

use std::time::{Duration, Instant};

use common::{closed_loop, get, ms, serve, stats};

/// S = 10 ms flat; more than 4 in flight for 0.3 s is an overload; degraded means 4x slower. The target,
/// its address and a runtime.
fn server(mode: &str) -> (knee_demo_target::Server, std::net::SocketAddr, tokio::runtime::Runtime) {
    serve(&format!(
        "lambda = 100.0\nsigma = 0.0\nkappa = 0.0\n[recovery]\nmode = \"{mode}\"\nthreshold = 4\nafter_s = 0.3\nfactor = 4.0\nrecover_s = 0.6\n"
    ))
}

fn one_client_rate(rt: &tokio::runtime::Runtime, addr: std::net::SocketAddr) -> f64 {
    rt.block_on(closed_loop(addr, "/", 1, ms(0), ms(500), ms(2000))).rate()
}

fn overload(rt: &tokio::runtime::Runtime, addr: std::net::SocketAddr) {
    rt.block_on(closed_loop(addr, "/", 8, ms(0), ms(700), ms(2000)));
}

fn near(got: f64, want: f64) -> bool {
    (got - want).abs() / want < 0.15
}

#[test]
fn stuck_stays_degraded_after_load_stops_until_reset() {
    let (_s, addr, rt) = server("stuck");
    let before = one_client_rate(&rt, addr);
    assert!(near(before, 100.0), "{before}");
    overload(&rt, addr);
    std::thread::sleep(Duration::from_millis(300));
    let st = rt.block_on(stats(addr));
    assert_eq!(
        (st["state"].as_str(), st["times_degraded"].as_u64()),
        (Some("degraded"), Some(1)),
        "{st}"
    );
    let after = one_client_rate(&rt, addr);
    assert!(
        near(after, 25.0),
        "stuck: 4x slower after the load is gone, got {after}"
    );
    assert_eq!(rt.block_on(stats(addr))["state"], "degraded");
    assert_eq!(rt.block_on(get(addr, "POST", "/admin/reset")).0, 200);
    let reset = one_client_rate(&rt, addr);
    assert!(near(reset, 100.0), "back to normal after reset, got {reset}");
    assert_eq!(rt.block_on(stats(addr))["state"], "normal");
}

#[test]
fn slow_recovers_within_its_configured_time() {
    let (_s, addr, rt) = server("slow");
    overload(&rt, addr);
    let load_gone = Instant::now();
    assert_eq!(rt.block_on(stats(addr))["state"], "degraded");
    let mut recovered = None;
    while load_gone.elapsed() < Duration::from_secs(3) {
        if rt.block_on(stats(addr))["state"] == "normal" {
            recovered = Some(load_gone.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let took = recovered.expect("slow mode recovers");
    assert!(
        took >= Duration::from_millis(500) && took < Duration::from_millis(1000),
        "recover_s = 0.6, took {took:?}"
    );
    let rate = one_client_rate(&rt, addr);
    assert!(near(rate, 100.0), "{rate}");
}

#[test]
fn recover_mode_is_normal_as_soon_as_load_drops() {
    let (_s, addr, rt) = server("recover");
    overload(&rt, addr);
    let st = rt.block_on(stats(addr));
    assert_eq!(
        (st["state"].as_str(), st["degraded"].as_bool()),
        (Some("normal"), Some(false)),
        "{st}"
    );
    let rate = one_client_rate(&rt, addr);
    assert!(near(rate, 100.0), "{rate}");
}
