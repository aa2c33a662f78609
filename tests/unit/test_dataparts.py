"""A step's data sources on many shards (knee.executor.dataparts): the parts' arithmetic, what a run's steps leave,
the worker that ran out first, the driver's row count held against the engine's, and a shuffle's parts, shipped as
text, handing out exactly the rows one engine would. tests/integration/test_distributed_data.py holds the same
against nginx on a real Dask cluster."""

from __future__ import annotations

import random
from pathlib import Path

from knee.engine import Engine, summary
from knee.executor.dataparts import (
    END,
    DataSplit,
    Shipping,
    cut,
    read_rows,
    size,
    subtract,
    with_texts,
    without_files,
)
from knee.executor.shards import shares
from knee.model.engine_summary import EngineDataUse
from knee.spec import DataSource, EngineSpec, ExecClient, GroupSpec, HttpClient, Total


def positions(ranges: list[tuple[int, int]]) -> list[int]:
    return [p for a, b in ranges for p in range(a, b)]


def test_parts_are_disjoint_covering_and_in_proportion_with_leftovers() -> None:
    left = [(3, 10), (20, 25), (40, 100)]  # what earlier steps left: 72 positions
    parts = cut(left, [2, 1, 1])
    assert parts == [[(3, 10), (20, 25), (40, 64)], [(64, 82)], [(82, 100)]]
    rng = random.Random(5)
    for _ in range(300):
        bounds = sorted(rng.sample(range(1000), 2 * rng.randint(0, 6)))
        left = list(zip(bounds[::2], bounds[1::2], strict=True))
        weights = [rng.choice([0, 1, 2, 3.5, 10]) for _ in range(rng.randint(1, 5))] + [1]
        parts = cut(left, weights)
        got = [positions(p) for p in parts]
        assert [p for g in got for p in g] == positions(left)  # covering, in order, none twice
        assert [len(g) for g in got] == shares(size(left), weights)  # in proportion (largest remainder)
        assert positions(subtract(left, [r for p in parts[:1] for r in p])) == [p for g in got[1:] for p in g]


def _ids(tmp: Path, n: int) -> Path:
    path = tmp / "ids.csv"
    path.write_text("id\n" + "".join(f"{i}\n" for i in range(n)))
    return path


def _spec(d: DataSource, *clients: int) -> list[EngineSpec]:
    """One shard spec per `clients` count, its group reading `d` (${ids.id} in its URL)."""
    client = HttpClient(url="http://127.0.0.1:9/u/${ids.id}")
    return [
        EngineSpec(data=[d], groups=[GroupSpec(name="main", clients=n, stop=Total(total=n), client=client)])
        for n in clients
    ]


def _use(used: int, out_at: float | None = None) -> list[EngineDataUse]:
    return [
        EngineDataUse(name="ids", rows=0, available=0, taken=used, used=used, exhausted_after_s=out_at, memory_bytes=0)
    ]


def test_a_runs_steps_cut_what_the_earlier_steps_left_and_name_who_ran_out_first(tmp_path: Path) -> None:
    queue = DataSource(name="ids", file=str(_ids(tmp_path, 150)), format="csv", order="queue")
    split = DataSplit()
    step1 = split.parts(_spec(queue, 1, 2))  # 150 rows, 1 : 2 clients
    assert [s.data[0].ranges for s in step1] == [[(0, 50)], [(50, 150)]]
    assert split.settle(["a", "b"], [_use(30), _use(100, 2.5)]) == {"ids": "b"}
    # the runner counts 130 used: the next step starts after them, on the positions the shards left
    step2 = split.parts(_spec(queue.model_copy(update={"ranges": [(130, END)]}), 1, 1))
    assert [s.data[0].ranges for s in step2] == [[(30, 40)], [(40, 50)]]
    assert split.settle(["a", "b"], [_use(10, 0.7), None]) == {"ids": "a"}  # b lost: its whole part is gone too
    step3 = split.parts(_spec(queue.model_copy(update={"ranges": [(140, END)]}), 1, 1))
    assert [s.data[0].ranges for s in step3] == [[], []]  # every row used
    # a resumed run (another driver) goes on after the positions the record counts, as one machine would
    fresh = DataSplit().parts(_spec(queue.model_copy(update={"ranges": [(130, END)]}), 1, 1))
    assert [s.data[0].ranges for s in fresh] == [[(130, 140)], [(140, 150)]]
    # circular and random are every shard's own; scope client is cut afresh each step, not remembered
    circular = queue.model_copy(update={"order": "circular"})
    assert [s.data[0] for s in split.parts(_spec(circular, 1, 1))] == [circular, circular]
    per_client = queue.model_copy(update={"scope": "client"})
    assert [s.data[0].ranges for s in split.parts(_spec(per_client, 1, 2))] == [[(0, 50)], [(50, 150)]]


def test_the_first_out_is_the_shard_whose_part_ran_out_earliest(tmp_path: Path) -> None:
    queue = DataSource(name="ids", file=str(_ids(tmp_path, 10)), format="csv", order="queue")
    split = DataSplit()
    split.parts(_spec(queue, 1, 1, 1))
    assert split.settle(["a", "b", "c"], [_use(5, 0.9), _use(5, 0.2), _use(3)]) == {"ids": "b"}
    split.parts(_spec(queue.model_copy(update={"ranges": [(13, END)]}), 1))
    assert split.settle(["a"], [_use(0)]) == {}  # none ran out


