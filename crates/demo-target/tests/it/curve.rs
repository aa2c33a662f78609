//! The measured closed-loop throughput follows the configured USL curve.

use crate::common;

use common::{closed_loop, ms, runtime, start, stats};

#[test]
fn closed_loop_rate_follows_usl_within_10_percent() {
    // S(1) = 20 ms, N* = sqrt(0.9/0.01) ≈ 9.5: the curve rises, peaks and falls over 1..20 clients.
    let server = start("lambda = 50.0\nsigma = 0.1\nkappa = 0.01\n");
    let cfg = server.config().clone();
    let addr = server.http_addr();
    let rt = runtime();
    let mut rates = Vec::new();
    for n in [1usize, 5, 10, 20] {
        server.reset();
        let run = rt.block_on(closed_loop(addr, "/", n, ms(500), ms(2000), ms(5000)));
        let want = cfg.usl_rate(n);
        let got = run.rate();
        eprintln!("N={n}: measured {got:.1}/s, USL {want:.1}/s");
        assert!(
            (got - want).abs() / want < 0.10,
            "N={n}: measured {got:.1}/s, USL says {want:.1}/s"
        );
        assert_eq!(run.status_503 + run.status_504 + run.other + run.gave_up, 0, "{run:?}");
        let s = rt.block_on(stats(addr));
        assert_eq!(
            s["served"].as_u64(),
            Some(run.ok),
            "server's count differs from the client's: {s}"
        );
        assert_eq!(s["in_flight"].as_u64(), Some(0));
        assert!(s["max_in_flight"].as_u64().unwrap() <= n as u64);
        rates.push(got);
    }
    // Past the peak the rate falls.
    assert!(rates[2] > rates[3] && rates[2] > rates[0]);
}

#[test]
fn path_cost_and_body_size_apply() {
    let server = start(
        "lambda = 50.0\nsigma = 0.0\nkappa = 0.0\n[paths.\"/cheap\"]\ncost = 0.5\n[paths.\"/big\"]\nbytes = 100000\n",
    );
    let addr = server.http_addr();
    let rt = runtime();
    let cheap = rt.block_on(closed_loop(addr, "/cheap", 1, ms(200), ms(1000), ms(2000)));
    assert!(
        (cheap.rate() - 100.0).abs() < 10.0,
        "cost 0.5 should double the rate: {:.1}",
        cheap.rate()
    );
    let (status, len) = rt.block_on(async {
        let mut c = common::Conn::open(addr).await.unwrap();
        c.request("GET", "/big").await.unwrap()
    });
    assert_eq!((status, len), (200, 100_000));
}
