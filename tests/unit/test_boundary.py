"""The PyO3 boundary is typed: a key renamed on one side fails here instead of falling back to a default.

- The spec: Python's `EngineSpec` with every field set (none at its default) equals the engine's own
  reading of it (`check_spec` parses with `deny_unknown_fields` and writes back every field).
- The summary and the live snapshot: the Python models forbid unknown keys and require every field,
  and their fields are exactly the keys the engine writes.
"""

from __future__ import annotations

import json

import pytest

import knee
from knee import _engine
from knee import spec as ks
from knee.engine import Engine, GroupSnapshot, Snapshot, summary
from knee.executor import Interrupts, run_step
from knee.model.engine_summary import EngineGroup, EngineLatency, EngineReason, EngineSeriesPoint, EngineSummary

FULL = ks.EngineSpec(
    threads=2,
    interval_ms=250,
    start_at_unix=1_800_000_000.5,
    groups=[
        ks.GroupSpec(
            name="web",
            clients=3,
            stop=ks.Total(total=7),
            think_ms=5,
            timeout_ms=1234,
            warmup_ms=10,
            client_offset=4,
            pacer=ks.RatePacer(rate_hz=12.5, poisson=True, max_in_flight=9),
            client=ks.HttpClient(
                url="https://127.0.0.1:8443/x",
                method="PUT",
                headers=[("X-A", "1")],
                body="b",
                body_file=None,
                insecure=True,
                new_connection=True,
                http2=False,
                expect_status=[(200, 201), (404, 404)],
                expect_body="ok",
                expect_body_regex="o+k",
                expect_length=2,
                source_addrs=["127.0.0.2", "127.0.0.3"],
            ),
        ),
        ks.GroupSpec(
            name="h2",
            clients=16,
            stop=ks.Total(total=7),
            client=ks.HttpClient(
                url="https://127.0.0.1:8443/h2",
                http2=True,
                connections=8,
                grpc=ks.GrpcCall(
                    descriptors="CgA=", method="/p.S/M", stream_messages=3, stream_interval_ms=5, expect_message='"ok"'
                ),
                tls=ks.TlsClient(
                    cert_pem="-----BEGIN CERTIFICATE-----\n…",
                    key_pem="-----BEGIN PRIVATE KEY-----\n…",
                    ca_pem="-----BEGIN CERTIFICATE-----\n…",
                    webpki_roots=False,
                    resume=False,
                    version="1.3",
                ),
            ),
        ),
        ks.GroupSpec(
            name="tcp",
            clients=1,
            stop=ks.PerClient(per_client=2),
            client=ks.TcpClient(addr="127.0.0.1:9", send="PING\n", expect="PONG", source_addrs=["127.0.0.4"]),
        ),
        ks.GroupSpec(
            name="cli",
            clients=2,
            stop=ks.DurationMs(duration_ms=300),
            client=ks.ExecClient(
                argv=["/bin/true", "${client}"],
                env=[("A", "${iteration}")],
                cwd="/tmp",
                expect_stdout="x",
                expect_stderr="y",
                expect_file=ks.FileCheck(path="/tmp/f-${client}", min_size=3),
                bytes_from="stdout",
            ),
        ),
        ks.GroupSpec(name="base", clients=1, stop=ks.WhileOthers(), client=ks.TcpClient(addr="127.0.0.1:9")),
        ks.GroupSpec(
            name="ramp",
            clients=4,
            stop=ks.DurationMs(duration_ms=300),
            client_offset=2,
            group_clients=10,
            pacer=ks.RatePacer(profile=ks.PointsProfile(points=[(0.0, 10.0), (2.5, 40.0)], step=True), max_in_flight=3),
            client=ks.TcpClient(addr="127.0.0.1:9"),
        ),
        ks.GroupSpec(
            name="wave",
            clients=4,
            stop=ks.DurationMs(duration_ms=300),
            pacer=ks.RatePacer(profile=ks.SineProfile(mean_hz=20.0, amplitude_hz=5.0, period_s=1.5), poisson=True),
            client=ks.TcpClient(addr="127.0.0.1:9"),
        ),
    ],
)


def test_the_spec_crosses_field_for_field() -> None:
    mine = json.loads(FULL.to_json())
    engine = json.loads(_engine.check_spec(FULL.to_json()))
    assert engine == mine
    # A key the engine does not know is refused, naming it, as a typed error.
    renamed = mine | {"groups": [dict(mine["groups"][0], timeout=5)]}
    with pytest.raises(knee.SpecError, match="unknown field `timeout`"):
        _engine.check_spec(json.dumps(renamed))


def test_a_client_key_crosses_to_the_engine_only() -> None:
    """The engine reads the TLS key (to_json); every other dump of a spec (run.json's, --json's) and its repr hold a
    mark in its place."""
    key = "-----BEGIN PRIVATE KEY-----\n…"
    assert json.loads(FULL.to_json())["groups"][1]["client"]["tls"]["key_pem"] == key
    for dump in (FULL.model_dump(mode="json"), json.loads(FULL.model_dump_json())):
        assert dump["groups"][1]["client"]["tls"]["key_pem"] == ks.KEY_WITHHELD
    assert "PRIVATE KEY" not in repr(FULL) and "BEGIN CERTIFICATE" not in repr(FULL)


def _fields(model: type) -> set[str]:
    return {f.alias or name for name, f in model.model_fields.items()}


def test_the_summary_and_snapshot_cross_field_for_field() -> None:
    spec = ks.EngineSpec(
        groups=[
            ks.GroupSpec(
                name="g", clients=2, stop=ks.Total(total=6), client=ks.ExecClient(argv=["/bin/sh", "-c", "exit 3"])
            )
        ]
    )
    result = run_step(spec, Interrupts()).result
    raw = json.loads(result.summary())
    assert set(raw) == _fields(EngineSummary)
    g = raw["groups"][0]
    assert set(g) == _fields(EngineGroup)
    assert set(g["latency_us"]) == _fields(EngineLatency)
    assert set(g["reasons"][0]) == _fields(EngineReason)
    assert set(g["series"][0]) == _fields(EngineSeriesPoint)
    typed = summary(result)  # strict: every field required, none unknown
    assert typed.groups[0].failed == 6 and typed.groups[0].reasons[0].count == 6
    eng = Engine(spec).start()
    snap = json.loads(eng._inner.snapshot())
    eng.wait(None)
    # `workers` and `shards` are the Dask executor's, set when it merges its shards' snapshots (executor/shards.py)
    assert set(snap) == set(Snapshot.model_fields) - {"workers", "shards"} and set(snap["groups"][0]) == set(
        GroupSnapshot.model_fields
    )
    with pytest.raises(ValueError, match="renamed"):
        EngineSummary.model_validate(dict(raw, renamed=1))
