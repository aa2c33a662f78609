#!/usr/bin/env python3
"""Rewrite tests/durations.tsv from the `--durations` tables of pytest logs (make test-py prints them).

    python scripts/test-durations.py LOG [LOG ...]

tests/conftest.py starts the longest tests first, so that a pass does not end with one worker running a long test
that was collected last while the others wait: make test-py's passes hand tests to their workers in collection
order, and the long ones (test_too_little, test_sweep_rates, test_soak, …) sort late. A test's time is its setup,
call and teardown together; a test the file does not name keeps its place after the named ones. A stale file only
orders worse, never wrongly.
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "tests" / "durations.tsv"
LINE = re.compile(r"^(\d+(?:\.\d+)?)s (?:setup|call|teardown)\s+(\S.*)$")
SHORTEST = 2.0  # seconds: shorter tests are not worth naming


def main(logs: list[str]) -> int:
    if not logs:
        sys.exit(__doc__)
    took: dict[str, float] = defaultdict(float)
    for log in logs:
        for line in Path(log).read_text(errors="replace").splitlines():
            m = LINE.match(line.strip())
            if m:
                took[m.group(2).split("@")[0]] += float(m.group(1))
    rows = sorted(((s, n) for n, s in took.items() if s >= SHORTEST), reverse=True)
    head = "# seconds\ttest: the longest tests, started first (scripts/test-durations.py LOG... rewrites this)\n"
    OUT.write_text(head + "".join(f"{s:.1f}\t{n}\n" for s, n in rows))
    print(f"wrote {OUT}: {len(rows)} tests of {SHORTEST:g} s or more")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
