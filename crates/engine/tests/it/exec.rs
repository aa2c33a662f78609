//! Exec clients: real processes, process-group kills, nothing left running.

use crate::common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::*;
use knee_engine::{run, Engine, ErrorClass, Spec};
use serde_json::{json, Value};

fn exec(argv: &[&str]) -> serde_json::Value {
    json!({"kind": "exec", "argv": argv})
}

#[test]
fn true_succeeds_and_false_is_exit_code() {
    let r = run(one_group(2, json!({"total": 40}), exec(&["/bin/true"]))).unwrap();
    let g = &r.groups[0];
    assert_eq!(succeeded_failed_hung(g), (40, 0, 0));
    assert_eq!(g.counts.kind, "exec");
    assert_eq!(g.latency.len(), 40);
    assert_eq!(g.connect.len(), 0);

    let r = run(one_group(2, json!({"per_client": 3}), exec(&["/bin/false"]))).unwrap();
    let g = &r.groups[0];
    assert_eq!((g.counts.outcomes.succeeded, g.counts.outcomes.failed), (0, 6));
    assert_eq!(g.failures_of(ErrorClass::ExitCode), 6);
    assert_eq!(g.counts.per_client, vec![0, 0]);
    // Failures are timed apart: the latency histogram (and its table) holds successes only.
    assert_eq!((g.latency.len(), g.failed_latency.len()), (0, 6));
    let s = summary(&r);
    assert_eq!(s["groups"][0]["latency_us"]["count"], json!(0));
    assert_eq!(s["groups"][0]["failed_latency_us"]["count"], json!(6));
    assert_eq!(s["groups"][0]["percentiles"], json!([]));
}

#[test]
fn think_on_failure_paces_failing_clients_only() {
    // 2 clients for 600 ms of a command that fails at once: each waits 100 ms after every failure,
    // so at most 2 × (600 / 100 + 1) failures, where a spinning client makes hundreds.
    let mut s = one_group(2, json!({"duration_ms": 600}), exec(&["/bin/false"]));
    s.groups[0].think_on_failure_ms = 100;
    let r = run(s).unwrap();
    let failed = r.groups[0].counts.outcomes.failed;
    assert!((2..=14).contains(&failed), "{}", r.summary_json());
    let r = run(one_group(2, json!({"duration_ms": 600}), exec(&["/bin/false"]))).unwrap();
    assert!(r.groups[0].counts.outcomes.failed > 14 * 3, "{}", r.summary_json());
    // Successes are not paused.
    let mut s = one_group(2, json!({"duration_ms": 600}), exec(&["/bin/true"]));
    s.groups[0].think_on_failure_ms = 100;
    let r = run(s).unwrap();
    assert!(r.groups[0].counts.outcomes.succeeded > 14 * 3, "{}", r.summary_json());
}

#[test]
fn missing_command_is_spawn_with_the_os_message() {
    let r = run(one_group(
        1,
        json!({"total": 3}),
        exec(&["/nonexistent/knee-no-such-cmd"]),
    ))
    .unwrap();
    let g = &r.groups[0];
    assert_eq!(g.failures_of(ErrorClass::Spawn), 3);
    let msg = &g.error_samples(ErrorClass::Spawn)[0];
    assert!(
        msg.contains("knee-no-such-cmd") && msg.contains("No such file"),
        "{msg}"
    );
}

#[test]
fn signal_exit_is_classed_signal() {
    let r = run(one_group(
        1,
        json!({"total": 2}),
        exec(&["/bin/sh", "-c", "kill -TERM $$"]),
    ))
    .unwrap();
    assert_eq!(r.groups[0].failures_of(ErrorClass::Signal), 2, "{}", r.summary_json());
}

#[test]
fn stdout_and_stderr_checks() {
    let mut c = exec(&["/bin/sh", "-c", "echo client=${client} it=${iteration}; echo oops >&2"]);
    c["expect_stdout"] = json!(r"^client=\d it=\d\n$");
    c["expect_stderr"] = json!("oops");
    let r = run(one_group(2, json!({"per_client": 4}), c.clone())).unwrap();
    assert_eq!(r.groups[0].counts.outcomes.succeeded, 8, "{}", r.summary_json());

    c["expect_stdout"] = json!("client=7");
    let r = run(one_group(2, json!({"per_client": 2}), c.clone())).unwrap();
    assert_eq!(r.groups[0].failures_of(ErrorClass::Stdout), 4);

    c["expect_stdout"] = json!("client");
    c["expect_stderr"] = json!("^fine$");
    let r = run(one_group(2, json!({"per_client": 2}), c)).unwrap();
    assert_eq!(r.groups[0].failures_of(ErrorClass::Stderr), 4);
}

