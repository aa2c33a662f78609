"""Every scenario becomes one plan: the steps, and each step's engine spec."""

from __future__ import annotations

from knee.plan import PlannedStep, background_spec, engine_spec, probe_step, quick, step_seconds, sweep_plan
from knee.scenario import parse_scenario

SWEEP = """\
[groups.main]
kind = "http"
url = "http://127.0.0.1:1/${stage}"
clients = "level"
timeout = "2s"
think = "50ms"
think_on_failure = "100ms"
cookies = {s = "1"}

[groups.base]
kind = "exec"
argv = ["curl", "${stage}", "${client}"]
clients = 3
per_client = 7

[sweep]
levels = [5, 20, 50]
duration = "10s"
warmup = "1s"
interval = "500ms"
"""


def test_up_down_repeats_the_levels_back_down() -> None:
    s = parse_scenario(SWEEP + 'direction = "up-down"\n')
    assert [(p.level, p.direction) for p in sweep_plan(s)] == [
        (5, "up"),
        (20, "up"),
        (50, "up"),
        (20, "down"),
        (5, "down"),
    ]


def test_stages_give_one_labelled_step_per_level_and_stage() -> None:
    s = parse_scenario(SWEEP + 'stages = ["store", "fetch"]\n')
    plan = sweep_plan(s)
    assert [(p.level, p.label) for p in plan[:3]] == [(5, "store"), (5, "fetch"), (20, "store")]
    assert len(plan) == 6


def test_spec_follows_the_level_and_keeps_fixed_groups() -> None:
    s = parse_scenario(SWEEP + 'stages = ["store"]\n')
    spec = spec_of(s, PlannedStep(20, "store"))
    main, base = spec["groups"]
    assert spec["interval_ms"] == 500
    assert main["clients"] == 20
    assert main["stop"] == {"duration_ms": 10000}
    assert main["warmup_ms"] == 1000
    assert main["timeout_ms"] == 2000
    assert main["think_ms"] == 50
    assert main["think_on_failure_ms"] == 100
    assert main["client"]["url"] == "http://127.0.0.1:1/store"
    assert ["Cookie", "s=1"] in main["client"]["headers"]
    assert base["clients"] == 3
    assert base["stop"] == {"per_client": 7}
    assert base["warmup_ms"] == 0  # fixed work is never cut by a warm-up
    assert base["client"]["argv"] == ["curl", "store", "${client}"]  # the engine fills ${client}


def test_recovery_probe_reruns_the_first_level_with_the_probe_length() -> None:
    s = parse_scenario(SWEEP + '[recovery]\nprobe = "3s"\n')
    probe = probe_step(s)
    assert (probe.level, probe.phase) == (5, "recovery")
    assert spec_of(s, probe)["groups"][0]["stop"] == {"duration_ms": 3000}
    assert s.recovery_enabled()


def test_single_level_has_no_recovery_by_default() -> None:
    s = parse_scenario(SWEEP.replace("levels = [5, 20, 50]", "levels = [5]"))
    assert not s.recovery_enabled()


def test_step_seconds_known_only_for_time_based_steps() -> None:
    assert step_seconds(parse_scenario(SWEEP)) is None  # the exec group does fixed work
    only_http = SWEEP.split("[groups.base]", maxsplit=1)[0] + "[sweep]\nlevels = [1]\nduration = '4s'\nwarmup = '1s'\n"
    assert step_seconds(parse_scenario(only_http)) == 5.0


def test_quick_shrinks_sizes_but_keeps_the_shape() -> None:
    longer = SWEEP.replace('duration = "10s"', 'duration = "20m"') + 'direction = "up-down"\n'
    s = parse_scenario(longer.replace("levels = [5, 20, 50]", "levels = [5, 10, 20, 50, 100, 500, 1000]"))
    q = quick(s)
    assert q.levels() == [5, 10, 50, 100]  # at most 4 levels, none over 100, first and last kept
    assert q.sweep.duration == 1.0
    assert q.sweep.warmup <= 0.2
    assert q.sweep.direction == "up-down"
    assert q.groups["base"].per_client == 5
    assert set(q.groups) == set(s.groups)


def spec_of(scenario, step, **kw):  # type: ignore[no-untyped-def]
    """The engine spec of a step as the JSON the engine reads."""
    return engine_spec(scenario, step, **kw).model_dump(mode="json")


def test_a_background_group_gets_the_engines_while_others_stop() -> None:
    text = SWEEP.replace("clients = 3\nper_client = 7", "clients = 3\nbackground = true")
    spec = spec_of(parse_scenario(text), sweep_plan(parse_scenario(text))[0])
    base = next(g for g in spec["groups"] if g["name"] == "base")
    assert base["stop"] == {"while_others": True} and base["warmup_ms"] == 0
    # The step lasts as long as the group that sets it: the background group adds nothing.
    assert step_seconds(parse_scenario(text)) == 11.0
    # A sweep runs it across the steps in a shard of its own, cut into per-step windows.
    s = parse_scenario(text)
    continuous = spec_of(s, sweep_plan(s)[1], continuous=True)
    assert [g["name"] for g in continuous["groups"]] == ["main"]
    bg = background_spec(s)
    assert bg is not None and [(g.name, g.clients, g.stop.model_dump()) for g in bg.groups] == [
        ("base", 3, {"while_others": True})
    ]
    assert background_spec(parse_scenario(SWEEP)) is None
