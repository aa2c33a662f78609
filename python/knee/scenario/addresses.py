"""Source addresses (`source_addr`, `--source-addr`): the local addresses clients connect from.

One local address reaches one service address through at most one connection per ephemeral port (about
28 000 with Linux's default range); a list or range of local addresses lifts that cap (client c connects
from address c mod n). Each item is an address (`127.0.0.2`, `::1`) or an inclusive range of them
(`127.0.0.2-127.0.0.9`); items may be comma-separated in one string.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import BeforeValidator

MAX_ADDRESSES = 65536  # more than any machine has a use for: a typo in a range, not a plan

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def _one(text: str) -> Address:
    try:
        return ipaddress.ip_address(text.strip())
    except ValueError:
        raise ValueError(f"{text.strip()!r} is not an IP address (like 127.0.0.2 or ::1)") from None


def expand(items: str | Sequence[str]) -> list[str]:
    """Every address the items name, in order: `["127.0.0.2-127.0.0.4"]` → 127.0.0.2, .3, .4. A ValueError
    says which item is wrong and how."""
    parts = [p for item in ([items] if isinstance(items, str) else items) for p in str(item).split(",")]
    out: list[str] = []
    for part in (p.strip() for p in parts):
        if not part:
            continue
        lo_text, dash, hi_text = part.partition("-")
        lo = _one(lo_text)
        hi = _one(hi_text) if dash else lo
        if lo.version != hi.version:
            raise ValueError(f"range {part!r} mixes IPv4 and IPv6; give both ends of one family")
        if int(hi) < int(lo):
            raise ValueError(f"range {part!r} ends before it starts; give the lower address first")
        if len(out) + int(hi) - int(lo) + 1 > MAX_ADDRESSES:
            raise ValueError(f"{part!r} makes more than {MAX_ADDRESSES} addresses; give a smaller range")
        out.extend(str(type(lo)(n)) for n in range(int(lo), int(hi) + 1))
    if not out:
        raise ValueError("names no address; give addresses like 127.0.0.2 or a range like 127.0.0.2-127.0.0.9")
    families = {ipaddress.ip_address(a).version for a in out}
    if len(families) > 1:
        raise ValueError("mixes IPv4 and IPv6 addresses; a service address is of one family")
    return out


def of_group(given: Sequence[str]) -> list[str]:
    """A group's `source_addr` (validated) as the addresses it names; none given: none."""
    return expand(given) if given else []


def not_local(addresses: Sequence[str]) -> tuple[str, str] | None:
    """The first address this machine cannot connect from, with the system's reason (None: all can)."""
    for a in addresses:
        family = socket.AF_INET6 if ":" in a else socket.AF_INET
        try:
            with socket.socket(family, socket.SOCK_STREAM) as s:
                s.bind((a, 0))
        except OSError as exc:
            return a, exc.strerror or str(exc)
    return None


def _source_addrs(value: Any) -> Any:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError('must be addresses like "127.0.0.2", ranges like "127.0.0.2-127.0.0.9", or a list of them')
    if not value:  # none: the kernel picks (the default, and what a run record says then)
        return value
    missing = not_local(expand(value))
    if missing is not None:
        raise ValueError(
            f"{missing[0]} is not an address of this machine ({missing[1]}); give addresses it has (`ip addr`)"
        )
    return value


# Local addresses the clients connect from (knee.scenario.addresses), as given: expanded by knee.plan.
SourceAddrs = Annotated[list[str], BeforeValidator(_source_addrs)]
