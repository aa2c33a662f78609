"""Secrets are an object handed along, not a process-wide registry: a run's scrub knows its own values only."""

from __future__ import annotations

from knee.scenario import Secrets, Source, from_raw

TABLE = {
    "groups": {
        "main": {
            "kind": "http",
            "url": "http://127.0.0.1:1/",
            "headers": {"Authorization": "Bearer ${tok}", "X-Api-Key": "literal-key-value"},
        }
    },
    "sweep": {"levels": [1], "duration": 1},
}


def test_scrub_replaces_each_value_longest_first_and_leaves_short_ones() -> None:
    s = Secrets({"a": "abcd", "b": "abcdefgh", "c": "xyz"})
    assert s.scrub("abcdefgh abcd xyz") == "<redacted> <redacted> xyz"
    assert dict(s) == {"a": "abcd", "b": "abcdefgh", "c": "xyz"}
    assert "abcd" not in repr(s)


def test_loading_returns_the_runs_secrets_lifted_credentials_included() -> None:
    loaded = from_raw(TABLE, Source("command line"), secrets={"tok": "s3cr3t-token"})
    assert dict(loaded.secrets) == {"tok": "s3cr3t-token", "main_header_x_api_key": "literal-key-value"}
    assert loaded.secrets.scrub("Bearer s3cr3t-token literal-key-value") == "Bearer <redacted> <redacted>"
    other = from_raw(TABLE, Source("command line"), secrets={"tok": "another-token"})
    assert other.secrets.scrub("s3cr3t-token") == "s3cr3t-token"  # one run's scrub knows only its own values
