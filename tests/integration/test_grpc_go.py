"""gRPC against grpc-go's own example servers, built unmodified from the Go module proxy by `make ci-deps`
(bench/install.sh grpc-examples): helloworld's greeter_server (unary) and route_guide's server (server streaming,
client streaming, bidirectional). They count nothing, so what is checked is what they answered: every call
succeeded, the replies' contents, and the messages each way as route_guide's rules make them (ListFeatures sends
every feature of its database inside the rectangle; RecordRoute sums the points it read; RouteChat answers each note
with every note at the same place so far, itself included)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import REPO
from conftest import knee_record as run
from servers import free_port, spawn_listening, stop_process

TOOLS = REPO / "bench" / "tools"
PROTOS = REPO / "examples" / "grpc"


@dataclass
class GoServers:
    greeter: int
    route_guide: int


@pytest.fixture(scope="module")
def go() -> Iterator[GoServers]:
    procs = []
    ports = []
    try:
        for name in ("grpc_greeter_server", "grpc_route_guide_server"):
            path = TOOLS / "bin" / name
            assert path.exists(), f"{path} is missing: run `make ci-deps` (bench/install.sh grpc-examples builds it)"
            ports.append(free_port())
            argv = [str(path), f"-port={ports[-1]}"]
            procs.append(spawn_listening(argv, ports[-1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        yield GoServers(*ports)
    finally:
        for p in procs:
            stop_process(p)


def route_guide(port: int, method: str) -> str:
    return f"grpc://127.0.0.1:{port}/routeguide.RouteGuide/{method}"


@pytest.mark.parametrize("clients", [1, 100])
def test_helloworld_answers_every_call(go: GoServers, tmp_path: Path, clients: int) -> None:
    record = run(
        tmp_path, f"grpc://127.0.0.1:{go.greeter}/helloworld.Greeter/SayHello", "--proto",
        str(PROTOS / "helloworld.proto"), "--message", '{"name": "c${client}"}', "--expect-message",
        '^\\{"message":"Hello c[0-9]+"\\}$', "-c", str(clients), "-d", "1s",
    )  # fmt: skip
    g = record.steps[0].groups["main"]
    assert g.failed == g.hung == 0, g
    # each client made several calls on its one channel (a count per client, not a rate the machine must reach)
    assert len(g.per_client) == clients and min(g.per_client) >= 4, g.per_client
    assert g.messages_received == g.succeeded and g.messages_sent == g.succeeded, g


def test_list_features_streams_every_feature_in_the_rectangle(go: GoServers, tmp_path: Path) -> None:
    lo, hi = (400_000_000, -750_000_000), (410_000_000, -740_000_000)
    features = json.loads((TOOLS / "share" / "route_guide_db.json").read_text())
    inside = sum(
        lo[0] <= f["location"]["latitude"] <= hi[0] and lo[1] <= f["location"]["longitude"] <= hi[1] for f in features
    )
    assert 0 < inside < len(features)
    rect = {"lo": {"latitude": lo[0], "longitude": lo[1]}, "hi": {"latitude": hi[0], "longitude": hi[1]}}
    record = run(
        tmp_path, route_guide(go.route_guide, "ListFeatures"), "--proto", str(PROTOS / "route_guide.proto"),
        "--message", json.dumps(rect), "-c", "4", "-n", "40",
    )  # fmt: skip
    g = record.steps[0].groups["main"]
    assert g.succeeded == 40 and g.failed == 0, g
    assert g.messages_received == 40 * inside and g.messages_sent == 40, (g.messages_received, inside)


def test_record_route_sums_the_points_it_was_sent(go: GoServers, tmp_path: Path) -> None:
    point = '{"latitude": 407838351, "longitude": -746143763}'  # a named feature of its database
    record = run(
        tmp_path, route_guide(go.route_guide, "RecordRoute"), "--proto", str(PROTOS / "route_guide.proto"),
        "--message", point, "--stream-messages", "5", "--expect-message", '"pointCount":5,"featureCount":5',
        "-c", "4", "-n", "40",
    )  # fmt: skip
    g = record.steps[0].groups["main"]
    assert g.succeeded == 40 and g.failed == 0, g.reasons
    assert (g.messages_sent, g.messages_received) == (200, 40), g


def test_route_chat_answers_each_note_with_those_at_its_place(go: GoServers, tmp_path: Path) -> None:
    # each call at a place of its own (client, iteration): its three notes get 1, 2 and 3 notes back
    note = '{"location": {"latitude": ${client}, "longitude": ${iteration}}, "message": "hi"}'
    record = run(
        tmp_path, route_guide(go.route_guide, "RouteChat"), "--proto", str(PROTOS / "route_guide.proto"),
        "--message", note, "--stream-messages", "3", "-c", "4", "-n", "40",
    )  # fmt: skip
    g = record.steps[0].groups["main"]
    assert g.succeeded == 40 and g.failed == 0, g.reasons
    assert (g.messages_sent, g.messages_received) == (120, 240), g


def test_a_method_it_does_not_have_is_unimplemented(go: GoServers, tmp_path: Path) -> None:
    """A method the .proto has but the server does not serve: UNIMPLEMENTED, grpc-go's own words."""
    proto = tmp_path / "more.proto"
    proto.write_text(
        (PROTOS / "helloworld.proto")
        .read_text()
        .replace(
            "rpc SayHello (HelloRequest) returns (HelloReply) {}",
            "rpc SayHello (HelloRequest) returns (HelloReply) {}\n  rpc SayBye (HelloRequest) returns (HelloReply) {}",
        )
    )
    record = run(tmp_path / "runs", f"grpc://127.0.0.1:{go.greeter}/helloworld.Greeter/SayBye", "--proto", str(proto),
                 "-n", "5")  # fmt: skip
    g = record.steps[0].groups["main"]
    assert g.failures == {"grpc_status": 5}, g
    assert g.reasons[0].sample.startswith("UNIMPLEMENTED: unknown method SayBye"), g.reasons
