"""gRPC groups (`knee run grpc://…`, `kind = "grpc"`) against grpcio's server, whose messages were compiled by the
real protoc and which counts the calls and messages it was sent and sent back (tests/grpcserver.py): knee's counts
are the server's for every kind of call, a status other than OK is `grpc_status` with its name and the server's
message, the level search finds a limit that answers RESOURCE_EXHAUSTED, and bad input is one sentence before any
load."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from knee.model import RunRecord

from conftest import knee_cli
from conftest import knee_record as run
from grpcserver import PROTO, PROTO_DIR, GrpcServer, start_grpc_server
from pki import Pki
from servers import sent, settled

HELLO = '{"name": {"first": "ann"}, "times": 3}'


@pytest.fixture(scope="module")
def server() -> Iterator[GrpcServer]:
    with start_grpc_server() as s:
        yield s


def delta(server: GrpcServer, before: dict, key: str, method: str) -> int:
    return server.stats()[key].get(method, 0) - before[key].get(method, 0)


def seen_calls(server: GrpcServer, before: dict, record: RunRecord, method: str) -> int:
    """The calls of `method` the server counted since `before`: every call of the run that ended (its steps', its
    warm-ups', its probes'), and of those abandoned in flight at a step's end (their streams reset) some or none."""
    n = sent(record)
    abandoned = sum(g.abandoned for s in record.steps for g in s.groups.values())
    seen = settled(lambda: delta(server, before, "calls", method), n)
    assert n - abandoned <= seen <= n, (seen, n, abandoned)
    return seen


# 200 clients: at least 4 calls each in 2 s from a Python server (27 to 29 each alone here, about 9 with six workers
# beside it).
# Alone, not serial: that server takes a whole core, and in the serial pass (ci84) three tests beside it that measure
# failed (a demo service's per-second rates, its warm-up, the lag test's late arrivals).
@pytest.mark.parametrize("clients", [1, pytest.param(200, marks=pytest.mark.alone)])
def test_unary_calls_are_the_calls_the_server_answered(server: GrpcServer, tmp_path: Path, clients: int) -> None:
    before = server.stats()
    record = run(tmp_path, server.url(), "--proto", str(PROTO), "--message", HELLO, "-c", str(clients), "-d", "2s")
    g = record.steps[0].groups["main"]
    assert g.failed == g.hung == 0, g
    # each client made several calls on its one channel (a count per client, not a rate the machine must reach)
    assert len(g.per_client) == clients and min(g.per_client) >= 4, g.per_client
    # every call that ended reached the server (the at-rest probes too), each one message each way; a call in
    # flight at the end is abandoned: knee resets its stream, and grpcio drops one it had not yet handed to its
    # handler, so the server counts between the calls that ended and all it was sent
    seen = seen_calls(server, before, record, "SayHello")
    assert delta(server, before, "received", "SayHello") == seen
    # knee counts the messages of the calls that ended (the one in flight at the end, abandoned, is not among them)
    assert g.messages_sent == g.succeeded + g.failed and g.messages_received == g.succeeded, g
    assert g.payload_bytes == g.succeeded * len(b"\x00\x00\x00\x00\x0b\x0a\x09hello ann\x10\x03"), g
    # the latency is the call's: the clients are the rate × the mean latency (Little's law)
    assert g.rate_hz * g.latency_ms.mean / 1000 == pytest.approx(clients, rel=0.25), (g.rate_hz, g.latency_ms)


