"""The tables about the machines around a run: what of the target it watches each step (`[monitor]`: its process
tree here, its machines' Prometheus exporters), and where the run is served while it goes (`[serve]`). Where its
steps run (`[cluster]`) is knee.scenario.cluster."""

from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator, Field, field_validator, model_validator

from knee.scenario.address import listen_address
from knee.scenario.fields import Duration, Table


def _exporter_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be the http:// or https:// URL of a Prometheus exporter, e.g. http://db:9100/metrics")
    return value


class Monitor(Table):
    """The target's process tree to sample on this machine (docs/diagnosis.md): by pid or by name; and the Prometheus
    exporters of the target's machines to scrape each step (`prometheus`), with metrics of theirs to keep by name."""

    pid: Annotated[int, Field(gt=0)] | None = None
    name: Annotated[str, Field(min_length=1)] | None = None
    prometheus: list[Annotated[str, AfterValidator(_exporter_url)]] = Field(default_factory=list)
    metrics: list[Annotated[str, Field(pattern=r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")]] = Field(default_factory=list)

    @model_validator(mode="after")
    def _one(self) -> "Monitor":
        if self.pid is not None and self.name is not None:
            raise ValueError("give pid or name, not both")
        if self.metrics and not self.prometheus:
            raise ValueError("metrics names metrics of the endpoints in prometheus; give prometheus = [URL, …] too")
        return self

    @property
    def enabled(self) -> bool:
        return self.pid is not None or self.name is not None


class Serve(Table):
    """The live page and `/metrics` while the run goes (docs/live.md): where they listen, and how long knee keeps
    serving the final state after the run for a page or a scraper that has not read it yet."""

    address: Annotated[str, Field(min_length=1)] | None = None  # [HOST:]PORT; HOST defaults to 127.0.0.1
    linger: Duration = 15.0

    @field_validator("address")
    @classmethod
    def _address(cls, v: str | None) -> str | None:
        if v is not None:
            listen_address(v)  # its ValueError names what is wrong
        return v

    def listen(self) -> tuple[str, int] | None:
        """(host, port) to serve on; None: no serving."""
        return listen_address(self.address) if self.address is not None else None
