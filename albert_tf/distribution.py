"""`--mixed_precision`'s policies and `--strategy`'s distribution, for every training command.

Pretraining and fine-tuning both take them from here, through `albert_tf.compute.make_compute`.
Under Keras' JAX backend the distribution is `JaxDevices` (data parallel over the local devices); on
TensorFlow, a tf.distribute strategy (`tf_strategy`). Neither TensorFlow nor JAX is imported until a
distribution is made, so `jax_step` (run where there is no TensorFlow) and the settings modules can
import this one.

Example:

>>> PRECISIONS["bfloat16"], STRATEGIES[0]
('mixed_bfloat16', 'default')
"""

import contextlib
import dataclasses
import os
import socket
import time
from typing import Optional

from albert_tf.errors import AlbertError
from albert_tf.options import option

STRATEGIES = ("default", "mirrored", "multi_worker", "tpu")
PRECISIONS = {"float32": "float32", "bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}


def mixed_precision_option():
    """The `--mixed_precision` field of pretraining's and fine-tuning's settings."""
    return option(
        "float32",
        "Compute dtype policy: bfloat16/float16 matmuls, float32 weights, LayerNorm and softmax "
        "(float16 with loss scaling).",
        choices=sorted(PRECISIONS),
    )


def jit_compile_option():
    """The `--jit_compile` field of the training settings (`Compute.step_jit_compile` resolves it)."""
    return option(
        None,
        "XLA-compile the training step (default: off on TensorFlow; on Keras' JAX backend the step is always "
        "compiled, and --nojit_compile is refused there).",
    )


def strategy_option():
    """The `--strategy` field of pretraining's and fine-tuning's settings."""
    return option(STRATEGIES[0], "tf.distribute strategy (multi_worker reads TF_CONFIG).", choices=STRATEGIES)


def tpu_option():
    """The `--tpu` field of pretraining's and fine-tuning's settings."""
    return option(None, "TPU name or address for --strategy=tpu.")


@dataclasses.dataclass(frozen=True)
class DistributionSettings:
    """`--strategy` and `--tpu` where a command makes the distribution itself, before its other settings
    (pretraining: before any TensorFlow op, for multi-worker collectives)."""

    strategy: str = strategy_option()
    tpu: Optional[str] = tpu_option()
    coordinator_address: Optional[str] = option(
        None,
        "--backend jax --strategy multi_worker: HOST:PORT of process 0, where the processes meet (JAX's name). "
        "With none of --coordinator_address/--num_processes/--process_id, JAX detects Slurm, Open MPI or a "
        "Cloud TPU pod.",
    )
    num_processes: Optional[int] = option(None, "--backend jax --strategy multi_worker: how many processes.")
    process_id: Optional[int] = option(None, "--backend jax --strategy multi_worker: this process, 0 to N-1.")

    def processes(self) -> "Processes":
        return Processes(self.coordinator_address, self.num_processes, self.process_id)


@dataclasses.dataclass(frozen=True)
class Processes:
    """Where the processes of a multi-process JAX run meet; all None: detected by `jax.distributed`."""

    coordinator_address: Optional[str] = None
    num_processes: Optional[int] = None
    process_id: Optional[int] = None

    def given(self) -> bool:
        return any(value is not None for value in dataclasses.astuple(self))

    def check(self) -> None:
        values = dataclasses.astuple(self)
        if self.given() and None in values:
            missing = [f"--{f.name}" for f, v in zip(dataclasses.fields(self), values) if v is None]
            raise DistributionError(
                f"{', '.join(missing)} missing: --coordinator_address, --num_processes and --process_id go "
                "together (or give none, to let JAX detect Slurm, Open MPI or a Cloud TPU pod)"
            )
        if not self.given():
            return
        host, _, port = self.coordinator_address.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise DistributionError(f"--coordinator_address must be HOST:PORT, got {self.coordinator_address!r}")
        if self.num_processes < 1:
            raise DistributionError(f"--num_processes must be ≥ 1, got {self.num_processes}")
        if not 0 <= self.process_id < self.num_processes:
            raise DistributionError(
                f"--process_id must be from 0 to --num_processes - 1 ({self.num_processes - 1}), got {self.process_id}"
            )


class DistributionError(AlbertError, ValueError):
    """A `--strategy` or `--mixed_precision` this process cannot run; the message says why."""


def check_precision(name: str) -> str:
    """The Keras dtype policy of `--mixed_precision name`."""
    if name not in PRECISIONS:
        raise DistributionError(f"--mixed_precision must be one of {sorted(PRECISIONS)}, got {name!r}")
    return PRECISIONS[name]


def check_tpu_flag(name: str, tpu: Optional[str]) -> None:
    if tpu is not None and name != "tpu":
        raise DistributionError(f"--tpu {tpu}: names the TPU of --strategy tpu, but --strategy is {name}")


def tf_strategy(name: str, tpu: Optional[str] = None, processes: Optional["Processes"] = None):
    """The tf.distribute strategy of `--strategy name` (multi_worker reads TF_CONFIG); `compute.make_compute`
    makes it on Keras' TensorFlow backend (on JAX: `jax_devices`)."""
    check_tpu_flag(name, tpu)
    if processes is not None and processes.given():
        raise DistributionError(
            "--coordinator_address/--num_processes/--process_id are for --backend jax; TensorFlow's "
            "--strategy multi_worker reads TF_CONFIG"
        )
    import tensorflow as tf

    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "multi_worker":
        if "TF_CONFIG" not in os.environ:
            raise DistributionError("--strategy=multi_worker needs TF_CONFIG (cluster spec and this task)")
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "tpu":
        try:
            resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu or "")
        except ValueError as error:  # no --tpu and not on a TPU VM: TensorFlow's "Please provide a TPU Name"
            shown = f"--tpu {tpu}" if tpu else "no --tpu given and this machine is no TPU VM"
            raise DistributionError(f"--strategy tpu: {shown}: {error}") from None
        try:
            tf.config.experimental_connect_to_cluster(resolver)
            tf.tpu.experimental.initialize_tpu_system(resolver)
        except tf.errors.OpError as error:  # an address where no TPU answers
            first_line = (error.message or type(error).__name__).splitlines()[0]
            raise DistributionError(
                f"--strategy tpu: cannot reach the TPU {tpu or '(this VM)'}: {first_line}"
            ) from None
        return tf.distribute.TPUStrategy(resolver)
    raise DistributionError(f"--strategy must be one of {STRATEGIES}, got {name!r}")


