"""Packed rows against one instance a row: the same instances, real tokens per second and learning per real token.

WikiText-2 as the docs ask for input (one sentence a line, a blank line between paragraphs:
short documents, so one instance a row pads heavily) goes through create_pretraining_data
twice, with `--max_instances_per_row 1` and `K`: the same instances either way.

    # speed: PretrainingLoop.time_steps in fresh processes, the two layouts interleaved over rounds
    python bench/packed_rows.py speed --spm SPM [--configs tiny,base] [--seqs 128,512] [--rounds 2]
    # learning: the tiny config from scratch, --seeds runs each way, evaluated on WikiText-2 test
    # (the same held-out instances in each layout); the same steps of the same real tokens each way
    python bench/packed_rows.py learning --spm SPM [--seeds 3] [--steps 600]

`real tokens/s` = rows/s × the real tokens a row holds on average (metadata.json's fill): what
pretraining pays for. Prints JSON.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from _common import REPO, cpu_kind

WORKER_SPEED = """
import json, sys, tempfile
from albert_tf.config import AlbertConfig
from albert_tf.inputs.shard_reader import resolve_input
from albert_tf.pretraining.loop import PretrainingLoop
from albert_tf.pretraining.settings import PretrainSettings
from albert_tf.compute import make_compute
data, config, batch, steps = sys.argv[1:5]
train_input = resolve_input(data)
settings = PretrainSettings(
    output_dir=tempfile.mkdtemp(), train_batch_size=int(batch), max_seq_length=train_input.data.max_seq_length,
    num_train_steps=1000, num_warmup_steps=10, verbose=False,
)
loop = PretrainingLoop(make_compute(), AlbertConfig.from_json_file(config), settings, train_input)
print("RESULT " + json.dumps({"step_s": loop.time_steps(int(steps))}))
"""

WORKER_LEARNING = """
import json, sys
from albert_tf.pretraining.job import pretrain
from albert_tf.pretraining.settings import PretrainSettings
data, eval_data, config, output_dir, steps, seed, eval_every, eval_steps, batch = sys.argv[1:10]
settings = PretrainSettings(
    output_dir=output_dir, input_file=data, eval_file=eval_data, albert_config_file=config,
    train_batch_size=int(batch), eval_batch_size=32, max_seq_length=128,
    num_train_steps=int(steps), num_warmup_steps=int(steps) // 10, learning_rate=0.005,
    save_checkpoints_steps=int(eval_every), keep_checkpoint_max=1, do_eval=True, max_eval_steps=int(eval_steps),
    log_every_steps=int(eval_every), seed=int(seed), verbose=False,
)
pretrain(settings)
"""


def sentence_file(source: str, path: str) -> str:
    """WikiText-2 as one sentence a line, a blank line between paragraphs (titles dropped)."""
    paragraphs = []
    with open(source, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("= "):
                paragraphs.append("\n".join(s.strip() + " ." for s in line.split(" . ") if s.strip()))
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n\n".join(paragraphs) + "\n")
    return path


def make_data(corpus: str, spm: str, seq: int, rows_hold: int, output_dir: str) -> dict:
    if not os.path.exists(os.path.join(output_dir, "metadata.json")):
        subprocess.run(
            [sys.executable, "-m", "data_prep.create_pretraining_data", "--input_file", corpus, "--output_dir"]
            + [output_dir, "--spm_model_file", spm, "--max_seq_length", str(seq), "--dupe_factor", "1"]
            + ["--num_shards", "2", "--max_instances_per_row", str(rows_hold)],
            check=True,
            cwd=REPO,
            capture_output=True,
        )
    with open(os.path.join(output_dir, "metadata.json")) as f:
        metadata = json.load(f)
    packing = metadata["counts"]["packing"]
    return {"dir": output_dir, "rows": packing["rows"], "fill": packing["fill"], "instances": metadata["num_instances"]}


def config_file(name: str, vocab_size: int, seq: int, work: str) -> str:
    with open(REPO / "configs" / {"tiny": "albert_tiny.json", "base": "albert_base_v2.json"}[name]) as f:
        config = json.load(f)
    config.update(vocab_size=vocab_size, max_position_embeddings=max(seq, config["max_position_embeddings"]))
    path = os.path.join(work, f"{name}_{seq}.json")
    with open(path, "w") as f:
        json.dump(config, f)
    return path


def run_worker(code: str, args) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code] + [str(a) for a in args],
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),
        env={**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "3", "KERAS_BACKEND": "tensorflow"},
    )
    if done.returncode:
        sys.exit(done.stderr[-3000:])
    return done.stdout


def speed(args, work: str, vocab_size: int) -> dict:
    corpus = sentence_file(os.path.join(args.data, "wikitext2", "valid.txt"), os.path.join(work, "valid.txt"))
    results = {}
    for seq in [int(s) for s in args.seqs.split(",")]:
        layouts = {k: make_data(corpus, args.spm, seq, k, os.path.join(work, f"{seq}_{k}")) for k in (1, args.hold)}
        for name in args.configs.split(","):
            config = config_file(name, vocab_size, seq, work)
            batch = args.batch if name == "tiny" else args.base_batch
            times = {k: [] for k in layouts}
            for round_index in range(args.rounds):
                order = list(layouts) if round_index % 2 == 0 else list(reversed(list(layouts)))
                for k in order:
                    out = run_worker(WORKER_SPEED, [layouts[k]["dir"], config, batch, args.steps])
                    times[k].append(
                        json.loads([x for x in out.splitlines() if x.startswith("RESULT ")][-1][7:])["step_s"]
                    )
                    print(f"[{name} {seq} round {round_index}] rows {k}: {times[k][-1]:.3f} s/step", file=sys.stderr)
            case = {}
            for k, layout in layouts.items():
                step_s = statistics.median(times[k])
                case[f"{k}_a_row"] = {
                    "step_s": round(step_s, 4),
                    "rows_per_s": round(batch / step_s, 2),
                    "real_tokens_per_s": round(batch * seq * layout["fill"] / step_s, 1),
                    "fill": layout["fill"],
                    "rows": layout["rows"],
                }
            packed, one = case[f"{args.hold}_a_row"], case["1_a_row"]
            case["real_tokens_per_s_packed_over_one"] = round(packed["real_tokens_per_s"] / one["real_tokens_per_s"], 3)
            case["steps_per_s_packed_over_one"] = round(one["step_s"] / packed["step_s"], 3)
            results[f"{name}_{seq}"] = {"batch_rows": batch, **case}
    return results


def learning(args, work: str, vocab_size: int) -> dict:
    """Each way from scratch, same steps and the same real tokens a step (one-a-row steps take more rows)."""
    corpus = sentence_file(os.path.join(args.data, "wikitext2", "valid.txt"), os.path.join(work, "valid.txt"))
    held_out = sentence_file(os.path.join(args.data, "wikitext2", "test.txt"), os.path.join(work, "test.txt"))
    config = config_file("tiny", vocab_size, 128, work)
    data = {k: make_data(corpus, args.spm, 128, k, os.path.join(work, f"128_{k}")) for k in (1, args.hold)}
    runs = {}
    for k in [int(x) for x in args.layouts.split(",")]:
        train = data[k]
        evaluation = make_data(held_out, args.spm, 128, k, os.path.join(work, f"eval_128_{k}"))
        # Equal steps of equal real tokens, so the comparison is packing's, not a batch size's.
        batch = round(args.batch * data[args.hold]["fill"] / train["fill"])
        tokens_per_step = batch * 128 * train["fill"]
        for seed in range(1, args.seeds + 1):
            output_dir = os.path.join(work, f"run_{k}_{seed}_b{batch}")
            run_worker(
                WORKER_LEARNING,
                [train["dir"], evaluation["dir"], config, output_dir, args.steps, seed, args.steps // args.points]
                + [evaluation["rows"] // 32, batch],
            )
            with open(os.path.join(output_dir, "eval_results.txt")) as f:
                points = [json.loads(line) for line in f]
            curve = [
                {
                    "real_tokens": round(p["global_step"] * tokens_per_step),
                    "masked_lm_accuracy": round(p["masked_lm_accuracy"], 4),
                    "sentence_order_accuracy": round(p["sentence_order_accuracy"], 4),
                }
                for p in points
            ]
            runs.setdefault(f"{k}_a_row (b{batch})", []).append(curve)
            print(f"[learning] rows {k} seed {seed}: {curve[-1]}", file=sys.stderr)
    final = {}
    for layout, curves in runs.items():
        for key in ("masked_lm_accuracy", "sentence_order_accuracy"):
            values = [curve[-1][key] for curve in curves]
            spread = statistics.stdev(values) if len(values) > 1 else 0.0
            final[f"{layout} {key}"] = {
                "mean": round(statistics.mean(values), 4),
                "sd": round(spread, 4),
                "values": values,
            }
    return {"steps": args.steps, "final": final, "curves": runs}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["speed", "learning"])
    parser.add_argument("--spm", required=True, help="a SentencePiece model (e.g. the demo's vocab/spm.model)")
    parser.add_argument("--data", default=os.environ.get("ALBERT_TF_DATA", str(REPO.parent / "shared" / "data")))
    parser.add_argument("--hold", type=int, default=3, help="--max_instances_per_row of the packed data")
    parser.add_argument("--configs", default="tiny,base")
    parser.add_argument("--seqs", default="128,512")
    parser.add_argument("--batch", type=int, default=32, help="rows a step (tiny; learning)")
    parser.add_argument("--base_batch", type=int, default=8, help="rows a step (base)")
    parser.add_argument("--steps", type=int, default=None, help="speed: timed steps (5); learning: packed steps (600)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--points", type=int, default=6, help="learning: evaluations a run")
    parser.add_argument("--layouts", default="1,3", help="learning: which layouts to run (instances a row)")
    parser.add_argument("--work", default=None, help="where data and runs go (default: a temporary directory)")
    args = parser.parse_args()
    args.steps = args.steps or (5 if args.mode == "speed" else 600)
    import sentencepiece

    vocab_size = sentencepiece.SentencePieceProcessor(model_file=args.spm).vocab_size()
    work = args.work or tempfile.mkdtemp(prefix="packed_rows_")
    os.makedirs(work, exist_ok=True)
    result = speed(args, work, vocab_size) if args.mode == "speed" else learning(args, work, vocab_size)
    print(json.dumps({"cpu": cpu_kind(), "mode": args.mode, "rows_hold": args.hold, "results": result}, indent=2))


if __name__ == "__main__":
    main()
