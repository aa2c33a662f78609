"""Secrets are an object handed along, not a process-wide registry: a run's scrub knows its own values only."""

from __future__ import annotations

import json

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


def test_json_is_scrubbed_inside_its_strings_and_stays_the_json_it_was() -> None:
    # a cookie consent=true, a PIN of digits, a tab named as the group: knee's own JSON holds those words too
    s = Secrets({"c": "true", "pin": "1000", "tab": "main", "tok": 'hun"ter2\\x'}, names={"main", "groups"})
    doc = {"groups": {"main": {"ok": True, "n": 1000, "sample": 'denied: hun"ter2\\x true 1000'}}, "g": "main"}
    out = json.loads(s.scrub_json(json.dumps(doc), indent=2))
    assert out == {"groups": {"main": {"ok": True, "n": 1000, "sample": "denied: <redacted> true 1000"}}, "g": "main"}
    assert s.scrub("at_collapse: true, 1000 Hz, group main") == "at_collapse: true, 1000 Hz, group main"
    assert Secrets({"a": "-Infinity", "b": "1e3", "c": "NaN"}).scrub("1e3 NaN -Infinity") == "1e3 NaN -Infinity"
    assert Secrets({"a": "main1"}, names={"main"}).scrub("main1") == "<redacted>"


def test_loading_keeps_the_scenarios_names_out_of_the_scrub() -> None:
    table = {**TABLE, "groups": {"main": {**TABLE["groups"]["main"], "cookies": {"tab": "main", "id": "abc-123-xyz"}}}}
    loaded = from_raw(table, Source("command line"), secrets={"tok": "s3cr3t-token"})
    assert loaded.secrets.scrub("group main, id abc-123-xyz") == "group main, id <redacted>"
