"""Locust's side of `make bench`: FastHttpUser (its fastest client), no wait between requests."""

from locust import constant, task
from locust.contrib.fasthttp import FastHttpUser


class Bench(FastHttpUser):
    wait_time = constant(0)

    @task
    def index(self) -> None:
        self.client.get("/")
