"""Data-parallel replicas (dlbench/parallel.py): planning them, their batches, and the commands that launch them, on
one node and across Slurm nodes."""

import shlex

import numpy as np
import pytest
from dlbench import parallel
from dlbench.study import configuration, plan
from test_plan import CONFIG, tiny_searches

STACKS = configuration.load_stacks()


def test_replicas_are_an_axis_named_in_the_id_and_stacks_without_a_mechanism_skip_them(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    stacks = ["torch-2.13", "keras-3-jax", "keras-3-torch", "paddle-3.3"]
    config = dict(CONFIG, stacks=stacks, batch_sizes=[32], variants=["eager"], replicas=[1, 2])
    table, skipped = plan.experiment_table(config, STACKS, plan.train_sizes(config, {}))
    assert sorted(table) == [
        "keras-3-jax_synthetic-8x8x1_mlp_cpu_b32_adam-lr0.001_e2_eager",
        "keras-3-jax_synthetic-8x8x1_mlp_cpu_b32_adam-lr0.001_e2_eager_r2",
        "keras-3-torch_synthetic-8x8x1_mlp_cpu_b32_adam-lr0.001_e2_eager",
        "paddle-3.3_synthetic-8x8x1_mlp_cpu_b32_adam-lr0.001_e2_eager",
        "torch-2.13_synthetic-8x8x1_mlp_cpu_b32_adam-lr0.001_e2_eager",
        "torch-2.13_synthetic-8x8x1_mlp_cpu_b32_adam-lr0.001_e2_eager_r2",
    ]
    messages = [plan.skipped_message(entry) for entry in skipped]
    assert any(
        message.startswith(
            "skipping variant 'eager' with device data for keras-3-torch on cpu with 2 replicas: Keras 3's"
        )
        for message in messages
    ), messages
    assert any("paddle-3.3 on cpu with 2 replicas: Paddle's DataParallel" in message for message in messages)
    torch = table["torch-2.13_synthetic-8x8x1_mlp_cpu_b32_adam-lr0.001_e2_eager_r2"]
    assert (torch["launcher"], torch["scaling"], parallel.global_batch_size(torch)) == ("torchrun", "weak", 64)
    jax = table["keras-3-jax_synthetic-8x8x1_mlp_cpu_b32_adam-lr0.001_e2_eager_r2"]
    assert jax["environment"]["XLA_FLAGS"] == "--xla_force_host_platform_device_count=2"
    assert "XLA_FLAGS" not in table["keras-3-jax_synthetic-8x8x1_mlp_cpu_b32_adam-lr0.001_e2_eager"]["environment"]
    searches = tiny_searches(config, table)
    assert all(search["replicas"] == 1 for search in searches.values())  # one device's memory


def test_strong_scaling_splits_the_global_batch_and_weak_scaling_multiplies_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = dict(CONFIG, batch_sizes=[32, 512], variants=["eager"], replicas=[1, 4], scaling="strong")
    table, skipped = plan.experiment_table(config, STACKS, plan.train_sizes(config, {}))
    strong = table["torch-2.13_synthetic-8x8x1_mlp_cpu_b32_adam-lr0.001_e2_eager_r4-strong"]
    assert (parallel.global_batch_size(strong), parallel.replica_batch_size(strong)) == (32, 8)
    weak = dict(strong, scaling="weak")
    assert (parallel.global_batch_size(weak), parallel.replica_batch_size(weak)) == (128, 32)
    assert parallel.batch_problem(30, 4, "strong").startswith("batch size 30 is not divisible by 4 replicas")
    assert parallel.batch_problem(30, 4, "weak") is None
    weak_config = dict(config, batch_sizes=[128], scaling="weak")
    _, skipped = plan.experiment_table(weak_config, STACKS, plan.train_sizes(weak_config, {}))
    assert [plan.skipped_message(entry) for entry in skipped] == [
        "skipping batch size 512 on synthetic-8x8x1: larger than the 256 training examples of synthetic-8x8x1"
    ]


def test_every_replica_gets_an_equal_contiguous_slice_of_the_global_batch():
    batch = list(range(12))
    assert [parallel.replica_slice(batch, rank, 3) for rank in range(3)] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    assert parallel.threads_per_process(8, 2) == 4 and parallel.threads_per_process(1, 2) == 1
    assert parallel.threads_per_process(None, 1) is None  # one process: each framework's own default
    assert parallel.threads_per_process(None, 2, cores=8) == 4  # else every process would take all 8
    assert str(parallel.rank_output("/r/record.json", 1)) == "/r/rank1.record.json"
    assert str(parallel.rank_output("/r/record.json", 0)) == "/r/record.json"


TRAIN = ["--experiment", '{"a": 1}', "--record", "r.json"]


def test_torchrun_starts_one_process_per_replica_on_loopback_and_a_process_stack_runs_alone():
    torch = {"replicas": 4, "launcher": "torchrun"}
    assert parallel.launch("py", "train.py", TRAIN, torch) == [
        "py",
        "-m",
        "torch.distributed.run",
        "--nproc-per-node=4",
        "--standalone",
        "train.py",
        *TRAIN,
    ]
    assert parallel.launch("py", "train.py", TRAIN, {"replicas": 4, "launcher": "process"}) == [
        "py",
        "train.py",
        *TRAIN,
    ]
    assert parallel.launch("py", "train.py", TRAIN, {"replicas": 1, "launcher": "torchrun"}) == [
        "py",
        "train.py",
        *TRAIN,
    ]
    assert parallel.training_command("py", "train.py", TRAIN, torch, {})[:3] == ["py", "-m", "torch.distributed.run"]


HEAD = '$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)'  # the job's first node
PORT = f"$(({parallel.RENDEZVOUS_PORT} + SLURM_JOB_ID % {parallel.PORT_SPREAD}))"  # the job's own port there


def srun_task(command, nodes):
    """The command each of srun's tasks runs, after checking that srun starts one task per node."""
    assert command[:2] == ["bash", "-c"]
    srun = shlex.split(command[2])
    assert srun[:5] == ["srun", "--overlap", "--kill-on-bad-exit=1", f"--nodes={nodes}", "--ntasks-per-node=1"]
    assert srun[5:7] == ["bash", "-c"]
    return srun[7]


def test_a_slurm_job_across_nodes_runs_one_torchrun_per_node_meeting_at_the_first():
    torch = {"replicas": 16, "launcher": "torchrun"}
    inner = srun_task(parallel.training_command("py", "train.py", TRAIN, torch, {"SLURM_JOB_NUM_NODES": "2"}), 2)
    assert inner.startswith("py -m torch.distributed.run --nproc-per-node=8 --nnodes=2 --rdzv-id=$SLURM_JOB_ID ")
    assert f"--rdzv-endpoint={HEAD}:{PORT}" in inner
    assert inner.endswith("train.py --experiment '{\"a\": 1}' --record r.json")
    with pytest.raises(ValueError, match="16 replicas cannot be spread evenly over 3 nodes"):
        parallel.launch("py", "train.py", TRAIN, torch, nodes=3, rendezvous="h:1")


def test_a_slurm_job_across_nodes_runs_one_flax_process_per_node_told_its_rank_and_the_coordinator():
    flax = {"replicas": 16, "launcher": "process-per-node"}
    inner = srun_task(parallel.training_command("py", "train.py", TRAIN, flax, {"SLURM_JOB_NUM_NODES": "2"}), 2)
    place = "RANK=$SLURM_PROCID WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1"
    coordinator = f"{parallel.COORDINATOR_VARIABLE}={HEAD}:{PORT}"
    assert inner == f"{place} {coordinator} py train.py --experiment '{{\"a\": 1}}' --record r.json"
    assert parallel.processes(flax, nodes=2) == 2 and parallel.processes(flax) == 1
    # On one node it is one process driving every replica, as a `process` stack's.
    assert parallel.training_command("py", "train.py", TRAIN, flax, {}) == ["py", "train.py", *TRAIN]


def test_a_process_stack_never_spans_nodes_and_planning_says_why():
    mirrored = {"replicas": 16, "launcher": "process", "device": "gpu"}
    assert "only torchrun (PyTorch) and process-per-node (Flax) stacks span nodes" in parallel.spanning_problem(
        mirrored, "slurm", 8
    )
    assert parallel.spanning_problem(dict(mirrored, replicas=8), "slurm", 8) is None
    for spanning in parallel.SPANNING_LAUNCHERS:
        assert parallel.spanning_problem(dict(mirrored, launcher=spanning), "slurm", 8) is None
    assert parallel.spanning_problem(mirrored, "local", 8) is None
    assert parallel.job_nodes(mirrored, {"SLURM_JOB_NUM_NODES": "2"}) == 1


def test_each_process_of_a_multi_process_run_takes_its_share_of_every_global_batch(monkeypatch):
    order = np.arange(100, 112)
    assert parallel.process_share(order, 6) == (order, 6)  # one process: all of it
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    share, batch_size = parallel.process_share(order, 6)
    assert batch_size == 3 and share.tolist() == [103, 104, 105, 109, 110, 111]


def test_the_first_process_of_each_node_samples_the_node_s_gpus(monkeypatch):
    assert parallel.sampled_gpus({"replicas": 4, "launcher": "process"}) == 4
    monkeypatch.setenv("WORLD_SIZE", "2")  # process-per-node on 2 nodes: each its own node's
    assert parallel.sampled_gpus({"replicas": 16, "launcher": "process-per-node"}) == 8
    monkeypatch.setenv("WORLD_SIZE", "16")  # torchrun on 2 nodes: local rank 0 the node's 8, the others none
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")
    assert parallel.sampled_gpus({"replicas": 16, "launcher": "torchrun"}) == 8
    monkeypatch.setenv("LOCAL_RANK", "3")
    assert parallel.sampled_gpus({"replicas": 16, "launcher": "torchrun"}) == 0


def test_every_stack_names_a_known_launcher_or_says_why_it_has_no_mechanism():
    for name, stack in STACKS.items():
        if "data_parallel" in stack:
            assert stack["data_parallel"]["launcher"] in parallel.LAUNCHERS, name
        else:
            assert "replicas" in stack["unsupported"], name