#[test]
fn file_check_substitutes_client_and_iteration() {
    let dir = temp_dir("file");
    let d = dir.display();
    // Client 1 writes an empty file, so only client 0 passes the min_size check.
    let mut c = exec(&[
        "/bin/sh",
        "-c",
        "if [ \"$C\" = 0 ]; then echo data > \"$F\"; else : > \"$F\"; fi",
    ]);
    c["env"] = json!([["C", "${client}"], ["F", format!("{d}/out-${{client}}-${{iteration}}")]]);
    c["expect_file"] = json!({"path": format!("{d}/out-${{client}}-${{iteration}}"), "min_size": 1});
    let r = run(one_group(2, json!({"per_client": 3}), c)).unwrap();
    let g = &r.groups[0];
    assert_eq!(g.counts.per_client, vec![3, 0], "{}", r.summary_json());
    assert_eq!(g.failures_of(ErrorClass::File), 3);
    for i in 0..3 {
        assert!(dir.join(format!("out-0-{i}")).exists());
        assert!(dir.join(format!("out-1-{i}")).exists());
    }
    let mut c = exec(&["/bin/true"]);
    c["expect_file"] = json!({"path": format!("{d}/never-${{client}}")});
    let r = run(one_group(1, json!({"total": 1}), c)).unwrap();
    assert!(r.groups[0].error_samples(ErrorClass::File)[0].contains("never-0"));
    let _ = std::fs::remove_dir_all(dir);
}

fn pids_in(path: &std::path::Path) -> Vec<i32> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// A fresh temporary directory and a one-group spec of `clients` exec clients, each running a shell that
/// appends its pid and that of a 30 s sleep it starts to `pids-<client>` in that directory, then waits.
fn sleepers(tag: &str, clients: u64, stop: Value) -> (PathBuf, Spec) {
    let dir = temp_dir(tag);
    let pidfile = dir.join("pids-${client}");
    let script = format!("echo $$ >> {p}; sleep 30 & echo $! >> {p}; wait", p = pidfile.display());
    (dir, one_group(clients, stop, exec(&["/bin/sh", "-c", &script])))
}

