"""The operations log (`--operations-log FILE`, the engine's crate::oplog): every measured operation of a step,
written by the engine as it goes, read back here as a pandas DataFrame (docs/reports.md "Every operation").

    import knee
    ops = knee.read_operations("ops.bin")
    ops.groupby("outcome").latency_ms.describe()

The file is a header line of JSON, then fixed-size little-endian records (`DTYPE`); the records are in the order
the engine's threads wrote them, and are returned by start. A file cut short (knee was killed) is read up to its
last whole record.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas

FORMAT = "knee-operations"
DTYPE = np.dtype(
    [
        ("start_us", "<u8"),  # from the shard's start to the operation's start (its intended start, open loop)
        ("latency_us", "<u4"),  # from that start to its end
        ("wait_us", "<u4"),  # how long after its intended start it started (open loop; 0 closed)
        ("client", "<u4"),
        ("bytes_sent", "<u4"),
        ("bytes_received", "<u4"),
        ("request", "<u2"),
        ("group", "u1"),
        ("outcome", "u1"),
        ("class", "u1"),  # 255: none
        ("reserved", "V7"),
    ]
)
NO_CLASS = 255


def read_records(path: str | Path) -> tuple[dict[str, Any], np.ndarray]:
    """The log's header and its records (a structured array of `DTYPE`), sorted by start."""
    data = Path(path).read_bytes()
    end = data.find(b"\n")
    try:
        header = json.loads(data[:end]) if end >= 0 else None
    except ValueError:
        header = None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ValueError(f"{str(path)!r} is not an operations log of knee (--operations-log): its first line says not")
    if header.get("record_bytes") != DTYPE.itemsize:
        raise ValueError(
            f"{str(path)!r}: records of {header.get('record_bytes')} bytes, this knee reads {DTYPE.itemsize}; read it "
            f"with the knee (version {header.get('version')}) that wrote it"
        )
    body = data[end + 1 :]
    whole = len(body) - len(body) % DTYPE.itemsize  # a file cut short ends in part of a record
    records = np.frombuffer(body[:whole], dtype=DTYPE)
    return header, records[np.argsort(records["start_us"], kind="stable")]


def read_operations(path: str | Path) -> pandas.DataFrame:
    """The operations log at `path` as a DataFrame, a row an operation, by start: `start_s` (seconds after the
    step's start; `df.attrs["started_unix"]` is that start), `latency_ms`, `wait_ms`, `group`, `request` (the
    request's name in its group's mix, empty without one), `outcome` (succeeded, failed, hung, abandoned), `class`
    (a failure's class, else missing), `client`, `bytes_sent`, `bytes_received`. Needs pandas (pip install pandas)."""
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("knee.read_operations returns a pandas DataFrame: pip install pandas") from None
    header, r = read_records(path)
    width = max([1, *(len(names) for names in header["requests"])])
    table = np.array([[*names, *[""] * (width - len(names))] for names in header["requests"]], dtype=object)
    request = table[r["group"], np.minimum(r["request"], width - 1)] if len(r) else np.array([], dtype=object)
    classes = r["class"].astype(np.int16)
    classes[classes == NO_CLASS] = -1
    frame = pd.DataFrame(
        {
            "start_s": r["start_us"] / 1e6,
            "latency_ms": r["latency_us"] / 1e3,
            "wait_ms": r["wait_us"] / 1e3,
            "group": pd.Categorical.from_codes(r["group"].astype(np.int16), header["groups"]),
            "request": pd.Categorical(request),
            "outcome": pd.Categorical.from_codes(r["outcome"].astype(np.int16), header["outcomes"]),
            "class": pd.Categorical.from_codes(classes, header["classes"]),
            "client": r["client"].astype(np.int64),
            "bytes_sent": r["bytes_sent"].astype(np.int64),
            "bytes_received": r["bytes_received"].astype(np.int64),
        }
    )
    frame.attrs["started_unix"] = header["started_unix"]
    return frame
