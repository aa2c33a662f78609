"""A worker that takes batches (docs/worker-protocol.md, "Batches"): it copies every line knee sends it to
`<first argument>.<process number>` and answers each `run` line with one `done` line. With `--odd` its answers
are `done` lines with an odd count of numbers, which are not replies. With `--to-eof` it reads on after `stop`
until its input ends, then writes `eof` to the copy."""

import json
import sys

odd = "--odd" in sys.argv
to_eof = "--to-eof" in sys.argv
log = None
for line in sys.stdin:
    msg = json.loads(line)
    if log is None:
        log = open(f"{sys.argv[1]}.{msg.get('process')}", "w")  # noqa: SIM115 - open for the process's life
    log.write(line)
    log.flush()
    if msg["op"] == "start":
        print(json.dumps({"ready": True, "batch": True}), flush=True)
    elif msg["op"] == "run":
        print(json.dumps({"done": [0] if odd else msg["ops"]}, separators=(",", ":")), flush=True)
    elif msg["op"] == "stop" and not to_eof:
        break
if to_eof and log is not None:
    log.write("eof\n")
