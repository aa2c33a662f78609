"""Batch jobs' keys (`[cluster] jobqueue`, docs/distributed.md): validated with errors naming the key, turned into
dask-jobqueue's arguments, and the `--cluster KIND:JOBS` form; the job scripts docs/distributed.md shows (Slurm,
HTCondor: no pool can be installed here) are what dask-jobqueue writes from the keys shown beside them. The jobs
themselves run in tests/integration/test_slurm.py."""

from __future__ import annotations

import re

import pytest

from knee.errors import UserError
from knee.executor.jobqueue import job_arguments, make_cluster, parse_cluster
from knee.scenario import parse_scenario
from knee.scenario.cluster import Cluster

from conftest import REPO
from servers import free_port

GROUP = '[groups.main]\nkind = "http"\nurl = "http://127.0.0.1:1/"\nclients = 1\nduration = "1s"\n'


def cluster_of(table: str) -> Cluster:
    return parse_scenario(f"{GROUP}[cluster]\n{table}", "s.toml").cluster


def error_of(table: str) -> str:
    with pytest.raises(UserError) as info:
        cluster_of(table)
    return str(info.value)


@pytest.mark.parametrize(
    ("given", "walltime"),
    [
        ('"2h"', "02:00:00"),
        ('"90m"', "01:30:00"),
        ('"1-02:00:00"', "26:00:00"),
        ('"1-2"', "26:00:00"),
        ('"30:00"', "00:30:00"),
        ('"2:00:00"', "02:00:00"),
    ],
)
def test_a_walltime_is_a_clock_or_a_duration(given: str, walltime: str) -> None:
    assert cluster_of(f'jobqueue = "slurm"\nwalltime = {given}').walltime == walltime


@pytest.mark.parametrize(
    ("table", "says"),
    [
        ('jobqueue = "slurm"\nwalltime = "90"', 's.toml line 8: cluster.walltime must be a wall time like "02:00:00"'),
        ('jobqueue = "slurm"\nmemory = "4"', 's.toml line 8: cluster.memory must be a size like "4GB"'),
        ('jobqueue = "lsf"', "cluster.jobqueue must be 'slurm', 'htcondor', 'pbs' or 'sge'"),
        ('jobqueue = "slurm"\njobs = 0', "cluster.jobs must be at least 1"),
        ('jobqueue = "slurm"\njob = 2', "cluster.job is not a known key"),
        ('jobqueue = "htcondor"\nwalltime = "2h"', "walltime is not a key for HTCondor jobs"),
        ('jobqueue = "slurm"\ndisk = "2GB"', "disk is not a key for Slurm jobs"),
        ('jobqueue = "htcondor"\ndirectives = ["x"]', "directives must be a table for HTCondor jobs"),
        ('jobqueue = "pbs"\ndirectives = {a = "b"}', "directives must be a list for PBS jobs"),
        ('jobqueue = "slurm"\njobs = 2\nmin_jobs = 3', "min_jobs (3) must not be more than jobs (2)"),
        ('address = "tcp://h:8786"\njobqueue = "slurm"', "give address (a running Dask scheduler) or jobqueue"),
        ('lease = "1s"', "cluster.lease must be at least 2"),
    ],
)
def test_a_mistake_is_one_sentence_naming_the_key(table: str, says: str) -> None:
    text = error_of(table)
    assert says in text and "\n" not in text, text


def test_the_keys_become_dask_jobqueues_arguments() -> None:
    slurm = cluster_of(
        'jobqueue = "slurm"\njobs = 4\ncores = 2\nmemory = "4GB"\nwalltime = "2h"\nqueue = "batch"\n'
        'account = "load"\ndirectives = ["--exclusive"]\nprologue = ["source /v/bin/activate"]\n'
        'python = "/v/bin/python"\nhost = "10.0.0.1"\nport = 8786\nlogs = "/tmp/jobs"\n'
    )
    assert job_arguments("slurm", slurm) == {
        "processes": 1, "job_name": "knee-worker",
        "scheduler_options": {"dashboard_address": "127.0.0.1:0", "host": "10.0.0.1", "port": 8786},
        "cores": 2, "memory": "4GB", "walltime": "02:00:00", "queue": "batch", "account": "load",
        "python": "/v/bin/python", "log_directory": "/tmp/jobs", "job_extra_directives": ["--exclusive"],
        "job_script_prologue": ["source /v/bin/activate"],
    }  # fmt: skip
    # SGE calls the account a project; without cores or memory, knee's defaults (the site's config says nothing)
    sge = job_arguments("sge", cluster_of('jobqueue = "sge"\naccount = "load"'))
    assert sge["project"] == "load" and "account" not in sge
    assert (sge["cores"], sge["memory"], "disk" in sge, "python" in sge) == (1, "2GB", False, False)
    assert job_arguments("htcondor", cluster_of('jobqueue = "htcondor"'))["disk"] == "1GB"
    # --cluster slurm:4 takes the job keys from a [cluster] without jobqueue; they must fit the batch system
    with pytest.raises(UserError, match=r"\[cluster\] disk is not a key for Slurm jobs"):
        job_arguments("slurm", cluster_of('disk = "1GB"'))


def test_cluster_kind_jobs_on_the_command_line() -> None:
    assert parse_cluster("slurm:4") == ("slurm", 4)
    assert parse_cluster("htcondor:25") == ("htcondor", 25)
    assert parse_cluster("tcp://host:8786") is None and parse_cluster("local:3") is None
    with pytest.raises(UserError, match=r"--cluster 'pbs:x': pbs:JOBS needs a number of jobs, like pbs:4"):
        parse_cluster("pbs:x")


def documented(heading: str) -> tuple[str, str]:
    """The first TOML block and the first job script (a block starting with #!) after `heading` in distributed.md."""
    text = (REPO / "docs" / "distributed.md").read_text()
    part = text[text.index(f"\n{heading}\n") :]
    toml = re.search(r"```toml\n(.*?)```", part, re.DOTALL)
    script = re.search(r"```\n(#!.*?)```", part, re.DOTALL)
    assert toml and script, heading
    return toml.group(1), script.group(1)


# dask-jobqueue's scheduler binds a dashboard even when told None (knee now gives it a free loopback port, not 8787);
# kept on test_slurm's xdist worker all the same: test_slurm counts the lines on stderr
@pytest.mark.xdist_group("slurm")
@pytest.mark.parametrize("heading", ["## Batch jobs: Slurm, HTCondor, PBS, SGE", "### HTCondor"])
def test_the_documented_job_scripts_are_what_dask_jobqueue_writes_from_the_keys(heading: str) -> None:
    toml, script = documented(heading)
    settings = parse_scenario(f"{GROUP}{toml}", "distributed.md").cluster
    assert settings.jobqueue is not None
    # The docs' address is not this machine's: the scheduler listens on loopback, and the script names the docs'.
    port = free_port()
    cluster = make_cluster(settings.jobqueue, settings.model_copy(update={"host": "127.0.0.1", "port": port}))
    try:
        written = cluster.job_script()
    finally:
        cluster.close()
    assert written.replace(f"tcp://127.0.0.1:{port}", f"tcp://{settings.host}:{settings.port}") == script
