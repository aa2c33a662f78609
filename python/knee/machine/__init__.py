"""What is true of the machine knee runs on, at run time, recorded in run.json.

- `cpu`: the load side's CPU over a step (`CpuMeter`, `saturated`);
- `host`: this machine's limits (`Machine`: open files, ephemeral ports, sysctls, memory, cores);
- `network`: where the network groups connect (`reachable`, `Endpoint`, `host_is_local`, `target_hosts`);
- `kernel`: the kernel's counters over a step (`HostSampler`), `sockets` the TCP socket census under it;
- `monitor`: the target's process tree over a step (`TargetMonitor`).

The analysis never calls these: what it needs of them is in the run record.
"""
