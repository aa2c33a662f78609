"""The Python API over the engine: results are exact, mergeable data that HdrHistogram agrees with."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path

import pytest
from hdrh.histogram import HdrHistogram

import knee
from knee import _engine, engine
from knee.errors import UserError
from knee.spec import EngineSpec

from servers import Nginx


def decode(blob: bytes) -> HdrHistogram:
    # hdrh's b64_wrap=False path does not decode even its own raw encoding; wrap the raw V2 bytes.
    return HdrHistogram.decode(base64.b64encode(blob))


def test_percentiles_equal_hdrhistogram(nginx: Nginx) -> None:
    # 5000 operations: every quantile asked for times 5000 is a whole count, where the Python port's
    # rounding (int(x + 0.5)) and HdrHistogram's (ceil) pick the same value.
    r = knee.run(nginx.url + "/", clients=8, n=5000)
    blob = r.result.histogram(0, "latency")
    assert blob is not None
    h = decode(blob)
    lat = r.summary.groups[0].latency_us
    assert h.get_total_count() == lat.count == 5000
    for key, q in (("p50", 50), ("p90", 90), ("p95", 95), ("p99", 99), ("p999", 99.9)):
        assert getattr(lat, key) == h.get_value_at_percentile(q), key
    assert lat.max == h.get_max_value()
    assert lat.min == h.get_min_value()
    assert lat.mean == pytest.approx(h.get_mean_value(), rel=1e-3)
    for q, v in r.summary.groups[0].percentiles:
        assert v == h.get_value_at_percentile(q), q


def test_merge_equals_the_sum_and_bytes_round_trip(nginx: Nginx) -> None:
    a = knee.run(nginx.url + "/", clients=4, n=1000).result
    b = knee.run(nginx.url + "/", clients=6, n=1500).result
    ha, hb = decode(a.histogram(0, "latency")), decode(b.histogram(0, "latency"))
    ha.add(hb)
    merged = _engine.ShardResult.from_bytes(a.to_bytes())
    merged.merge(b)
    g = engine.summary(merged).groups[0]
    assert g.succeeded == 2500
    assert len(g.per_client) == 10 and sum(g.per_client) == 2500
    hm = decode(merged.histogram(0, "latency"))
    assert hm.get_total_count() == ha.get_total_count() == 2500
    for q in (50, 90, 99, 99.9, 100):
        assert hm.get_value_at_percentile(q) == ha.get_value_at_percentile(q)
    again = _engine.ShardResult.from_bytes(merged.to_bytes())
    assert json.loads(again.summary()) == json.loads(merged.summary())


def test_bad_spec_is_a_typed_engine_error_naming_the_key() -> None:
    spec = {"groups": [{"name": "g", "clients": 0, "stop": {"total": 1}, "client": {"kind": "exec", "argv": ["true"]}}]}
    with pytest.raises(knee.SpecError, match=r"groups\[0\]\.clients must be at least 1 \(got 0\)") as err:
        engine.Engine(EngineSpec.model_validate(spec))
    assert isinstance(err.value, knee.EngineError) and not isinstance(err.value, ValueError)
    assert type(err.value).__module__ == "knee._engine"
    with pytest.raises(knee.EngineError, match="format version"):
        _engine.ShardResult.from_bytes(b'{"version": 1, "started_unix": 0, "elapsed_s": 0, "interval_s": 1, '
                                       b'"stopped": false, "groups": []}')  # fmt: skip


def test_snapshot_and_stop_from_python() -> None:
    # Stopped while both clients' operations run: each lasts a second, the gap between two a process's start. (With
    # operations of 50 ms a CI run's stop fell in both clients' gaps at once, under load: nothing was in flight.)
    spec = {"groups": [{"name": "g", "clients": 2, "stop": {"duration_ms": 30000},
                        "client": {"kind": "exec", "argv": ["sleep", "1"]}}]}  # fmt: skip
    eng = engine.Engine(EngineSpec.model_validate(spec)).start()
    assert not eng.wait(1.2)
    deadline = time.monotonic() + 20
    while not ((snap := eng.snapshot()).groups[0].succeeded > 0 and snap.groups[0].in_flight == 2):
        assert time.monotonic() < deadline, snap
        time.sleep(0.01)
    assert snap.groups[0].name == "g"
    eng.stop()
    assert eng.wait(10.0)
    g = engine.summary(eng.result()).groups[0]
    assert 0 < g.succeeded < 200
    assert g.started == g.succeeded + g.failed + g.hung + g.abandoned and 1 <= g.abandoned <= 2


def test_processing_is_latency_less_connect(nginx: Nginx) -> None:
    r = knee.run(nginx.url + "/", clients=4, n=800, new_connection=True)
    g = r.summary.groups[0]
    proc, lat, conn = g.processing_us, g.latency_us, g.connect_us
    assert proc.count == lat.count == conn.count == 800
    assert proc.mean == pytest.approx(lat.mean - conn.mean, abs=max(2.0, 0.02 * lat.mean))
    assert decode(r.result.histogram(0, "processing")).get_total_count() == 800


def test_the_api_takes_rates_headers_as_a_dict_and_says_what_is_wrong_in_one_sentence(
    nginx: Nginx, tmp_path: Path
) -> None:
    """`knee.run(url, rates=[…])` ran a closed loop of 1 client (rates was dropped for rate's None); headers as a dict,
    as requests and httpx take them, were refused ("must look like 'Name: value' (got 'X-A')"); a scenario file
    that is not there was a FileNotFoundError."""
    r = knee.run(nginx.url + "/", rates=[40, 80], duration="1s", headers={"X-Trace": "abc"})
    assert r.step.level == 80 and r.stats.open_loop is not None, r.step
    assert r.stats.open_loop.offered_rate_hz == pytest.approx(80, rel=0.1)
    assert ("X-Trace", "abc") in [tuple(h) for h in r.spec.groups[0].client.headers]  # type: ignore[union-attr]
    with pytest.raises(UserError, match=r"give rate \(one rate\) or rates \(a step each\), not both"):
        knee.run(nginx.url + "/", rate=10, rates=[20], n=1)
    with pytest.raises(UserError) as said:
        knee.sweep(scenario=tmp_path / "missing.toml")
    assert "missing.toml" in str(said.value), said.value