@pytest.mark.parametrize(
    ("method", "extra", "each_way"),
    [
        ("LotsOfReplies", [], (1, 3)),  # server streaming: `times` replies
        ("LotsOfGreetings", ["--stream-messages", "5"], (5, 1)),  # client streaming: one reply with the count
        ("BidiHello", ["--stream-messages", "4"], (4, 4)),  # bidirectional: a reply to each
    ],
)
def test_streaming_calls_count_every_message_each_way(
    server: GrpcServer, tmp_path: Path, method: str, extra: list[str], each_way: tuple[int, int]
) -> None:
    before = server.stats()
    record = run(tmp_path, server.url(method), "--proto", str(PROTO), "--message", HELLO, "-c", "4", "-n", "60", *extra)
    g = record.steps[0].groups["main"]
    assert g.succeeded == 60 and g.failed == g.hung == 0, g
    calls = 60 + record.probes
    assert settled(lambda: delta(server, before, "calls", method), calls) == calls
    out, back = each_way
    assert delta(server, before, "received", method) == out * calls
    assert delta(server, before, "sent", method) == back * calls
    assert (g.messages_sent, g.messages_received) == (out * 60, back * 60), g


def test_messages_spaced_in_time_within_a_stream(server: GrpcServer, tmp_path: Path) -> None:
    """--stream-interval: a bidirectional call's 4 messages 40 ms apart; the first reply comes before the call's
    end (the replies stream as the messages go), and the call lasts the three pauses at least."""
    before = server.stats()
    record = run(
        tmp_path, server.url("BidiHello"), "--proto", str(PROTO), "--message", HELLO, "--stream-messages", "4",
        "--stream-interval", "40ms", "-c", "4", "-n", "20",
    )  # fmt: skip
    g = record.steps[0].groups["main"]
    assert g.succeeded == 20 and g.failed == 0, g.reasons
    assert (g.messages_sent, g.messages_received) == (80, 80), g
    assert delta(server, before, "received", "BidiHello") == 4 * (20 + record.probes)
    # every call's first reply came before its last message went (120 ms in), not at the call's end
    assert g.latency_ms.min >= 120 and g.ttfb_ms.max < 120, (g.latency_ms, g.ttfb_ms)


def test_a_status_other_than_ok_is_grpc_status_with_its_name_and_message(server: GrpcServer, tmp_path: Path) -> None:
    fail = '{"name": {"first": "fail"}}'
    record = run(tmp_path, server.url(), "--proto", str(PROTO), "--message", fail, "-c", "2", "-n", "20")
    g = record.steps[0].groups["main"]
    assert g.failures == {"grpc_status": 20} and g.succeeded == 0, g
    (reason,) = g.reasons
    assert reason.sample == "INVALID_ARGUMENT: no such name: fail", reason
    assert g.messages_received == 0, g


def test_expect_message_reads_the_response_s_json(server: GrpcServer, tmp_path: Path) -> None:
    args = ("--proto", str(PROTO), "--message", HELLO, "-c", "2", "-n", "10")
    record = run(tmp_path / "a", server.url("LotsOfReplies"), *args, "--expect-message", '"n": ?2')
    assert record.steps[0].groups["main"].succeeded == 10
    record = run(tmp_path / "b", server.url(), *args, "--expect-message", "hello bob")
    g = record.steps[0].groups["main"]
    assert g.failures == {"body": 10}, g
    assert g.reasons[0].sample.startswith("response does not match expect_message"), g.reasons
    assert "hello ann" in g.reasons[0].sample


def test_a_deadline_the_server_cannot_meet_is_deadline_exceeded(tmp_path: Path) -> None:
    with start_grpc_server(delay_ms=300) as slow:
        record = run(
            tmp_path, slow.url(), "--proto", str(PROTO), "--message", HELLO, "--deadline", "50ms", "-c", "2", "-n", "4"
        )
    g = record.steps[0].groups["main"]
    assert g.failures == {"grpc_status": 4}, g
    assert g.reasons[0].sample.startswith("DEADLINE_EXCEEDED"), g.reasons
    assert g.latency_ms.count == 0 and g.failed_latency_ms.max < 250, g.failed_latency_ms


