"""Importers: recordings of real traffic → scenarios (`knee import`, `--targets`).

build.py    recorded requests → a scenario's tables (a group per origin, weights, secrets, body files)
har.py      a HAR 1.2 recording (a browser's or a proxy's)
curl.py     a curl command line
targets.py  vegeta's targets files (http and json formats)
"""
