"""A baseload on a Dask cluster: kept across steps, split over the workers like a step, each worker's part told to
`cut` (hand over its window) or `stop` through a command queue."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from knee.engine import ShardResult
from knee.errors import UserError
from knee.executor.dask_tasks import background
from knee.executor.dataparts import without_files
from knee.executor.shards import LoadGenerator, merge_results, split
from knee.spec import EngineSpec

if TYPE_CHECKING:
    from knee.executor.dask import DaskExecutor


class LostPart(UserError):
    """A part of the baseload did not answer (its worker lost); `window`: the other parts' answers, merged (None:
    none answered). Each part answers a cut once: what they handed over is only here."""

    def __init__(self, message: str, window: ShardResult | None) -> None:
        super().__init__(message)
        self.window = window


class DaskBackground:
    """A baseload kept across steps, split over the workers like a step; `cut()` and `stop()` go to every
    worker's part through its command queue."""

    def __init__(self, executor: DaskExecutor, spec: EngineSpec) -> None:
        from knee.executor.dask import _dask

        distributed = _dask()
        self._client = executor.client
        self._executor = executor
        workers = executor.workers()
        key = f"knee-bg-{uuid.uuid4().hex[:12]}"
        self._parts = []
        self._lost: set[int] = set()
        chosen = [(w, s) for w, s in zip(workers, split(spec, workers), strict=True) if s is not None]
        chosen = executor._with_data(chosen, remember=False)
        texts = executor._shipping.texts([(w.address, s) for w, s in chosen])
        for i, (w, s) in enumerate(chosen):
            fut = self._client.submit(
                background,
                without_files(s).to_json(),
                key,
                i,
                executor.lease,
                texts=texts[i],
                key=f"{key}-{i}",
                workers=[w.address],
                pure=False,
            )
            commands = distributed.Queue(f"{key}-cmd-{i}", client=self._client)
            replies = distributed.Queue(f"{key}-reply-{i}", client=self._client)
            self._parts.append((w, fut, commands, replies))

    def _ask(self, command: str) -> ShardResult:
        """Every part's answer to `command`; a part that does not answer is lost (not asked again: a stop after a
        lost cut waited 30 s more for it), its error raised once every other part's answer is taken."""
        live = [p for i, p in enumerate(self._parts) if i not in self._lost]
        got, errors = [], []
        with self._executor.scheduler_needed():
            for _, _, commands, _ in live:
                commands.put(command)
            for i, (w, fut, _, replies) in enumerate(self._parts):
                try:
                    if i not in self._lost:
                        got.append(self._reply(w, fut, replies, command))
                except UserError as exc:
                    self._lost.add(i)
                    errors.append(exc)
        if errors:  # the parts that answered were cut: their windows go with the error, not lost with it
            raise LostPart(str(errors[0]), merge_results(got))
        out = merge_results(got)
        if out is None:
            raise UserError("the baseload runs on no worker")
        return out

    @staticmethod
    def _reply(w: LoadGenerator, fut: Any, replies: Any, command: str) -> ShardResult:
        try:
            data = replies.get(timeout=30)
        except TimeoutError:
            if fut.status == "error":
                raise UserError(f"the baseload on Dask worker {w.named} failed: {fut.exception()}") from None
            raise UserError(f"the baseload on Dask worker {w.named} did not answer {command}") from None
        return ShardResult.from_bytes(data)

    def cut(self) -> ShardResult:
        return self._ask("cut")

    def stop(self) -> ShardResult:
        return self._ask("stop")