def test_the_level_search_finds_a_limit_that_answers_resource_exhausted(tmp_path: Path) -> None:
    with start_grpc_server(limit=6, delay_ms=20) as limited:
        record = run(
            tmp_path, limited.url(), "--proto", str(PROTO), "--message", HELLO, "--levels", "auto", "--max-level", "32",
            "-d", "1s", "--no-recovery", command="sweep",
        )  # fmt: skip
    v = record.verdicts[0]
    assert v.error_onset_level == 7, v.sentences
    onset = next(s for s in record.steps if s.level == 7)
    (reason,) = onset.groups["main"].reasons
    assert reason.class_ == "grpc_status" and reason.sample == "RESOURCE_EXHAUSTED: more than 6 calls at once"


def test_a_scenario_file_with_a_templated_message_and_imports(server: GrpcServer, tmp_path: Path) -> None:
    scenario = tmp_path / "grpc.toml"
    scenario.write_text(
        f'[groups.main]\nkind = "grpc"\nurl = "{server.url()}"\nproto = "{PROTO}"\ninclude = ["{PROTO_DIR}"]\n'
        'message = { name = { first = "c${client}" }, tags = ["a", "b"] }\nexpect_message = "hello c[0-9]"\n'
        'clients = "level"\nheaders = { "x-run" = "knee" }\n'
        '[sweep]\nlevels = [1, 4]\nduration = "1s"\n[recovery]\nenabled = false\n'
    )
    before = server.stats()
    record = run(tmp_path / "runs", str(scenario), command="sweep")
    assert [s.level for s in record.steps if s.phase == "sweep"] == [1, 4]
    assert all(s.groups["main"].failed == 0 and s.groups["main"].succeeded > 0 for s in record.steps)
    seen_calls(server, before, record, "SayHello")


def test_a_protoset_compiled_by_protoc(server: GrpcServer, tmp_path: Path) -> None:
    from grpc_tools import protoc

    protoset = tmp_path / "hello.protoset"
    assert protoc.main(["protoc", f"-I{PROTO_DIR}", "--include_imports", f"-o{protoset}", str(PROTO)]) == 0
    record = run(tmp_path / "runs", server.url(), "--protoset", str(protoset), "--message", HELLO, "-n", "20")
    assert record.steps[0].groups["main"].succeeded == 20


def test_reflect_asks_the_server_for_the_types(tmp_path: Path) -> None:
    """--reflect: the service's file and the one it imports (names.proto) from grpcio's reflection service; a server
    without one is one sentence, before any call."""
    with start_grpc_server(reflection=True) as reflecting:
        record = run(
            tmp_path / "a", reflecting.url("BidiHello"), "--reflect", "--stream-messages", "2", "--message", HELLO,
            "-n", "20",
        )  # fmt: skip
        g = record.steps[0].groups["main"]
        assert g.succeeded == 20 and (g.messages_sent, g.messages_received) == (40, 40), g
        assert reflecting.stats()["calls"]["BidiHello"] == 20 + record.probes
        # --connect-to: the types asked of, and the calls made to, the address it names (the URL's name resolves
        # nowhere)
        url = reflecting.url("SayHello").replace("127.0.0.1", "grpc.knee.test")
        record = run(tmp_path / "c", url, "--reflect", "--connect-to", "127.0.0.1", "--message", HELLO, "-n", "5")
        assert record.steps[0].groups["main"].succeeded == 5
    with start_grpc_server() as plain:
        proc = knee_cli("run", plain.url(), "--reflect", "-n", "1", "--out", str(tmp_path / "b"), timeout=60)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "has no reflection service (UNIMPLEMENTED)" in proc.stderr and "Traceback" not in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert plain.stats()["calls"] == {}


def test_reflect_sends_the_group_s_metadata(tmp_path: Path) -> None:
    with start_grpc_server(reflection=True, key="k1") as keyed:
        record = run(tmp_path / "a", keyed.url(), "--reflect", "-H", "x-key: k1", "--message", HELLO, "-n", "10")
        assert record.steps[0].groups["main"].succeeded == 10
        proc = knee_cli("run", keyed.url(), "--reflect", "-n", "1", "--out", str(tmp_path / "b"), timeout=60)
        assert proc.returncode == 2 and "its reflection call ended UNAUTHENTICATED" in proc.stderr, proc.stderr