# A process that stops sending heartbeats for this long is lost (JAX's coordination service; JAX's default).
HEARTBEAT_TIMEOUT_S = 100
# How long the processes wait for each other at the start (JAX's default).
CONNECT_TIMEOUT_S = 300


def jax_devices(name: str, processes: Processes) -> "JaxDevices":
    if name in ("default", "mirrored"):
        if processes.given():
            raise DistributionError("--coordinator_address/--num_processes/--process_id need --strategy multi_worker")
        return JaxDevices()
    if name == "multi_worker":
        connect_processes(processes)
        return JaxDevices()
    raise DistributionError(
        f"--strategy {name} is TensorFlow's; on Keras' JAX backend a TPU VM's cores are its local devices "
        "(--strategy default) and a pod's hosts are processes (--strategy multi_worker, detected by JAX)"
    )


def wait_for_coordinator(address: str, timeout_s: float, say) -> None:
    """Waits until process 0's coordination service answers at `address` (JAX's own wait ends in an abort)."""
    host, _, port = address.rpartition(":")
    deadline = time.monotonic() + timeout_s
    said = False
    while True:
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=5).close()
            return
        except OSError as error:
            if time.monotonic() >= deadline:
                raise DistributionError(
                    f"--coordinator_address {address}: process 0 did not answer in {timeout_s:.0f} s ({error}); "
                    "start process 0 there first, or correct the address"
                ) from None
            if not said:
                say(f"waiting up to {timeout_s:.0f} s for process 0 at {address}")
                said = True
            time.sleep(1.0)


