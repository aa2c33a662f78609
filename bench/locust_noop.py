"""Locust's side of the no-op flow benchmark: a task that does nothing but report itself, as a custom client
does (Locust counts only what fires its `request` event), with no wait between tasks."""

import time

from locust import User, constant, task


class Noop(User):
    wait_time = constant(0)

    @task
    def noop(self) -> None:
        start = time.perf_counter()
        self.environment.events.request.fire(
            request_type="noop",
            name="noop",
            response_time=(time.perf_counter() - start) * 1000,
            response_length=0,
            exception=None,
            context={},
        )
