"""A Slurm job as JAX detects it: `--strategy multi_worker` with no process flags, two local processes.

No Slurm here: each process gets the variables `srun` sets (job id, node list, task count, rank), and
JAX's own detection (`jax.distributed.initialize()` without arguments) must find the cluster, its size and
each process's rank, so the plan of every process shows two processes and its own id.
"""

import json
import os
import socket
import subprocess
import sys

import pytest

from paths import REPO
from pretraining_helpers import common_args

# JAX's Slurm cluster puts process 0's coordination service on this port range: job id mod 4096 above it.
SLURM_PORT_BASE = 65535 - 2**12 + 1


def free_slurm_port_job_id() -> int:
    """A Slurm job id whose coordinator port (JAX's rule) is free on 127.0.0.1 now."""
    for job_id in range(os.getpid() % 2**12, os.getpid() % 2**12 + 2**12):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", SLURM_PORT_BASE + job_id % 2**12))
            except OSError:
                continue
        return job_id
    raise RuntimeError("no free port in JAX's Slurm range")


def slurm_environment(job_id: int, rank: int, tasks: int) -> dict:
    """What `srun --ntasks N` sets for one task on one node (the subset JAX reads)."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "OMPI_"))}
    return environment | {
        "SLURM_JOB_ID": str(job_id),
        "SLURM_STEP_NODELIST": "127.0.0.1",
        "SLURM_STEP_NUM_NODES": "1",
        "SLURM_NTASKS": str(tasks),
        "SLURM_PROCID": str(rank),
        "SLURM_LOCALID": str(rank),
        "TF_CPP_MIN_LOG_LEVEL": "3",
    }


@pytest.mark.realdata
def test_a_slurm_job_is_detected_with_its_size_and_each_tasks_rank(pretraining_data, tmp_path):
    args = common_args(pretraining_data, str(tmp_path / "run"), 4)
    command = [sys.executable, "-m", "albert_tf.run_pretraining", "--backend=jax", "--strategy=multi_worker"]
    job_id = free_slurm_port_job_id()
    tasks = [
        subprocess.Popen(
            command + args + ["--dry_run"],
            cwd=REPO,
            env=slurm_environment(job_id, rank, 2),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(2)
    ]
    results = [task.communicate(timeout=300) for task in tasks]
    plans = []
    for task, (stdout, stderr) in zip(tasks, results):
        assert task.returncode == 0, stderr[-3000:]
        plans.append(json.loads(stdout[stdout.index("{") :]))
    assert [plan["processes"]["process_id"] for plan in plans] == [0, 1]
    for plan in plans:
        assert plan["processes"]["processes"] == 2 and plan["processes"]["devices"] == 2
        assert plan["processes"]["rows_per_process"] == 8 and plan["batch"]["replicas"] == 2
    assert not (tmp_path / "run").exists()  # a dry run writes nothing, on any process
