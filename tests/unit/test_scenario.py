"""The scenario file: every example validates; every mistake is one sentence naming the line and key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from knee.errors import UserError
from knee.scenario import (
    ExecGroup,
    HttpGroup,
    Scenario,
    load_scenario,
    parse_scenario,
    read_scenario,
    scenario_from_record,
)
from knee.scenario.think import parse_think

EXAMPLES = sorted((Path(__file__).parents[2] / "examples").glob("*.toml"))
VARS = {"target": "http://127.0.0.1:1", "tcp": "127.0.0.1:2"}
SECRETS = {"password": "pw"}  # the examples that log in take their password as a secret

MINIMAL = """\
[groups.main]
kind = "http"
url = "http://127.0.0.1:1/x"

[sweep]
levels = [1, 2]
duration = "1s"
"""


def error_of(text: str, variables: dict[str, str] | None = None) -> str:
    with pytest.raises(UserError) as info:
        parse_scenario(text, "s.toml", variables)
    return str(info.value)


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_every_example_validates(path: Path) -> None:
    scenario = load_scenario(path, VARS, SECRETS)
    assert scenario.groups
    assert scenario.levels()


def test_examples_cover_every_kind_of_test() -> None:
    names = {p.stem for p in EXAMPLES}
    assert {
        "http-sweep",
        "exec-curl-sweep",
        "baseload-stress",
        "fixed-work",
        "interval-series",
        "tcp-handshake",
        "ab-style",
        "rate-sweep",
    } <= names


def test_durations_accept_units_and_numbers() -> None:
    s = parse_scenario(MINIMAL.replace('duration = "1s"', 'duration = "2m"\nwarmup = "500ms"\npause = 3'))
    assert s.sweep.duration == 120.0
    assert s.sweep.warmup == 0.5
    assert s.sweep.pause == 3.0
    # a minus sign is read (to say the duration is negative), and "-0s" is 0, not -0.0
    s = parse_scenario(MINIMAL.replace('duration = "1s"', 'duration = "1s"\npause = " -0s"'))
    assert str(s.sweep.pause) == "0.0"


def test_clients_below_one_names_line_key_and_value() -> None:
    text = MINIMAL.replace('url = "http://127.0.0.1:1/x"', 'url = "http://127.0.0.1:1/x"\nclients = 0')
    assert error_of(text) == "s.toml line 4: groups.main.clients must be at least 1 (got 0)"


def test_every_problem_gets_its_own_sentence() -> None:
    text = """\
[groups.stress]
kind = "http"
url = "http://x"
clientz = 5