def _engine_rows(d: DataSource) -> int:
    spec = EngineSpec(
        data=[d], groups=[GroupSpec(name="g", clients=1, stop=Total(total=1), client=ExecClient(argv=["true"]))]
    )
    engine = Engine(spec).start()
    engine.wait(None)
    return summary(engine.result()).data[0].rows


def test_the_driver_counts_rows_as_the_engine_does(tmp_path: Path) -> None:
    files = {
        "a.csv": '\ufeffid,note\r\n1,"two\nlines"\r\n\r\n""\n2,"a ""quoted"" word"\r3,x\n4,  \n',
        "d.csv": "\ufeffid,n\r\n1,a\r\n\r\n2,b\r3,c\n\n4,\n",  # no quote: counted by lines
        "b.tsv": "id\tnote\n\n1\tx\r\n2\t\n\r\n3\ty",
        "c.jsonl": '{"id": 1}\n\n  \t\n{"id": 2}\r\n{"id": 3}',
    }
    for name, text in files.items():
        path = tmp_path / name
        path.write_text(text, newline="")
        d = DataSource(name="d", file=str(path), format=name.split(".")[1], order="circular")  # type: ignore[arg-type]
        assert read_rows(d).rows == _engine_rows(d), name
        assert read_rows(d).text == text


def test_a_shuffles_parts_shipped_as_text_hand_out_what_one_engine_would(tmp_path: Path) -> None:
    out = tmp_path / "sent"
    shuffle = DataSource(name="ids", file=str(_ids(tmp_path, 60)), format="csv", order="shuffle")

    def sent(specs: list[EngineSpec]) -> list[str]:
        out.write_text("")
        for s in specs:  # one after another
            engine = Engine(s).start()
            engine.wait(None)
        return out.read_text().split()

    echo = ExecClient(argv=["sh", "-c", f"echo ${{ids.id}} >> {out}"])
    one = EngineSpec(seed=7, data=[shuffle], groups=[GroupSpec(name="g", clients=1, stop=Total(total=60), client=echo)])
    whole = sent([one])
    assert sorted(whole, key=int) == [str(i) for i in range(60)] and whole != sorted(whole, key=int)
    three = [
        one.model_copy(
            update={"groups": [one.groups[0].model_copy(update={"clients": n, "stop": Total(total=10 * n)})]}
        )
        for n in (1, 2, 3)
    ]
    parts = DataSplit().parts(three)
    assert [s.data[0].ranges for s in parts] == [[(0, 10)], [(10, 30)], [(30, 60)]]
    # as a worker gets it: no path of the driver's, the rows the driver shipped
    shipping = Shipping(lambda text, address: (address, text), lambda held: True)
    texts = shipping.texts([(f"w{i}", s) for i, s in enumerate(parts)])
    assert [sorted(t) for t in texts] == [["ids"]] * 3 and texts[0]["ids"][0] == "w0"
    travelling = [without_files(s) for s in parts]
    assert all(d.file is None and d.text is None for s in travelling for d in s.data)
    remote = [with_texts(s, {"ids": t["ids"][1]}) for s, t in zip(travelling, texts, strict=True)]
    # each part hands out the rows at its positions of the one engine's sequence (its clients in any order)
    assert [sorted(sent([s]), key=int) for s in remote] == [
        sorted(whole[a:b], key=int) for a, b in [(0, 10), (10, 30), (30, 60)]
    ]


def test_a_file_goes_to_each_worker_once_until_it_changes(tmp_path: Path) -> None:
    ids = _ids(tmp_path, 5)
    d = DataSource(name="ids", file=str(ids), format="csv", order="circular")
    sends: list[str] = []
    alive = {"yes": True}

    def send(text: str, address: str) -> str:
        sends.append(address)
        return address

    shipping = Shipping(send, lambda held: alive["yes"])
    specs = _spec(d, 1, 1)
    for _ in range(3):  # three steps on the same two workers
        shipping.texts([("w0", specs[0]), ("w1", specs[1])])
    assert sends == ["w0", "w1"]
    shipping.texts([("w2", specs[0])])  # a worker that joined
    assert sends == ["w0", "w1", "w2"]
    ids.write_text("id\n" + "".join(f"{i}\n" for i in range(7)))  # the file written again: sent again
    shipping.texts([("w0", specs[0])])
    alive["yes"] = False  # what a worker held is gone (it left and came back): sent again
    shipping.texts([("w0", specs[0])])
    assert sends == ["w0", "w1", "w2", "w0", "w0"]


def test_a_data_file_gone_mid_sweep_is_one_sentence(tmp_path: Path) -> None:
    import pytest

    from knee.errors import UserError
    from knee.executor.dataparts import file_key

    gone = tmp_path / "ids.csv"
    with pytest.raises(UserError) as info:
        file_key(str(gone))
    assert str(info.value) == f"data file {gone}: cannot read it (No such file or directory); fix the path"
