"""The shape of a closed-loop curve, named with its evidence: why the rate stopped rising.

One name per curve, tried in this order (the first that fits wins). Which side held the clients is read
from each level's evidence (side.py), never guessed from the curve alone:
- connection_limit: levels where clients were missing from the service (Little's law) while they waited
  at its door (hung or slow in connect) — the service stopped accepting past about the connections it
  served; when the levels below that form a pool, the curve is named `pool`, with both;
- refusing: errors start at (or next to) the peak and then dominate — a limit that turns work away;
- load_side: one step doubled the clients (or more) but the rate grew less than 25 %, with load-side evidence
  (knee's CPU saturated, its ports used up, connects never sent) — the load side was the limit;
- flat: one step doubled the clients but neither the rate nor the mean latency moved, and no side showed
  evidence — the clients were not all in the service, and nothing measured says where they waited;
- retrograde: past the peak the rate falls, without errors dominating — contention and coherency (the USL);
- pool: a flat plateau over at least a doubling of the clients, with mean latency growing in proportion
  to the clients — a fixed pool with a queue, of about peak rate × single-client latency;
- rising: the rate was still climbing at the highest level.
Nothing else is named (a curve of fewer than 3 levels, or none of the above): `name_shape` returns None.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import pairwise

from knee import fmt
from knee.analysis.levels import LevelRow, failed_or_hung
from knee.analysis.side import Side
from knee.model import CurveShape, Level, LittleCheck, USLFit

MIN_LEVELS = 3  # a shape needs a curve: fewer levels name nothing
ERRORS_DOMINATE = 0.05  # errors dominate a level when more than 5 % of its operations failed or hung
REFUSING_NEAR = 1  # refusing: errors start at the peak or at most this many levels past it
PLATEAU_BAND = 0.10  # pool: every level from the plateau's start on is within 10 % of the peak's rate …
PLATEAU_SPAN = 2.0  # … while the clients grow at least 2× over the plateau
POOL_LATENCY = 0.25  # pool: (latency ratio ÷ clients ratio) from the plateau's start is within 25 % of 1
RETROGRADE_FALL = 0.85  # retrograde: the highest level's rate is below 85 % of the peak
LOAD_SIDE_SPAN = 2.0  # load side / flat: a step that at least doubled the clients …
LOAD_SIDE_RATE = 0.10  # … while the rate grew less than 10 % …
LOAD_SIDE_LATENCY = 0.15  # … and (flat) the mean latency stayed within 15 % of the previous level's
LOAD_SIDE_SATURATED = 0.25  # load side, with its evidence: the rate grew less than 25 % over the doubling
DOOR_GAP = 0.20  # connection limit: more than 20 % of the clients were not in the service (Little's law)
STILL_RISING = 0.05  # rising: the highest level is the peak, more than 5 % above the level before


def name_shape(
    rows: Sequence[LevelRow],
    held: Mapping[Level, Side],
    *,
    peak_level: float | None,
    onset: float,
    usl: USLFit | None = None,
    little: Sequence[LittleCheck] = (),
) -> CurveShape | None:
    """The curve's shape (closed loop, levels = clients), or None when it has none worth naming.

    `held`: each level's evidence of which side held the clients (side.sides); `peak_level`: the verdict's
    peak (the best level without errors past `onset`); `usl`: the verdict's fit, cited by retrograde and
    disowned by pool; `little`: the verdict's Little's-law checks (the clients each level had in the service).
    """
    rows = list(rows)
    if len(rows) < MIN_LEVELS or peak_level is None:
        return None
    top = next((i for i, r in enumerate(rows) if r.level == peak_level), None)
    if top is None or rows[top].rate <= 0:
        return None
    for named in (
        _door(rows, held, little, usl),
        _refusing(rows, top, onset),
        _load_side(rows, held),
        _flat(rows, held),
        _retrograde(rows, top, usl),
        _pool(rows, top, usl),
        _rising(rows, top),
    ):
        if named is not None:
            return named
    return None


def _n(r: LevelRow) -> float:
    return float(r.clients or r.level)


def _at(r: LevelRow) -> str:
    """'8 clients', '1 client'."""
    return "1 client" if r.level == 1 else fmt.load(r.level)


def _refusing(rows: list[LevelRow], top: int, onset: float) -> CurveShape | None:
    first = next((i for i, r in enumerate(rows) if r.failure_ratio > onset), None)
    if first is None or first == 0 or abs(first - top) > REFUSING_NEAR:  # errors from the start are no limit
        return None
    worst = max(rows[first:], key=lambda r: r.failure_ratio)
    if worst.failure_ratio <= ERRORS_DOMINATE:
        return None
    peak, start = rows[top], rows[first]
    where = "at the peak" if first == top else ("next to the peak" if first > top else "just below the peak")
    return CurveShape(
        name="refusing",
        evidence=(
            f"a limit that refuses: errors start at {_at(start)}, {where} ({fmt.rate(peak.rate)} with "
            f"{_at(peak)}), and rise sharply (at {_at(worst)} {failed_or_hung(worst, fmt.pct)}): past its limit "
            "the service turns work away instead of queueing it"
        ),
    )


def _door(
    rows: list[LevelRow], held: Mapping[Level, Side], little: Sequence[LittleCheck], usl: USLFit | None
) -> CurveShape | None:
    """Clients missing from the service (Little's law) at levels where they waited at its door: the service
    stopped accepting past about the connections it served (X·(R+Z) at those levels). A pool below that is
    named first, with its size."""
    busy = {c.level: c.expected_n for c in little}
    at_door = [
        r
        for r in rows
        if (sd := held.get(r.level)) is not None
        and sd.held == "service"
        and r.level in busy
        and busy[r.level] < (1 - DOOR_GAP) * _n(r)
    ]
    if not at_door:
        return None
    first, last = at_door[0], at_door[-1]
    # The most it served at once, at the door or below it (where every client was served): at the door a slot
    # freed by a client that timed out sits idle until the next waiting connect is accepted, so the levels there
    # read a little under the limit, and the highest level below the door reads it whole.
    served = round(max(busy[r.level] for r in rows[: rows.index(last) + 1] if r.level in busy))
    side = held[last.level]
    hung = side.hung_words()
    evidence = ", ".join(side.door)
    loads = [held[r.level].load for r in at_door if held[r.level].load]
    cpu = f"the load side was busy too ({'; '.join(loads[0])})" if loads else f"knee was not the limit ({side.cpu})"
    door = (
        f"the service stopped accepting connections past about {served}: {served} connections served; the clients "
        f"past {served} waited to be accepted (from {_at(first)}; at {_at(last)} "
        f"{hung + ': ' if hung else ''}{evidence}); {cpu}"
    )
    below = rows[: rows.index(first)]
    if len(below) >= 2:
        top = max(range(len(below)), key=lambda i: below[i].rate)
        pool = _pool(below, top, usl)
        if pool is not None:
            pool.evidence += f"; then {door}"
            pool.connections = served
            return pool
    return CurveShape(name="connection_limit", evidence=door, connections=served)


def _doubling(rows: list[LevelRow], most: float = LOAD_SIDE_RATE) -> list[tuple[LevelRow, LevelRow, float, float]]:
    """Steps that at least doubled the clients while the rate grew less than `most`, errors not dominating
    either level: (a, b, rate growth, mean latency change)."""
    out = []
    for a, b in pairwise(rows):
        if min(a.rate, a.mean_latency_ms, b.mean_latency_ms) <= 0 or _n(a) <= 0:
            continue
        if max(a.failure_ratio, b.failure_ratio) > ERRORS_DOMINATE:
            continue
        grew, moved = b.rate / a.rate - 1, b.mean_latency_ms / a.mean_latency_ms - 1
        if _n(b) / _n(a) >= LOAD_SIDE_SPAN and grew < most:
            out.append((a, b, grew, moved))
    return out


def _stalled(a: LevelRow, b: LevelRow, grew: float, moved: float) -> str:
    """'from 8 to 16 clients the rate grew only 2.5 % (400 Hz → 410 Hz) while the mean latency stayed flat (…)'."""
    how = "stayed flat" if abs(moved) <= LOAD_SIDE_LATENCY else ("grew" if moved > 0 else "fell")
    return (
        f"from {fmt.level(a.level)} to {_at(b)} the rate grew only {fmt.pct(max(grew, 0.0))} ({fmt.rate(a.rate)} → "
        f"{fmt.rate(b.rate)}) while the mean latency {how} ({fmt.ms(a.mean_latency_ms)} → {fmt.ms(b.mean_latency_ms)})"
    )


def _load_side(rows: list[LevelRow], held: Mapping[Level, Side]) -> CurveShape | None:
    """The rate stopped growing where the load side showed evidence (side.py) at either level of the step: the
    lower level's evidence is cited, else the higher's."""
    for a, b, grew, moved in _doubling(rows, LOAD_SIDE_SATURATED):  # a busy generator's rate is noisy
        proof = next((sd.load for r in (a, b) if (sd := held.get(r.level)) is not None and sd.load), None)
        if proof:
            evidence = (
                f"the limit points at the load side: {_stalled(a, b, grew, moved)}, so the load side, not the "
                f"service, set the rate; {'; '.join(proof)}"
            )
            return CurveShape(name="load_side", evidence=evidence)
    return None


def _flat(rows: list[LevelRow], held: Mapping[Level, Side]) -> CurveShape | None:
    """Neither the rate nor the latency moved over a doubling, and no side showed evidence: say so, name none."""
    for a, b, grew, moved in _doubling(rows):
        if abs(moved) > LOAD_SIDE_LATENCY:
            continue
        sd = held.get(b.level)
        cpu = f" ({sd.cpu})" if sd is not None and sd.cpu else ""
        if sd is not None and sd.hung:
            where = (
                f"at {_at(b)} {sd.hung:,} operations hung waiting for the service, and nothing measured says where "
                f"(no connect was seen waiting); knee was not saturated{cpu}"
            )
        else:
            where = (
                f"nothing measured says where they waited: knee was not saturated{cpu}, no ports ran out and no "
                "connect waited"
            )
        return CurveShape(
            name="flat",
            evidence=(
                f"the rate stopped growing: {_stalled(a, b, grew, moved)}, so the added clients never reached the "
                f"service; {where}"
            ),
        )
    return None


def _retrograde(rows: list[LevelRow], top: int, usl: USLFit | None) -> CurveShape | None:
    peak, last = rows[top], rows[-1]
    if top == len(rows) - 1 or last.rate >= RETROGRADE_FALL * peak.rate:
        return None
    if any(r.failure_ratio > ERRORS_DOMINATE for r in rows[top:]):
        return None
    worst = max(r.failure_ratio for r in rows[top:])
    errors = "without errors" if worst == 0 else f"with few errors (at most {fmt.pct(worst)} failed or hung)"
    model = (
        f"the USL's shape (σ={fmt.num(usl.sigma)}, κ={fmt.num(usl.kappa)})"
        if usl is not None
        else "the USL's shape (not fitted here)"
    )
    return CurveShape(
        name="retrograde",
        evidence=(
            f"retrograde: past its peak ({fmt.rate(peak.rate)} with {_at(peak)}) the rate fell to "
            f"{fmt.rate(last.rate)} at {_at(last)} ({fmt.pct(last.rate / peak.rate)} of the peak) {errors}: "
            f"contention and coherency, {model} — more clients make every operation slower than they add"
        ),
    )


def _pool(rows: list[LevelRow], top: int, usl: USLFit | None) -> CurveShape | None:
    peak = rows[top]
    start = None
    for i in range(len(rows) - 1, -1, -1):  # the plateau: the longest tail of levels near the peak's rate
        r = rows[i]
        if r.rate < (1 - PLATEAU_BAND) * peak.rate or r.failure_ratio > ERRORS_DOMINATE:
            break
        start = i
    if start is None:
        return None
    first, last = rows[start], rows[-1]
    if _n(first) <= 0 or _n(last) / _n(first) < PLATEAU_SPAN or first.mean_latency_ms <= 0:
        return None
    for r in rows[start + 1 :]:
        proportion = (r.mean_latency_ms / first.mean_latency_ms) / (_n(r) / _n(first))
        if abs(proportion - 1) > POOL_LATENCY:
            return None
    lowest = rows[0]
    size = peak.rate * lowest.mean_latency_ms / 1000.0 if lowest.mean_latency_ms > 0 else None
    if size is None:
        estimate = "the pool's size is unknown (no latency at the lowest level)"
    elif start == 0 and _n(lowest) > 1:
        estimate = (
            f"the pool holds at most about {_count(size)} ({fmt.rate(peak.rate)} × {fmt.ms(lowest.mean_latency_ms)} "
            f"at {_at(lowest)}, already on the plateau: measure lower levels)"
        )
    else:
        assume = (
            "" if _n(lowest) <= 1 else f", taking the latency at {_at(lowest)}, the lowest level, for the service time"
        )
        estimate = (
            f"the pool holds about {_count(size)} ({fmt.rate(peak.rate)} × {fmt.ms(lowest.mean_latency_ms)} "
            f"at {_at(lowest)}{assume})"
        )
    disown = ""
    if usl is not None and usl.n_star is not None:
        disown = f"; the USL's N*={usl.n_star:.0f} is not supported by this curve (it flattens, it does not turn down)"
    return CurveShape(
        name="pool",
        evidence=(
            f"a fixed pool with a queue: from {fmt.level(first.level)} to {_at(last)} the rate stayed within "
            f"{fmt.pct(PLATEAU_BAND)} of its peak ({fmt.rate(peak.rate)}) while the mean latency grew with the "
            f"clients ({fmt.ms(first.mean_latency_ms)} → {fmt.ms(last.mean_latency_ms)} for "
            f"{_n(last) / _n(first):.3g}× the clients); {estimate}{disown}"
        ),
        pool_size=size,
    )


def plateau_pool(rows: list[LevelRow], rate: float) -> str:
    """A plateau the shape rules did not name a pool (its latency did not grow in proportion, errors past it), sized
    as one all the same (docs/analysis.md: a plateau is a pool of about its rate × the single-client latency), or
    why it cannot be."""
    lowest = rows[0]
    if lowest.mean_latency_ms <= 0 or rate <= 0:
        return "the plateau cannot be sized as a pool: no operation's latency was measured at the lowest level"
    size = rate * lowest.mean_latency_ms / 1000.0
    assume = "" if _n(lowest) <= 1 else f", taking the latency at {_at(lowest)}, the lowest level, for the service time"
    return (
        f"the plateau is what a pool of about {_count(size)} gives ({fmt.rate(rate)} × "
        f"{fmt.ms(lowest.mean_latency_ms)} at {_at(lowest)}{assume})"
    )


def _count(x: float) -> str:
    return f"{x:.0f}" if x >= 10 else f"{x:.1f}"


def _rising(rows: list[LevelRow], top: int) -> CurveShape | None:
    last, before = rows[-1], rows[-2]
    if top != len(rows) - 1 or before.rate <= 0 or last.rate <= (1 + STILL_RISING) * before.rate:
        return None
    return CurveShape(
        name="rising",
        evidence=(
            f"still rising at the highest level: {fmt.rate(last.rate)} with {_at(last)}, "
            f"{fmt.pct(last.rate / before.rate - 1)} above {fmt.rate(before.rate)} with {_at(before)}: "
            "no limit reached yet, measure higher levels"
        ),
    )