def test_a_call_the_server_ends_early_does_not_wait_for_its_next_message(tmp_path: Path) -> None:
    """--stream-interval 1s against a server that refuses past one call at once: a refused call fails as soon as
    the server's trailers come, not after the pause before its next message."""
    with start_grpc_server(limit=1) as one:
        record = run(
            tmp_path, one.url("BidiHello"), "--proto", str(PROTO), "--message", HELLO, "--stream-messages", "3",
            "--stream-interval", "1s", "-c", "4", "-n", "8",
        )  # fmt: skip
    g = record.steps[0].groups["main"]
    assert g.failures.get("grpc_status", 0) > 0 and g.succeeded > 0, g
    # a refused call ends well before the 1 s pause would have ended it
    assert g.failed_latency_ms.max < 900 and g.latency_ms.min >= 2000, (g.failed_latency_ms, g.latency_ms)


def test_a_proto_outside_the_include_directories_is_found_in_its_own(server: GrpcServer, tmp_path: Path) -> None:
    """-I names where imports are; the file given by --proto need not be under it (protoc's rule is stricter)."""
    record = run(tmp_path, server.url(), "--proto", str(PROTO), "-I", str(tmp_path), "--message", HELLO, "-n", "5")
    assert record.steps[0].groups["main"].succeeded == 5


def test_grpcs_with_a_client_certificate(pki: Pki, tmp_path: Path) -> None:
    cas = tmp_path / "cas.pem"
    cas.write_text(Path(pki.path("root.pem")).read_text() + Path(pki.path("intermediate.pem")).read_text())
    with start_grpc_server(tls=(pki.path("server-chain.pem"), pki.path("server.key"), str(cas))) as server:
        mine = ("--cacert", pki.path("root.pem"), "--cert", pki.path("client-chain.pem"))
        mine += ("--key", pki.path("client.key"))
        record = run(tmp_path / "a", server.url(), "--proto", str(PROTO), "-c", "4", "-n", "100", *mine)
        g = record.steps[0].groups["main"]
        assert g.succeeded == 100 and g.failed == 0, g
        assert g.tls_ms.count == 4, g  # one handshake a connection: four clients keep theirs
        assert server.stats()["calls"]["SayHello"] == 100 + record.probes


def test_connections_are_shared_by_the_clients_as_asked(server: GrpcServer, tmp_path: Path) -> None:
    args = ("--proto", str(PROTO), "--message", HELLO, "-c", "12", "-n", "240")
    for out, how, opened in (("a", [], 12), ("b", ["--connections", "2"], 2), ("c", ["--streams", "4"], 3)):
        record = run(tmp_path / out, server.url(), *args, *how)
        g = record.steps[0].groups["main"]
        assert g.succeeded == 240 and g.connect_ms.count == opened, (how, g)


def test_an_open_loop_of_calls(server: GrpcServer, tmp_path: Path) -> None:
    before = server.stats()
    record = run(tmp_path, server.url(), "--proto", str(PROTO), "--message", HELLO, "--rate", "300", "-c", "8",
                 "-d", "2s", "--interval", "100ms")  # fmt: skip
    g = record.steps[0].groups["main"]
    o = g.open_loop
    assert o is not None and o.offered == 600 and g.started + o.dropped == 600, o
    # no arrival was dropped but those due in the window's last 100 ms (a stall of the one-threaded server there
    # leaves them unstarted at its end)
    assert g.failed == g.hung == 0 and all(p.dropped == 0 for p in g.series[:-1]), g
    seen_calls(server, before, record, "SayHello")


