"""The Python subprocess baseline for `make bench`: N threads, each running PROGRAM back to back for SECONDS.

Usage: pyexec.py CONCURRENCY SECONDS PROGRAM [ARGS...]; prints {"ops", "failed", "elapsed_s"} as JSON.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time


def main(argv: list[str]) -> int:
    concurrency, seconds, program = int(argv[1]), float(argv[2]), argv[3:]
    counts = {"ops": 0, "failed": 0}
    lock = threading.Lock()
    start = time.monotonic()
    deadline = start + seconds

    def client() -> None:
        ops = failed = 0
        while time.monotonic() < deadline:
            if subprocess.run(program, check=False).returncode == 0:
                ops += 1
            else:
                failed += 1
        with lock:
            counts["ops"] += ops
            counts["failed"] += failed

    threads = [threading.Thread(target=client) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps({**counts, "elapsed_s": time.monotonic() - start}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