[sweep]
duration = "ten"
direction = "sideways"
"""
    text = text.replace("clientz = 5", 'clientz = 5\nthink_on_failure = "soon"')
    lines = error_of(text).splitlines()
    assert "s.toml line 4: groups.stress.clientz is not a known key; did you mean clients?" in lines
    assert "s.toml line 8: sweep.duration must be a duration like 10s, 2m or 500ms, or \"auto\" (got 'ten')" in lines
    duration = "must be a duration like 10s, 2m or 500ms (got 'soon')"
    assert f"s.toml line 5: groups.stress.think_on_failure {duration}" in lines
    assert "s.toml line 9: sweep.direction must be 'up' or 'up-down' (got 'sideways')" in lines
    assert len(lines) == 4


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('[[group]]\nkind = "http"\n', "s.toml line 1: group is not a known key; did you mean groups?"),
        ("[sweep]\nlevles = [1]\n", "s.toml line 2: sweep.levles is not a known key; did you mean levels?"),
        (
            '[groups.a]\nkind = "http"\nurl = "http://x:1/"\n[groups.a.tls]\ncertt = "c.pem"\n',
            "s.toml line 5: groups.a.tls.certt is not a known key; did you mean cert?",
        ),
        (  # a key of another kind of group: nothing of a tcp group's is close to it
            '[groups.a]\nkind = "tcp"\naddr = "127.0.0.1:1"\nurl = "http://x:1/"\n',
            "s.toml line 4: groups.a.url is not a known key; check its spelling in docs/scenarios.md",
        ),
        (
            '[groups.a]\nkind = "tcp"\naddr = "127.0.0.1:1"\nsendd = "x"\n',
            "s.toml line 4: groups.a.sendd is not a known key; did you mean send?",
        ),
        ("[sweep]\nzzz = 1\n", "s.toml line 2: sweep.zzz is not a known key; check its spelling in docs/scenarios.md"),
    ],
)
def test_an_unknown_key_is_offered_the_known_one_of_its_table_it_is_closest_to(text: str, said: str) -> None:
    assert said in error_of(text).splitlines()


def test_unknown_kind_and_missing_url() -> None:
    kinds = "'http', 'tcp', 'websocket', 'grpc', 'exec', 'worker', 'python'"
    assert f"groups.a kind must be one of {kinds} (got 'ftp')" in error_of('[groups.a]\nkind = "ftp"\n')
    msg = error_of('[groups.a]\nkind = "http"\n[sweep]\nduration = 1\n')
    assert msg == "s.toml line 1: groups.a.url is required; add it"


def test_toml_syntax_error_gives_its_line() -> None:
    msg = error_of(MINIMAL + "\n[stop\n")
    assert msg.startswith("s.toml line 9: not valid TOML")


def test_missing_stop_condition_is_explained() -> None:
    msg = error_of('[groups.a]\nkind = "http"\nurl = "http://h:1"\n')
    assert "sweep needs duration, per_client or total" in msg


def test_two_stops_in_one_group_are_refused() -> None:
    msg = error_of('[groups.a]\nkind = "exec"\nargv = ["true"]\nper_client = 1\nduration = "2s"\n')
    assert "groups.a: give at most one of per_client, total, duration" in msg


def test_level_list_entries_are_checked_by_index() -> None:
    msg = error_of(MINIMAL.replace("levels = [1, 2]", "levels = [5, 0]"))
    assert msg == "s.toml line 6: sweep.levels[1] must be at least 1 (got 0)"


def test_level_ranges_expand() -> None:
    geo = parse_scenario(MINIMAL.replace("levels = [1, 2]", "levels = {start = 5, stop = 1000, count = 5}"))
    assert geo.levels() == [5, 19, 71, 266, 1000]
    lin = parse_scenario(
        MINIMAL.replace("levels = [1, 2]", 'levels = {start = 10, stop = 50, step = 20, spacing = "linear"}')
    )
    assert lin.levels() == [10, 30, 50]
    msg = error_of(MINIMAL.replace("levels = [1, 2]", "levels = {start = 50, stop = 10, count = 3}"))
    assert msg == "s.toml line 6: sweep.levels: stop (10) must not be below start (50)"


def test_max_level_trims_the_levels() -> None:
    s = parse_scenario(MINIMAL.replace("levels = [1, 2]", "levels = [1, 10, 100]") + "[stop]\nmax_level = 50\n")
    assert s.levels() == [1, 10]


def test_variables_fill_placeholders_and_command_line_wins() -> None:
    text = '[vars]\ntarget = "http://127.0.0.1:7"\n' + MINIMAL.replace("http://127.0.0.1:1/x", "${target}/c${client}")
    assert isinstance(g := parse_scenario(text).groups["main"], HttpGroup)
    assert g.url == "http://127.0.0.1:7/c${client}"
    g2 = parse_scenario(text, variables={"target": "http://[::1]:9"}).groups["main"]
    assert isinstance(g2, HttpGroup)
    assert g2.url == "http://[::1]:9/c${client}"


def test_undefined_variable_says_how_to_define_it() -> None:
    assert error_of(MINIMAL.replace("http://127.0.0.1:1/x", "${host}/x")) == (
        "s.toml line 3: ${host} is not defined; pass --var host=VALUE or add it under [vars] "
        "(or --secret host=VALUE for a value knee must never write)"
    )


def test_exec_group_and_hang_after_alias() -> None:
    text = '[groups.cli]\nkind = "exec"\nargv = ["true"]\nhang_after = "2s"\nclients = 3\n[sweep]\nper_client = 4\n'
    g = parse_scenario(text).groups["cli"]
    assert isinstance(g, ExecGroup)
    assert g.timeout == 2.0
    assert g.clients == 3


def test_status_ranges_accept_text_and_numbers() -> None:
    s = parse_scenario(
        MINIMAL.replace('url = "http://127.0.0.1:1/x"', 'url = "http://h:1/"\nexpect_status = "2xx,404"')
    )
    g = s.groups["main"]
    assert isinstance(g, HttpGroup)
    assert g.expect_status == [(200, 299), (404, 404)]
    msg = error_of(MINIMAL.replace('url = "http://127.0.0.1:1/x"', 'url = "http://h:1/"\nexpect_status = "ok"'))
    assert "groups.main.expect_status must be statuses like 200, 200-299 or 2xx" in msg


def test_record_round_trip_rebuilds_the_same_scenario() -> None:
    for path in EXAMPLES:
        loaded = read_scenario(path.read_text(), path.name, VARS, SECRETS)
        s, record = loaded.scenario, loaded.record
        assert scenario_from_record(record, loaded.secrets).scenario == s
        # and through run.json's JSON and a saved TOML file
        again = Scenario.model_validate_json(record.model_dump_json())
        assert scenario_from_record(again, loaded.secrets).scenario == s
        assert parse_scenario(record.to_toml(), secrets=loaded.secrets) == s, path.name


def test_measured_group_is_the_one_that_follows_the_level() -> None:
    text = MINIMAL.replace(
        "[groups.main]", '[groups.base]\nkind = "http"\nurl = "http://h:1"\nclients = 5\n\n[groups.main]'
    )
    s = parse_scenario(text)
    assert s.measured_group == "main"


def test_levels_belong_to_a_group_that_follows_them() -> None:
    assert error_of(MINIMAL.replace("levels = [1, 2]\n", "")) == (
        "s.toml line 5: sweep needs levels, the client counts of group 'main' (clients = \"level\"), "
        "e.g. levels = [5, 20, 50]"
    )
    fixed = MINIMAL.replace('url = "http://127.0.0.1:1/x"', 'url = "http://127.0.0.1:1/x"\nclients = 60')
    assert "sweep.levels needs a group whose clients follow the level" in error_of(fixed)
    single = parse_scenario(fixed.replace("levels = [1, 2]\n", ""))
    assert single.levels() == [60]  # one step, at the fixed group's size


BASELOAD = """\
[groups.base]
kind = "http"
url = "http://127.0.0.1:1/ls"
clients = 50
background = true