def test_a_data_source_fills_the_message(server: GrpcServer, tmp_path: Path) -> None:
    """A CSV's rows in the JSON message: each call's name is a row's (in turn)."""
    users = tmp_path / "users.csv"
    users.write_text("first\n" + "".join(f"u{i}\n" for i in range(30)))
    record = run(
        tmp_path / "runs", server.url(), "--proto", str(PROTO), "--message", '{"name": {"first": "${users.first}"}}',
        "--data", f"users={users}", "--expect-message", '"hello u[0-9]+"', "-c", "3",
        "-n", "30",
    )  # fmt: skip
    g = record.steps[0].groups["main"]
    assert g.succeeded == 30 and g.failed == 0, g.reasons


def test_json_output_carries_the_messages(server: GrpcServer, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    proc = knee_cli("run", server.url("BidiHello"), "--proto", str(PROTO), "--stream-messages", "3", "-n", "10",
                    "--json", str(out), timeout=60)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    r = json.loads(out.read_text())
    assert (r["messages_sent"], r["messages_received"]) == (30, 30), r
    assert "Messages:                   30 received, 30 sent" in proc.stdout


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["grpc://127.0.0.1:9/knee.hello.Greeter/SayHello"], "needs the method's types: --proto FILE"),
        (["LIVE/SayHello", "--proto", "P", "--reflect"], "one of them"),
        (["grpc://127.0.0.1/knee.hello.Greeter/SayHello", "--proto", "P"], "must name a port"),
        (["grpc://127.0.0.1:9/SayHello", "--proto", "P"], "must name the method after the port"),
        (["LIVE/Bye", "--proto", "P"], 'knee.hello.Greeter has no method "Bye" (it has: SayHello, LotsOfReplies'),
        (["LIVE/SayHello", "--proto", "P", "--message", '{"nme": 1}'], "unrecognized field name 'nme'"),
        (["LIVE/SayHello", "--proto", "P", "--message", '{"times": "x"}'], "knee.hello.HelloRequest"),
        (["LIVE/SayHello", "--proto", "P", "--message", "{"], "is not JSON"),
        (["LIVE/SayHello", "--proto", "P", "--stream-messages", "2"], "it is not client-streaming"),
        (["LIVE/BidiHello", "--proto", "P", "--stream-interval", "10ms"], "give --stream-messages too"),
        (["LIVE/BidiHello", "--proto", "P", "--stream-messages", "3", "--stream-interval", "0.2ms"], "below 1 ms"),
        (
            ["LIVE/BidiHello", "--proto", "P", "--stream-messages", "4", "--stream-interval", "1s", "--timeout", "2s"],
            "every call would be hung",
        ),
        (["LIVE/BidiHello", "--proto", "P", "--stream-messages", "100001"], "100000"),
        (["LIVE/SayHello", "--protoset", "DIR"], "cannot be read"),
        (["LIVE/SayHello", "--proto", "P", "-H", "no colon"], "-H must look like 'Name: value'"),
        (["LIVE/SayHello", "--proto", "/nonexistent.proto"], "'/nonexistent.proto' does not exist"),
        (["LIVE/SayHello", "--proto", "BAD"], "bad.proto:3:"),
        (["LIVE/SayHello", "--proto", "P", "--cert", "c.pem"], "--cert applies to grpcs:// URLs only"),
        (["LIVE/SayHello", "--proto", "P", "--http2"], "--http2 applies to http(s):// targets only"),
        (["http://127.0.0.1:9/", "--proto", "P"], "--proto applies to grpc(s):// targets only"),
    ],
)
def test_bad_input_is_one_sentence_before_any_load(
    server: GrpcServer, tmp_path: Path, args: list[str], said: str
) -> None:
    bad = tmp_path / "bad.proto"
    bad.write_text('syntax = "proto3";\nmessage A {\n  strin name = 1;\n}\n')
    live = server.url().rsplit("/", 1)[0]
    swap = {"P": str(PROTO), "BAD": str(bad), "DIR": str(tmp_path)}
    args = [swap.get(a, a.replace("LIVE", live)) for a in args]
    before = server.stats()
    proc = knee_cli("run", *args, "-n", "1", "--out", str(tmp_path / "runs"), timeout=60)
    assert server.stats()["calls"] == before["calls"]  # no load
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert said in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