/// The pids that the `clients` sleepers wrote to `dir` number `want`, and every one of them is gone
/// (after at most 2 s of waiting for the kills to land); `dir` is removed.
fn assert_killed(dir: PathBuf, clients: u64, want: usize) {
    let mut pids = Vec::new();
    for c in 0..clients {
        pids.extend(pids_in(&dir.join(format!("pids-{c}"))));
    }
    assert_eq!(
        pids.len(),
        want,
        "shell and sleep pids of {} operations: {pids:?}",
        want / 2
    );
    wait_until(Duration::from_secs(2), || pids.iter().all(|&p| not_running(p)));
    for pid in pids {
        assert!(not_running(pid), "pid {pid} still runs");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn timeout_kills_the_whole_process_group_and_counts_hung() {
    let (dir, mut s) = sleepers("hung", 2, json!({"per_client": 2}));
    s.groups[0].timeout_ms = 300;
    let t = Instant::now();
    let r = run(s).unwrap();
    assert!(t.elapsed() < Duration::from_secs(3), "took {:?}", t.elapsed());
    let g = &r.groups[0];
    assert_eq!(succeeded_failed_hung(g), (0, 0, 4), "{}", r.summary_json());
    assert_eq!(g.counts.hung_clients, vec![0, 1]);
    assert_killed(dir, 2, 8);
}

#[test]
fn stop_from_another_thread_kills_every_process_group() {
    let (dir, mut s) = sleepers("stop", 4, json!({"duration_ms": 60_000}));
    s.groups[0].timeout_ms = 60_000;
    let engine = std::sync::Arc::new(Engine::start(s).unwrap());
    // Every client's shell has started its sleep (both pids written), however busy the machine.
    let written = || (0..4).all(|c| pids_in(&dir.join(format!("pids-{c}"))).len() == 2);
    assert!(
        wait_until(Duration::from_secs(10), written),
        "the 4 clients never started"
    );
    assert_eq!(engine.snapshot().groups[0].in_flight, 4);
    let e2 = engine.clone();
    let t = Instant::now();
    std::thread::spawn(move || e2.stop()).join().unwrap();
    assert!(
        engine.wait(Some(Duration::from_secs(5))),
        "engine did not finish after stop"
    );
    assert!(t.elapsed() < Duration::from_secs(2), "stop took {:?}", t.elapsed());
    let r = engine.result().unwrap();
    assert!(r.span.stopped);
    let o = &r.groups[0].counts.outcomes;
    assert_eq!(o.succeeded + o.failed + o.hung, 0);
    assert_killed(dir, 4, 8);
}

#[test]
fn dropping_a_running_engine_kills_its_processes() {
    let (dir, s) = sleepers("drop", 1, json!({"total": 1}));
    let engine = Engine::start(s).unwrap();
    assert!(
        wait_until(Duration::from_secs(10), || pids_in(&dir.join("pids-0")).len() == 2),
        "the client never started"
    );
    let t = Instant::now();
    drop(engine);
    assert!(t.elapsed() < Duration::from_secs(2), "drop took {:?}", t.elapsed());
    assert_killed(dir, 1, 2);
}

/// A CLI that says why it failed on stderr (psql, lcg-ls …): the reason is its last line there,
/// grouped by message with numbers masked; with nothing on stderr, the last line of stdout.
#[test]
fn a_failing_command_gives_its_last_stderr_line_as_the_reason() {
    let script = "echo connecting to db-$1 >&2; echo 'FATAL:  sorry, too many clients already' >&2; exit 2";
    let r = run(one_group(
        2,
        json!({"per_client": 5}),
        exec(&["/bin/sh", "-c", script, "sh", "${client}"]),
    ))
    .unwrap();
    let g = &r.groups[0];
    assert_eq!(g.failures_of(ErrorClass::ExitCode), 10);
    assert_eq!(g.reasons.list.len(), 1, "{:?}", g.reasons);
    let reason = &g.reasons.list[0];
    assert_eq!(reason.count, 10);
    assert_eq!(
        reason.key,
        "/bin/sh exited with code 2: FATAL: sorry, too many clients already"
    );
    assert_eq!(
        reason.sample,
        "/bin/sh exited with code 2: FATAL:  sorry, too many clients already"
    );

    let r = run(one_group(
        1,
        json!({"total": 3}),
        exec(&["/bin/sh", "-c", "echo 'no space left on /dev/sda1'; exit 1"]),
    ))
    .unwrap();
    let reason = &r.groups[0].reasons.list[0];
    assert_eq!(reason.key, "/bin/sh exited with code 1: no space left on /dev/sda<n>");
    assert_eq!(reason.count, 3);
}

/// The payload of an exec operation: its stdout (`bytes_from = "stdout"`) or a file it leaves.
#[test]
fn exec_bytes_come_from_stdout_or_a_file() {
    let mut c = exec(&["/bin/sh", "-c", "head -c 3000 /dev/zero"]);
    c["bytes_from"] = json!("stdout");
    let r = run(one_group(2, json!({"total": 6}), c)).unwrap();
    let g = &r.groups[0];
    let c = &g.counts;
    assert_eq!(
        (c.outcomes.succeeded, c.payload_bytes, c.bytes_received),
        (6, 18_000, 18_000)
    );

    let dir = temp_dir("bytes");
    let d = dir.to_str().unwrap();
    let mut c = exec(&[
        "/bin/sh",
        "-c",
        &format!("head -c 1234 /dev/zero > {d}/f-$0"),
        "${client}",
    ]);
    c["expect_file"] = json!({"path": format!("{d}/f-${{client}}"), "min_size": 1});
    let r = run(one_group(2, json!({"per_client": 2}), c)).unwrap();
    let g = &r.groups[0];
    let c = &g.counts;
    assert_eq!(
        (c.outcomes.succeeded, c.payload_bytes, c.bytes_received),
        (4, 4 * 1234, 0)
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// A command that exits and leaves a process holding its output open (`sleep 300 &`) is done when it exits: the
/// group is killed then, and the operation succeeds at once (it waited for the pipes until its timeout: hung).
#[test]
fn a_command_s_leftover_holding_its_output_does_not_hold_the_operation() {
    let mut s = one_group(2, json!({"total": 4}), exec(&["sh", "-c", "sleep 300 & echo ok"]));
    s.groups[0].timeout_ms = 3000;
    let t = Instant::now();
    let r = run(s).unwrap();
    assert_eq!(succeeded_failed_hung(&r.groups[0]), (4, 0, 0), "{}", r.summary_json());
    assert!(t.elapsed() < Duration::from_secs(2), "took {:?}", t.elapsed());
}