def connect_processes(processes: Processes, say=print) -> None:
    """Joins this process to the others of the run (`jax.distributed`, before any JAX computation)."""
    import jax

    processes.check()
    # CPUs all-reduce across processes through gloo (XLA's CPU client has no other cross-process collectives).
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    timeouts = dict(initialization_timeout=CONNECT_TIMEOUT_S, heartbeat_timeout_seconds=HEARTBEAT_TIMEOUT_S)
    try:
        if processes.given():
            if processes.process_id != 0:
                wait_for_coordinator(processes.coordinator_address, CONNECT_TIMEOUT_S, say)
            jax.distributed.initialize(
                processes.coordinator_address, processes.num_processes, processes.process_id, **timeouts
            )
        else:
            jax.distributed.initialize(**timeouts)
    except (RuntimeError, ValueError) as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        given = (
            ""
            if processes.given()
            else (
                "no --coordinator_address/--num_processes/--process_id given and no cluster detected "
                "(Slurm, Open MPI, a Cloud TPU pod): "
            )
        )
        raise DistributionError(f"--strategy multi_worker on JAX: {given}{first_line}") from None


class JaxDevices:
    """Data parallelism over every device of every process (`keras.distribution.DataParallel` when several).

    What the loop asks of a distribution, as of a tf.distribute strategy: `num_replicas_in_sync`, `scope()`
    (variables made inside are replicated), and `shard(batch)` (the global batch split over the devices).
    Every process reads the same global batch and places the rows of its own devices: N processes train
    what one process does.
    """

    cluster_resolver = None  # TensorFlow's; the processes are JAX's

    def __init__(self):
        import jax
        import keras

        devices = keras.distribution.list_devices()
        self.num_replicas_in_sync = len(devices)
        self.num_processes = jax.process_count()
        self.process_id = jax.process_index()
        self.local_devices = jax.local_device_count()
        self.distribution = keras.distribution.DataParallel(devices=devices) if len(devices) > 1 else None

    @property
    def chief(self) -> bool:
        return self.process_id == 0

    def scope(self):
        return self.distribution.scope() if self.distribution else contextlib.nullcontext()

    def shard(self, batch):
        """numpy (or TF eager) arrays → device arrays; split over the devices along the batch axis."""
        import jax
        import keras
        import numpy as np

        if self.distribution is None:
            return jax.tree.map(jax.numpy.asarray, batch)
        layout = self.distribution.get_data_layout
        if self.num_processes == 1:
            arrays = jax.tree.map(jax.numpy.asarray, batch)
            return jax.tree.map(lambda t: keras.distribution.distribute_tensor(t, layout(t.shape)), arrays)

        def global_array(tensor):
            rows = np.asarray(tensor)
            # Each process holds the global batch: its devices take their slices of it.
            return jax.make_array_from_callback(rows.shape, layout(rows.shape).backend_layout, rows.__getitem__)

        return jax.tree.map(global_array, batch)

    def any_process(self, flag: bool) -> bool:
        """Whether `flag` is set on any process (one small all-gather; the flag itself with one process)."""
        if self.num_processes == 1:
            return flag
        import numpy as np
        from jax.experimental import multihost_utils

        return bool(np.asarray(multihost_utils.process_allgather(np.int32(flag))).any())

    def wait_for_all(self, name: str) -> None:
        """Returns once every process has reached the barrier `name` (no-op with one process)."""
        if self.num_processes > 1:
            from jax.experimental import multihost_utils

            multihost_utils.sync_global_devices(name)

    def describe(self) -> dict:
        return {
            "processes": self.num_processes,
            "process_id": self.process_id,
            "devices": self.num_replicas_in_sync,
            "local_devices": self.local_devices,
        }
