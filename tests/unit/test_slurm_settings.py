"""The account and partition rules of `--profile profiles/slurm` (dlbench/study/slurm.py), on recorded outputs of sinfo,
sacctmgr and scontrol (on a real one-node cluster: tests/cluster/test_slurm.py)."""

import subprocess

import pytest
from dlbench.study import slurm

SINFO = "cpu*|(null)\ngpu|gpu:h100:4\ngpu|gpu:h100:8\n"


def recorded(sinfo=SINFO, associations="proj-a\nproj-b\n", default_account="proj-a\n", enforce="associations,limits"):
    """A `run` that answers the Slurm client commands as a cluster would; None answers fail like a missing tool."""
    answers = {"sinfo": sinfo, "scontrol": f"AccountingStorageEnforce = {enforce}\nClusterName = c\n"}

    def run(argv):
        if argv[0] == "sacctmgr":
            answer = associations if "associations" in argv else default_account
        else:
            answer = answers[argv[0]]
        if answer is None:
            raise subprocess.CalledProcessError(1, argv, stderr="Slurm accounting storage is disabled")
        return answer

    return run


def test_account_and_partition_default_to_the_cluster_s_own():
    assert slurm.resolve({}, {}, needs_gpu=False, run=recorded(), user="u") == {
        "account": "proj-a",
        "partition": "cpu",
        "gpu_partition": "cpu",
    }


def test_config_beats_the_environment_which_beats_the_defaults():
    settings = {"account": "proj-b", "partition": None, "gpu_partition": "gpu"}
    resolved = slurm.resolve(settings, {"SBATCH_ACCOUNT": "proj-a", "SBATCH_PARTITION": "gpu"}, True, recorded(), "u")
    assert resolved == {"account": "proj-b", "partition": "gpu", "gpu_partition": "gpu"}


def test_an_account_the_user_does_not_have_is_refused_naming_the_setting():
    with pytest.raises(slurm.SlurmSettingError, match=r"`slurm.account`.*'nosuch' is not an account of user u"):
        slurm.resolve({"account": "nosuch"}, {}, False, recorded(), "u")


def test_no_account_is_refused_only_where_the_cluster_requires_one():
    without_default = recorded(associations="", default_account="")
    with pytest.raises(slurm.SlurmSettingError, match=r"`slurm.account`: this cluster requires an account"):
        slurm.resolve({}, {}, False, without_default, "u")
    no_accounting = recorded(associations=None, default_account=None, enforce="none")
    assert slurm.resolve({}, {}, False, no_accounting, "u")["account"] == ""


def test_a_missing_or_unknown_partition_is_refused_listing_the_cluster_s():
    with pytest.raises(slurm.SlurmSettingError, match=r"`slurm.partition`: this cluster has no default.*cpu, gpu"):
        slurm.resolve({}, {}, False, recorded(sinfo="cpu|(null)\ngpu|gpu:2\n"), "u")
    with pytest.raises(slurm.SlurmSettingError, match=r"no partition 'big'; this cluster has: cpu, gpu"):
        slurm.resolve({"partition": "big"}, {}, False, recorded(), "u")


def test_gpu_jobs_on_a_partition_without_gpus_are_refused_naming_the_gpu_partition():
    with pytest.raises(
        slurm.SlurmSettingError,
        match=r"`slurm.gpu_partition`.*'cpu' has no node with a `gpu` GRES"
        r".*partitions with GPUs: gpu",
    ):
        slurm.resolve({}, {}, needs_gpu=True, run=recorded(), user="u")
    assert slurm.resolve({"gpu_partition": "gpu"}, {}, True, recorded(), "u")["gpu_partition"] == "gpu"


def test_an_unreachable_controller_says_so():
    with pytest.raises(slurm.SlurmSettingError, match="cannot reach a controller"):
        slurm.resolve({}, {}, False, recorded(sinfo=None), "u")


def test_a_timed_job_asks_for_the_resources_in_effect_where_it_runs():
    submission = {"account": "lab", "partition": "cpu", "gpu_partition": "gpu"}
    assert slurm.device_resources("gpu", "local", slurm.NOT_SUBMITTED) == {"gpu": 1}
    assert slurm.device_resources("cpu", "local", slurm.NOT_SUBMITTED) == {"gpu": 0}
    assert slurm.device_resources("gpu", "local", slurm.NOT_SUBMITTED, replicas=4) == {"gpu": 4}
    assert slurm.device_resources("gpu", "slurm", submission) == {
        "gres": "gpu:1",
        "nodes": 1,
        "slurm_account": "lab",
        "slurm_partition": "gpu",
    }
    assert slurm.device_resources("cpu", "slurm", submission) == {
        "gres": "",
        "nodes": 1,
        "slurm_account": "lab",
        "slurm_partition": "cpu",
    }


def test_replicas_beyond_a_nodes_gpus_span_nodes():
    submission = {"account": "lab", "partition": "cpu", "gpu_partition": "gpu"}
    assert slurm.device_resources("gpu", "slurm", submission, replicas=4, gpus_per_node=8)["gres"] == "gpu:4"
    spanning = slurm.device_resources("gpu", "slurm", submission, replicas=16, gpus_per_node=8)
    assert (spanning["gres"], spanning["nodes"]) == ("gpu:8", 2)
    assert slurm.device_resources("gpu", "slurm", submission, replicas=16)["nodes"] == 1  # gpus_per_node unset


def test_jobs_on_this_machine_have_no_rate_limit_and_slurm_keeps_its_own():
    """On this machine a rate limit only wakes the driver during timed jobs and holds its exit (slurm.job_rate_limit)."""
    limit = object()
    assert slurm.job_rate_limit("local", limit) is None
    assert slurm.job_rate_limit("slurm", limit) is limit