[groups.stress]
kind = "http"
url = "http://127.0.0.1:1/ls"
clients = 5000
per_client = 100
"""


def test_a_background_group_needs_no_stop_and_takes_none() -> None:
    parse_scenario(BASELOAD)  # no [sweep] stop needed: the stress group ends the step
    msg = error_of(BASELOAD.replace("background = true", "background = true\nduration = '1m'"))
    assert "groups.base: background = true runs the group as long as the others" in msg
    assert "remove duration or background" in msg
    msg = error_of(BASELOAD.replace("per_client = 100", "background = true"))
    assert "every group has background = true, so none would end the step" in msg


def test_source_addresses_are_lists_and_ranges_of_this_machines_addresses() -> None:
    from knee.plan import client_spec

    sc = parse_scenario(MINIMAL.replace('url = "', 'source_addr = ["127.0.0.2-127.0.0.4", "127.0.0.9"]\nurl = "'), "s")
    assert client_spec(sc.groups["main"]).source_addrs == ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.9"]
    assert client_spec(parse_scenario(MINIMAL, "s").groups["main"]).source_addrs == []
    for given, said in [
        ('"127.0.0.9-127.0.0.2"', "range '127.0.0.9-127.0.0.2' ends before it starts; give the lower address first"),
        ('"127.0.0.2,::1"', "mixes IPv4 and IPv6 addresses"),
        ('"nowhere"', "'nowhere' is not an IP address"),
        ('"192.0.2.1"', "192.0.2.1 is not an address of this machine"),
        ('"10.0.0.0-10.1.0.0"', "more than 65536 addresses"),
    ]:
        text = MINIMAL.replace('url = "', f'source_addr = {given}\nurl = "')
        assert "groups.main.source_addr" in error_of(text) and said in error_of(text), error_of(text)


def test_a_websocket_timeout_counts_beyond_the_hold_or_the_session() -> None:
    ws = '[groups.a]\nkind = "websocket"\nurl = "ws://127.0.0.1:1/"\n'
    listen = ws + 'mode = "listen"\nhold = "30s"\n[sweep]\nlevels = [1]\nduration = "1m"\n'
    assert parse_scenario(listen, "s.toml").groups["a"].timeout == 60.0
    msg = error_of(listen.replace('hold = "30s"\n', 'hold = "30s"\ntimeout = "30s"\n'))
    assert "hold 30s, not less than timeout (30s): every operation would be hung" in msg
    assert "--timeout), e.g. to 60s" in msg
    session = ws + 'mode = "session"\nmessage = "m"\nmessages = 5\ninterval = "10s"\n'
    session += '[sweep]\nlevels = [1]\nduration = "1m"\n'
    assert parse_scenario(session, "s.toml").groups["a"].timeout == 70.0
    msg = error_of(session.replace('interval = "10s"\n', 'interval = "10s"\ntimeout = 40\n'))
    assert "5 messages 10s apart take at least 40s, not less than timeout (40s)" in msg
    echo = ws + 'message = "m"\n[sweep]\nlevels = [1]\nduration = "1m"\n'
    assert parse_scenario(echo, "s.toml").groups["a"].timeout == 30.0


def test_a_data_file_s_columns_are_read_as_the_engine_reads_them(tmp_path: Path) -> None:
    from knee.scenario.data import DataTable

    (tmp_path / "q.csv").write_text('id,"last, first"\n1,"a, b"\n')
    (tmp_path / "q.tsv").write_text('"id"\tname \n1\tx\n')
    # a quoted name holds a comma; TSV has no quoting: the quotes are the name's (as the engine reads it)
    assert DataTable(name="q", file=str(tmp_path / "q.csv")).columns() == ["id", "last, first"]
    assert DataTable(name="q", file=str(tmp_path / "q.tsv")).columns() == ['"id"', "name"]


def test_a_background_group_may_not_read_rows_each_used_once(tmp_path: Path) -> None:
    (tmp_path / "ids.csv").write_text("id\n1\n2\n")
    head = f'[[data]]\nname = "ids"\nfile = "{tmp_path / "ids.csv"}"\norder = "queue"\n'
    main = '[groups.main]\nkind = "http"\nurl = "http://127.0.0.1:1/"\n[sweep]\nlevels = [1]\nduration = "1s"\n'
    worker = '[groups.bg]\nkind = "worker"\nargv = ["w"]\nclients = 1\nbackground = true\ndata = ["ids"]\n'
    templ = '[groups.bg]\nkind = "http"\nurl = "http://127.0.0.1:1/${ids.id}"\nclients = 1\nbackground = true\n'
    said = "a background group runs in a shard of its own, so it cannot share the rows of ids (queue: each row once)"
    # named in its data list, the rows were walked by the baseload's shard and by the steps' from the first
    assert f"groups.bg.data[0]: 'ids': {said}" in error_of(head + worker + main)
    assert f"groups.bg.url: ${{ids.id}}: {said}" in error_of(head + templ + main)


def test_a_mix_in_turn_takes_no_weights_and_an_unknown_order_is_named() -> None:
    head = '[groups.shop]\nkind = "http"\nurl = "http://x:1/"\nclients = 2\nduration = "1s"\n'
    mix = '[[groups.shop.requests]]\nname = "a"\n[[groups.shop.requests]]\nname = "b"\nweight = 3\n'
    (line,) = error_of(head + 'mix_order = "in_turn"\n' + mix).splitlines()
    assert (
        line.startswith("s.toml line 1: groups.shop")
        and ("mix_order = \"in_turn\" sends each request of a mix in turn, but 'b' has weight = 3; drop the weights")
        in line
    ), line
    (line,) = error_of(head + 'mix_order = "round-robin"\n' + mix).splitlines()
    assert "groups.shop.mix_order" in line and "'random' or 'in_turn'" in line, line


def test_a_mix_order_without_a_mix_is_refused() -> None:
    text = '[groups.shop]\nkind = "http"\nurl = "http://x:1/"\nclients = 2\nduration = "1s"\nmix_order = "in_turn"\n'
    (line,) = error_of(text).splitlines()
    assert 'mix_order = "in_turn" sends each request of a mix in turn, but the group has none; drop it' in line, line


@pytest.mark.parametrize(
    ("typed", "written", "mean"),
    [
        ("2s", 2.0, 2.0),
        (0.00005, 0.00005, 0.00005),  # a number of seconds, as an older run.json holds it
        ("uniform(20ms, 80ms)", "uniform(20ms, 80ms)", 0.05),
        ("uniform(1s,3s)", "uniform(1s, 3s)", 2.0),
        ("exponential(1.5s)", "exponential(1500ms)", 1.5),
        ("exponential(0s)", 0.0, 0.0),  # never pauses, whatever its form
    ],
)
def test_a_think_time_is_written_as_given_and_reads_back_the_same(typed: object, written: object, mean: float) -> None:
    think = parse_think(typed)
    assert think.mean == pytest.approx(mean) and think.model_dump() == written
    assert parse_think(think.model_dump()) == think
    text = f'[groups.a]\nkind = "tcp"\naddr = "127.0.0.1:1"\nduration = "1s"\nthink = {json.dumps(written)}\n'
    assert parse_scenario(text + "[sweep]\nlevels = [1]\n", "s.toml").groups["a"].think == think


@pytest.mark.parametrize(
    ("typed", "said"),
    [
        ("uniform(3s, 1s)", "its least is above its most; give uniform(LEAST, MOST)"),
        ("uniform(-1s, 3s)", "uniform's least must not be negative (got '-1s')"),
        ("-1s", "must not be negative: a duration is 0 or more"),
        (-2, "must not be negative: a duration is 0 or more"),
        ("- 500ms", "must not be negative: a duration is 0 or more"),
        ("1-s", 'must be a duration like 2s, "uniform(1s, 3s)"'),
        ("exponential(100000h)", "exponential's mean must be at most 24000h"),
        ("gauss(1s)", 'must be a duration like 2s, "uniform(1s, 3s)" or "exponential(2s)"'),
        ({"kind": "uniform"}, 'must be a duration like 2s, "uniform(1s, 3s)"'),
    ],
)
def test_a_think_time_that_cannot_be_is_one_sentence(typed: object, said: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_think(typed)
    assert said in str(err.value)
