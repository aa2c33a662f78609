"""The TOML writer (knee.scenario.tomlout) writes the request mixes importers produce as arrays of tables, and what
tomllib reads back is what was written."""

from __future__ import annotations

import tomllib

from knee.scenario.tomlout import to_toml


def test_arrays_of_tables_round_trip() -> None:
    table = {
        "name": "imported",
        "secrets": ["main_cookie_session"],
        "vars": {"target": "http://127.0.0.1:8080"},
        "groups": {
            "main": {
                "kind": "http",
                "clients": "level",
                "headers": {"Accept-Language": "fr"},
                "requests": [
                    {
                        "name": "get_index",
                        "weight": 3,
                        "url": "${target}/index.html?x=1",
                        "headers": {"Accept": "text/html", "X Odd": "\x7f\x01"},
                        "cookies": {"session": "${main_cookie_session}"},
                        "expect_status": [[200, 399], [404, 404]],
                    },
                    {"name": "post_login", "weight": 1, "method": "POST", "body": 'a="1"\nb=2'},
                ],
            }
        },
        "sweep": {"levels": "auto", "duration": "10s"},
        "data": [{"name": "users", "file": "users.csv"}],
    }
    text = to_toml(table)
    assert tomllib.loads(text) == table
    assert '[[groups.main.requests]]\nname = "get_index"\nweight = 3\n' in text
    assert 'headers = {Accept = "text/html", "X Odd" = "\\u007f\\u0001"}' in text
    assert text.index("[sweep]") < text.index("[[data]]")


def test_a_key_toml_does_not_allow_bare_is_quoted() -> None:
    # `--var café=x --save-scenario s.toml` wrote `café = "x"`, which knee (tomllib) then refused
    table = {"vars": {"café": "x", "ÉTAT": "1", "plain_key-2": "y"}}
    text = to_toml(table)
    assert tomllib.loads(text) == table
    assert '"caf\\u00e9" = "x"' in text and "plain_key-2 = " in text
