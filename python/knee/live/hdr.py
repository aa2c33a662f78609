"""Read the engine's HdrHistogram (V2 encoding, deflate: `steps/<n>-<group>.hgrm`, `ShardResult.histogram`) into
the fixed buckets of `/metrics`' latency histogram.

The encoding (HdrHistogram's "V2 compressed"): a cookie and a length (big-endian int32 each), then zlib data
holding the V2 header (cookie, payload length, normalising index offset, significant digits, lowest and
highest trackable value, a float ratio) and the counts, each a ZigZag LEB128 varint, a negative one a run of
that many empty counts. Counts map to values as in every HdrHistogram port: `_value_at(index)`.

A count holds every value within the histogram's precision (3 significant digits here) of its value; it is
put on the side of a bucket bound where its middle value lies, so an operation within 0.1 % of a bound may
be counted on either side of it.
"""

from __future__ import annotations

import math
import struct
import zlib
from dataclasses import dataclass

V2_COOKIE = 0x1C849303
V2_COMPRESSED_COOKIE = 0x1C849304
_HEADER = struct.Struct(">iiiiqqd")


class HistogramError(ValueError):
    """Bytes that are not an HdrHistogram in the V2 (deflate) encoding."""


@dataclass(frozen=True)
class Buckets:
    """Cumulative counts of values at or below each bound (Prometheus' `le`), the count and the sum."""

    bounds: tuple[float, ...]  # in the histogram's unit (µs for the engine's), ascending, +Inf not included
    cumulative: tuple[int, ...]  # one per bound
    count: int
    total: float  # the values' sum, each count at its middle value


def _varints(data: bytes) -> list[int]:
    """ZigZag LEB128 (at most 9 bytes, the 9th a whole byte) → integers."""
    out = []
    i, n = 0, len(data)
    while i < n:
        shift = value = 0
        for k in range(9):
            if i >= n:
                raise HistogramError("a count is cut short")
            b = data[i]
            i += 1
            if k == 8:
                value |= b << 56
                break
            value |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        out.append((value >> 1) ^ -(value & 1))
    return out


def decode_counts(blob: bytes) -> tuple[list[int], int, int]:
    """(the counts by index, significant digits, lowest trackable value) of a V2 deflate encoding."""
    if len(blob) < 8:
        raise HistogramError("too short for an HdrHistogram")
    cookie, length = struct.unpack_from(">ii", blob)
    if cookie & ~0xF0 != V2_COMPRESSED_COOKIE:  # the high nibble of the low byte says the word size
        raise HistogramError(f"cookie {cookie:#x} is not HdrHistogram's V2 compressed encoding")
    try:
        raw = zlib.decompress(blob[8 : 8 + length])
    except zlib.error as exc:
        raise HistogramError(f"the compressed payload does not inflate ({exc})") from None
    if len(raw) < _HEADER.size:
        raise HistogramError("the header is cut short")
    cookie, payload, offset, digits, lowest, _highest, _ratio = _HEADER.unpack_from(raw)
    if cookie & ~0xF0 != V2_COOKIE or offset != 0 or not 0 <= digits <= 5 or lowest < 1:
        raise HistogramError("an HdrHistogram header this reader does not handle")
    counts: list[int] = []
    for v in _varints(raw[_HEADER.size : _HEADER.size + payload]):
        if v < 0:
            counts.extend([0] * -v)
        else:
            counts.append(v)
    return counts, digits, lowest


def _geometry(digits: int, lowest: int) -> tuple[int, int]:
    """(unit magnitude, sub-bucket half-count magnitude) of a histogram of `digits` significant digits."""
    unit = math.floor(math.log2(lowest))
    single = 2 * 10**digits
    sub_magnitude = max(1, math.ceil(math.log2(single)))
    return unit, sub_magnitude - 1


def _value_at(index: int, unit: int, half_magnitude: int) -> tuple[int, int]:
    """(the lowest value, the size of the range) a count index stands for."""
    half = 1 << half_magnitude
    bucket = (index >> half_magnitude) - 1
    sub = (index & (half - 1)) + half
    if bucket < 0:
        sub -= half
        bucket = 0
    return sub << (bucket + unit), 1 << (bucket + unit)


def buckets(blob: bytes, bounds: tuple[float, ...]) -> Buckets:
    """The histogram in `blob` counted into `bounds` (its unit: µs for the engine's histograms)."""
    counts, digits, lowest = decode_counts(blob)
    unit, half_magnitude = _geometry(digits, lowest)
    below = [0] * len(bounds)
    total = 0.0
    count = 0
    for index, n in enumerate(counts):
        if not n:
            continue
        low, size = _value_at(index, unit, half_magnitude)
        middle = low + (size - 1) / 2 if size > 1 else float(low)
        count += n
        total += n * middle
        for k, bound in enumerate(bounds):
            if middle <= bound:
                below[k] += n
                break
    cumulative = []
    running = 0
    for n in below:
        running += n
        cumulative.append(running)
    return Buckets(bounds, tuple(cumulative), count, total)
