"""A cgroup's CPU quota (a container's CPU limit) read as knee reads it (knee.machine.cpu.cpu_quota), from a /proc
and a cgroup tree written here: v1's cfs quota and period, v2's cpu.max, the least along the path to the root. The
real thing, a sweep whose clients a quota holds back, is tests/integration/test_why.py's."""

from __future__ import annotations

from pathlib import Path

import pytest

from knee.machine.cpu import cpu_quota, saturated


def _proc(tmp_path: Path, cgroup: str, mountinfo: str) -> Path:
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "cgroup").write_text(cgroup)
    (proc / "mountinfo").write_text(mountinfo)
    return proc


def _write(d: Path, **files: str) -> None:
    d.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (d / name.replace("_", ".", 1)).write_text(text + "\n")


def test_v1_the_least_quota_from_the_process_cgroup_up_to_the_hierarchy_root(tmp_path: Path) -> None:
    cpu = tmp_path / "cg" / "cpu,cpuacct"
    _write(cpu, cpu_cfs_quota_us="-1", cpu_cfs_period_us="100000")
    _write(cpu / "kube", cpu_cfs_quota_us="300000", cpu_cfs_period_us="100000")  # 3 CPUs for the pod
    _write(cpu / "kube" / "ctr", cpu_cfs_quota_us="150000", cpu_cfs_period_us="100000")  # 1.5 for the container
    proc = _proc(
        tmp_path,
        "12:memory:/kube/ctr\n4:cpu,cpuacct:/kube/ctr\n0::/\n",
        f"30 25 0:26 / {tmp_path}/cg/memory rw,relatime - cgroup cgroup rw,memory\n"
        f"31 25 0:27 / {cpu} rw,relatime shared:9 - cgroup cgroup rw,cpu,cpuacct\n",
    )
    assert cpu_quota(proc) == 1.5
    (cpu / "kube" / "cpu.cfs_quota_us").write_text("50000\n")  # the pod's half a CPU holds the container too
    assert cpu_quota(proc) == 0.5


def test_v2_cpu_max_under_a_mount_whose_root_is_the_container(tmp_path: Path) -> None:
    # a container's own namespace: /proc/self/cgroup says /, the mount's root is the container's cgroup
    root = tmp_path / "cg"
    _write(root, cpu_max="250000 100000")
    _write(root / "inner", cpu_max="max 100000")
    proc = _proc(tmp_path, "0::/inner\n", f"40 30 0:35 / {root} rw - cgroup2 cgroup2 rw,nsdelegate\n")
    assert cpu_quota(proc) == 2.5
    (root / "cpu.max").write_text("max 100000\n")
    assert cpu_quota(proc) == 0.0  # no quota anywhere


@pytest.mark.parametrize("cgroup", ["", "garbage\n", "4:cpu:/gone\n"])
def test_nothing_readable_is_no_quota(tmp_path: Path, cgroup: str) -> None:
    proc = _proc(tmp_path, cgroup, f"31 25 0:27 / {tmp_path}/none rw - cgroup cgroup rw,cpu\n")
    assert cpu_quota(proc) == 0.0
    assert cpu_quota(tmp_path / "no-such-proc") == 0.0


def test_a_quota_below_the_cores_is_the_limit_saturation_is_judged_against() -> None:
    # knee and its children used 0.48 CPUs of 2 cores: idle for the cores, the whole of a 0.5-CPU quota
    assert not saturated(0.48, 0.6, 2)
    assert saturated(0.48, 0.6, 2, 0.5)
    assert not saturated(0.3, 0.6, 2, 0.5)
