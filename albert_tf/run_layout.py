"""The names inside a run's output directory, in one place (fine-tuning, pretraining, loading a run).

    <output_dir>/
        checkpoints/        training state to resume from (pretraining, fine-tuning), not a model
        train/, eval/       TensorBoard scalars (`albert_tf.progress`)
        best/               the model of the best evaluation (+ eval_results.json / best.json)
        final/              the model at the end of pretraining
        eval_results.txt    one JSON line per evaluation
        summary.json        fine-tuning's summary (train_summary.json: pretraining's)
        settings.json       how the directory was made (`albert_tf.cli.run_record`)

Example:

>>> MODEL_SUBDIRS
('final', 'best')
"""

CHECKPOINT_DIR = "checkpoints"
BEST_DIR = "best"
FINAL_DIR = "final"
MODEL_SUBDIRS = (FINAL_DIR, BEST_DIR)  # the published models, in order of preference when loading a run
EVAL_RESULTS_FILE = "eval_results.txt"
BEST_RESULTS_FILE = "eval_results.json"  # fine-tuning: the metrics of best/, inside it
PRETRAINING_BEST_FILE = "best.json"  # pretraining: the metrics of best/, inside it
SUMMARY_FILE = "summary.json"
PRETRAINING_SUMMARY_FILE = "train_summary.json"
SETTINGS_FILE = "settings.json"
CONFIG_FILE = "albert_config.json"  # a model directory's config (and the one beside a .tflite file)
TRAIN_SUMMARY_DIR = "train"  # TensorBoard: training scalars (loss, lr, steps/s)
EVAL_SUMMARY_DIR = "eval"  # TensorBoard: every evaluation's metrics
