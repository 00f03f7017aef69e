"""Peak memory and step time of a fine-tuning step, with and without `remat`.

Each case runs in a fresh process (peak RSS is per process): build
`AlbertClassifier(AlbertBackbone(..., remat=...))` from a config, Adam, one
`tf.function` step (forward, backward, global-norm clip, update) at batch × seq,
`--warmup` untimed steps (the first traces) then `--steps` timed ones. The
process's peak RSS (CPU memory is a fair proxy for the activation memory a GPU
would need) is read from `wait4`. Activation memory is the peak minus the peak
of the same model at a tiny sequence length (`--base_seq`), which holds the
same weights, gradients, optimizer slots and runtime but almost no
activations. Rounds interleave the cases. Prints JSON, including what fits in
`--gpu_gib` on one GPU (weights + gradients + Adam slots = 16 bytes/parameter,
plus the measured activations per sequence, linear in the batch).

    python bench/memory.py [--config configs/albert_xxlarge_v2.json] [--seq 512]
        [--batch 1] [--base_seq 8] [--rounds 1] [--warmup 1] [--steps 1]
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

from _common import REPO, cpu_kind


def worker(args):
    """One case in this process: prints `RESULT {json}`."""
    import resource

    import keras
    import numpy as np
    import tensorflow as tf

    from albert_tf import AlbertBackbone
    from albert_tf.models.classifier import AlbertClassifier

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    keras.utils.set_random_seed(0)
    backbone = AlbertBackbone.from_albert_config(args.config, remat=args.remat)
    backbone.chain_shared_weights = not args.unchained
    model = AlbertClassifier(backbone, num_classes=2)
    optimizer = keras.optimizers.Adam(1e-5)
    optimizer.build(model.trainable_variables)
    rng = np.random.default_rng(0)
    vocab = backbone.albert_config.vocab_size
    features = {
        "input_ids": tf.constant(rng.integers(5, vocab, (args.batch, args.seq)), tf.int32),
        "input_mask": tf.ones((args.batch, args.seq), tf.int32),
        "segment_ids": tf.zeros((args.batch, args.seq), tf.int32),
    }
    labels = tf.constant(rng.integers(0, 2, (args.batch,)), tf.int32)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            logits = model(features, training=True)["logits"]
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
        grads = tape.gradient(loss, model.trainable_variables)
        grads, _ = tf.clip_by_global_norm(grads, 1.0)
        optimizer.apply(grads, model.trainable_variables)
        return loss

    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    times, cpu_times, losses = [], [], []
    for i in range(args.warmup + args.steps):
        start, cpu_start = time.perf_counter(), sum(os.times()[:2])
        losses.append(float(step()))
        if i >= args.warmup:
            times.append(time.perf_counter() - start)
            # CPU seconds: the work done, less sensitive than wall time to a shared machine.
            cpu_times.append(sum(os.times()[:2]) - cpu_start)
    print(
        "RESULT "
        + json.dumps(
            {
                "parameters": model.count_params(),
                "step_s": statistics.median(times),
                "step_cpu_s": statistics.median(cpu_times),
                "peak_rss_before_step_mb": round(rss_before, 1),
                "loss_first": losses[0],
                "loss_last": losses[-1],
            }
        ),
        flush=True,
    )


def run_case(args, seq, remat, unchained=False):
    cmd = (
        [
            sys.executable,
            os.path.abspath(__file__),
            "--worker",
            "--config",
            args.config,
            "--seq",
            str(seq),
            "--batch",
            str(args.batch),
            "--warmup",
            str(args.warmup),
            "--steps",
            str(args.steps),
            "--threads",
            str(args.threads),
        ]
        + (["--remat"] if remat else [])
        + (["--unchained"] if unchained else [])
    )
    start = time.perf_counter()
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    result = None
    for line in output.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line[len("RESULT ") :])
    if result is None:
        return {"error": output[-2000:], "rc": os.waitstatus_to_exitcode(status)}
    cpu = usage.ru_utime + usage.ru_stime
    result.update(
        peak_rss_mb=round(usage.ru_maxrss / 1024, 1),
        wall_s=round(wall, 1),
        cpu_util=round(cpu / wall, 2),
        loadavg_end=round(os.getloadavg()[0], 2),
    )
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=os.path.join(REPO, "configs", "albert_xxlarge_v2.json"))
    parser.add_argument("--seq", type=int, default=512)
    parser.add_argument("--base_seq", type=int, default=8)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--gpu_gib", type=float, default=16.0)
    parser.add_argument("--remat", action="store_true", help="worker only")
    parser.add_argument("--unchained", action="store_true", help="worker only: no shared-weight gradient chain")
    parser.add_argument(
        "--unchained_cases",
        action="store_true",
        help="also run plain and base without the shared-weight gradient chain (TF's own gradient sums, as before)",
    )
    parser.add_argument("--no_remat_case", action="store_true", help="skip the remat case")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)

    cases = {"plain": (args.seq, False), "remat": (args.seq, True), "base": (args.base_seq, False)}
    if args.no_remat_case:
        del cases["remat"]
    if args.unchained_cases:
        cases.update({"plain_unchained": (args.seq, False, True), "base_unchained": (args.base_seq, False, True)})
    runs = {name: [] for name in cases}
    names = list(cases)
    for round_index in range(args.rounds):
        order = names[round_index % len(names) :] + names[: round_index % len(names)]
        for name in order:
            result = run_case(args, *cases[name])
            print(f"[round {round_index}] {name}: {json.dumps(result)}", file=sys.stderr, flush=True)
            runs[name].append(result)
    failed = {name: r for name, rs in runs.items() for r in rs if "error" in r}
    if failed:
        print(json.dumps({"failed": failed}, indent=2))
        sys.exit(1)

    def median(name, key):
        return statistics.median(r[key] for r in runs[name])

    summary = {}
    for name in cases:
        if name.startswith("base"):
            continue
        # Each case against the tiny-sequence run of the same gradient summation.
        base = median("base_unchained" if name.endswith("_unchained") else "base", "peak_rss_mb")
        summary[name] = {
            "peak_rss_mb": median(name, "peak_rss_mb"),
            "activation_mb": round(median(name, "peak_rss_mb") - base, 1),
            "step_s": round(median(name, "step_s"), 2),
            "step_cpu_s": round(median(name, "step_cpu_s"), 2),
            "cpu_util": median(name, "cpu_util"),
        }
    parameters = runs["plain"][0]["parameters"]
    fixed_gib = 16 * parameters / 2**30  # fp32 weights + gradients + Adam m, v
    fits = {}
    for name in summary:
        per_sequence_gib = summary[name]["activation_mb"] / 1024 / args.batch
        fits[name] = max(0, int((args.gpu_gib - fixed_gib) // per_sequence_gib))
    ratios = {}
    if "remat" in summary:
        ratios = {
            "activation_memory_ratio_plain_over_remat": round(
                summary["plain"]["activation_mb"] / summary["remat"]["activation_mb"], 2
            ),
            "step_time_ratio_remat_over_plain": round(summary["remat"]["step_s"] / summary["plain"]["step_s"], 3),
            "step_cpu_time_ratio_remat_over_plain": round(
                summary["remat"]["step_cpu_s"] / summary["plain"]["step_cpu_s"], 3
            ),
        }
    if "plain_unchained" in summary:
        ratios["peak_rss_saved_by_chain_mb"] = round(
            summary["plain_unchained"]["peak_rss_mb"] - summary["plain"]["peak_rss_mb"], 1
        )
        ratios["base_peak_rss_saved_by_chain_mb"] = round(
            median("base_unchained", "peak_rss_mb") - median("base", "peak_rss_mb"), 1
        )
    print(
        json.dumps(
            {
                "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(), **cpu_kind()},
                "config": os.path.basename(args.config),
                "parameters": parameters,
                "batch": args.batch,
                "seq": args.seq,
                "base_seq": args.base_seq,
                "base_peak_rss_mb": median("base", "peak_rss_mb"),
                "cases": summary,
                **ratios,
                f"max_batch_in_{args.gpu_gib:g}_gib_gpu": {"fixed_gib_weights_grads_adam": round(fixed_gib, 2), **fits},
                "runs": runs,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
