"""Preflight: will the target answer and this machine let knee do what a run needs, before any load.

- `rules`: the machine's limits held against the largest step (`Load`): open files, ephemeral ports,
  accept backlog, memory; each rule reports a `Check` (what, why, the fix);
- `probes`: `knee doctor` runs an exec command once (`run_once`) and says what that means (`probe_check`);
- `scenario`: a scenario's preflight: reachability, then the rules (`preflight_scenario` before every run,
  `check_scenario` / `check_machine` for `knee doctor`).

docs/doctor.md states each rule and its numbers.
"""

from knee.preflight.probes import Probe, probe_check, run_once
from knee.preflight.rules import TIME_WAIT_S, Check, Connections, Load, Preflight, fds_needed, memory_needed, preflight
from knee.preflight.scenario import DOCTOR_CLIENTS, check_machine, check_scenario, load_of, preflight_scenario

__all__ = [
    "DOCTOR_CLIENTS",
    "TIME_WAIT_S",
    "Check",
    "Connections",
    "Load",
    "Preflight",
    "Probe",
    "check_machine",
    "check_scenario",
    "fds_needed",
    "load_of",
    "memory_needed",
    "preflight",
    "preflight_scenario",
    "probe_check",
    "run_once",
]
