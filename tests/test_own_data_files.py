"""Your own data files are read exactly as written or refused naming file, line and column (hardening IV)."""

import pytest

from albert_tf.tasks.file_task import DataFileError, file_task


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def read_train(path, **options):
    task = file_task(train_file=path, **{"text_column": "text", "label_column": "label", **options})
    examples, report = task.read("train")
    return task, examples, report


@pytest.mark.parametrize("target", ["nan", "inf", "-inf", "1e400"])
def test_a_regression_target_that_is_not_finite_is_refused_naming_file_and_line(tmp_path, target):
    path = write(tmp_path, "scores.csv", f"text,label\na,0.5\nb,{target}\nc,1.5\n")
    with pytest.raises(DataFileError, match=rf"scores.csv:3: label '{target}' is not a finite number"):
        read_train(path, task_type="regression")
    # Left to auto-detection, a column of numbers with one that is not finite is refused the same way.
    with pytest.raises(DataFileError, match=rf"scores.csv:3: label '{target}' is not a finite number, in a column"):
        read_train(path)


def test_nan_among_integer_labels_is_not_taken_for_regression(tmp_path):
    path = write(tmp_path, "classes.tsv", "text\tlabel\na\t1\nb\tnan\nc\t2\n")
    with pytest.raises(DataFileError, match=r"classes.tsv:3: label 'nan' is not a finite number.*--task_type class"):
        read_train(path)
    task, examples, _ = read_train(path, task_type="classification")  # as asked: a class named "nan"
    assert task.labels == ("1", "2", "nan") and [e.label for e in examples] == [0, 2, 1]


def test_labels_with_surrounding_spaces_are_one_class(tmp_path):
    path = write(tmp_path, "spaces.csv", "text,label\na,positive\nb,positive \nc,negative\nd, negative\n")
    task, examples, _ = read_train(path)
    assert task.labels == ("negative", "positive") and [e.label for e in examples] == [1, 1, 0, 0]


def test_a_header_naming_a_column_twice_is_refused(tmp_path):
    path = write(tmp_path, "twice.csv", "text,label,text\na,pos,b\nc,neg,d\n")
    with pytest.raises(DataFileError, match=r"twice.csv:1: the header names 'text' twice"):
        read_train(path)


def test_a_tsv_field_starting_with_a_quote_is_read_as_written(tmp_path):
    rows = ['"quoted" start\tpos', "plain\tneg", 'a "middle" quote\tpos', '"\tneg']
    path = write(tmp_path, "quotes.tsv", "text\tlabel\n" + "\n".join(rows) + "\n")
    _, examples, report = read_train(path)
    assert report.rows == 4  # every row of the file, none swallowed
    assert [e.text_a for e in examples] == ['"quoted" start', "plain", 'a "middle" quote', '"']


def test_a_csv_with_an_unclosed_quote_is_refused_not_swallowing_rows(tmp_path):
    path = write(tmp_path, "unclosed.csv", 'text,label\nfine,pos\n"opened,neg\nnext,pos\nlast,neg\n')
    with pytest.raises(DataFileError, match=r"unclosed.csv:3: .*unclosed quote"):
        read_train(path)
    # Quoting that closes on its line is CSV as usual.
    good = write(tmp_path, "quoted.csv", 'text,label\n"a, b",pos\n"say ""hi""",neg\n')
    _, examples, _ = read_train(good)
    assert [e.text_a for e in examples] == ["a, b", 'say "hi"']


@pytest.mark.parametrize("label", ["pos\\titive", "pos\\nitive"])
def test_a_label_holding_a_tab_or_line_break_is_refused(tmp_path, label):
    # JSON lines can carry them; dev_predictions.tsv could not hold them in one column.
    path = write(tmp_path, "tabs.jsonl", f'{{"text": "a", "label": "{label}"}}\n{{"text": "b", "label": "neg"}}\n')
    with pytest.raises(DataFileError, match=r"tabs.jsonl:1: label .* holds a tab or a line break"):
        read_train(path)


def test_one_label_given_or_found_is_refused(tmp_path):
    path = write(tmp_path, "one.csv", "text,label\na,pos\nb,pos\n")
    with pytest.raises(DataFileError, match=r"--labels pos: one label only; a classifier needs two or more"):
        read_train(path, labels=("pos",))
    with pytest.raises(DataFileError, match=r"one.csv: one label only \(pos\)"):
        read_train(path)


def test_blank_header_names_a_task_never_reads_may_repeat(tmp_path):
    # A spreadsheet's export often ends its header with empty names: they are never read.
    path = write(tmp_path, "sheet.csv", "text,label,,\na,pos,,\nb,neg,,\n")
    _, examples, _ = read_train(path)
    assert [e.text_a for e in examples] == ["a", "b"]


def test_a_saved_models_class_names_are_matched_by_name():
    from albert_tf.tasks.glue import Columns, GlueDataError, TsvTask

    def task(*labels):
        return TsvTask("mine", labels=labels, train=Columns(0, None, 1, header=True))

    assert task("b", "a").with_model_labels(("a", "b")).labels == ("a", "b")
    assert task("a", "c").with_model_labels(("a", "b", "c")).labels == ("a", "b", "c")  # a dev file without b
    assert task("a", "b").with_model_labels(None).labels == ("a", "b")  # a model without names
    assert task().with_model_labels(("a", "b")).labels == ()  # regression: the outputs' shapes decide
    with pytest.raises(GlueDataError, match=r"mine: the labels x,a .* include x, which the model was not fine-tuned"):
        task("x", "a").with_model_labels(("a", "b"))


@pytest.mark.realdata
def test_without_max_seq_length_the_run_takes_the_models_own_limit(real_data, pretraining_data, tmp_path):
    import csv
    import json

    from command_helpers import run_command

    rows = [line.split("\t") for line in (real_data / "glue" / "SST-2" / "dev.tsv").read_text().splitlines()[1:41]]
    for name, part in (("train.csv", rows[:24]), ("dev.csv", rows[24:])):
        with open(tmp_path / name, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["review", "sentiment"])
            writer.writerows([text, ("negative", "positive")[int(label)]] for text, label in part)
    args = [f"--train_file={tmp_path / 'train.csv'}", f"--dev_file={tmp_path / 'dev.csv'}", "--text_column=review"]
    args += ["--label_column=sentiment", f"--spm_model_file={pretraining_data['spm']}", "--do_train", "--do_eval"]
    args += [f"--albert_config_file={pretraining_data['config']}", "--train_step=2", "--save_checkpoints_steps=2"]
    args += ["--train_batch_size=8", "--eval_batch_size=8", "--grad_accum_steps=2"]
    # The README's own-data command on a model of 128 positions: the default 512 is lowered to them.
    result = run_command("albert_tf.run_classifier", [*args, f"--output_dir={tmp_path / 'out'}"])
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads((tmp_path / "out" / "checkpoints" / "finetune_settings.json").read_text())
    assert record["max_seq_length"] == 128
    # Run again, it resumes at the optimizer step it reached (accumulation counts micro-batches inside).
    again = run_command("albert_tf.run_classifier", [*args, f"--output_dir={tmp_path / 'out'}"])
    assert again.returncode == 0 and "already at step 2 (of --train_step 2): nothing to train" in again.stdout
    # Asked for explicitly, a length beyond the model's positions is still refused before any work.
    refused = run_command("albert_tf.run_classifier", [*args, f"--output_dir={tmp_path / 'x'}", "--max_seq_length=512"])
    assert refused.returncode == 1 and not (tmp_path / "x").exists()
    assert "--max_seq_length 512 exceeds max_position_embeddings = 128" in refused.stderr


@pytest.mark.parametrize(
    "name, text, message",
    [
        ("empty.csv", "", r"empty.csv: the file is empty"),
        ("blank.jsonl", "\n\n", r"blank.jsonl: the file is empty"),
        ("header.csv", "text,label\n", r"header.csv: a header \(line 1\) and no rows"),
        ("header.tsv", "text\tlabel\n\n", r"header.tsv: a header \(line 1\) and no rows"),
    ],
)
def test_an_empty_or_header_only_file_is_called_empty(tmp_path, name, text, message):
    path = write(tmp_path, name, text)
    with pytest.raises(DataFileError, match=message):
        read_train(path)  # reading the labels from it
    with pytest.raises(DataFileError, match=message):
        read_train(path, labels=("neg", "pos"))  # reading its rows


@pytest.mark.parametrize(
    "encoding, named",
    [("utf-16", "UTF-16"), ("utf-16-be", "UTF-16"), ("utf-32", "UTF-32")],
)
def test_a_utf16_or_utf32_file_is_refused_naming_its_encoding(tmp_path, encoding, named):
    path = tmp_path / "wide.csv"
    # Python's utf-16/utf-32 write a byte-order mark; utf-16-be writes none (NUL bytes show it).
    path.write_bytes("text,label\na,pos\nb,neg\n".encode(encoding))
    with pytest.raises(DataFileError, match=rf"wide.csv: .*{named}.*, not UTF-8: (convert|save) it"):
        read_train(str(path))
    # UTF-8 with a byte-order mark (Excel's "CSV UTF-8") is UTF-8: read, the mark not part of the first name.
    path.write_bytes("text,label\na,pos\nb,neg\n".encode("utf-8-sig"))
    task, examples, _ = read_train(str(path))
    assert task.labels == ("neg", "pos") and [e.text_a for e in examples] == ["a", "b"]


def test_json_labels_are_normalised_and_mixed_types_refused(tmp_path):
    # 1 and 1.0 are one number: one class, named as JSON writes the integer.
    numbers = write(
        tmp_path, "numbers.jsonl", '{"text": "a", "label": 1}\n{"text": "b", "label": 1.0}\n{"text": "c", "label": 0}\n'
    )
    task, examples, _ = read_train(numbers)
    assert task.labels == ("0", "1") and [e.label for e in examples] == [1, 1, 0]
    # true/false are named as JSON spells them, not as Python prints them.
    booleans = write(tmp_path, "booleans.jsonl", '{"text": "a", "label": true}\n{"text": "b", "label": false}\n')
    task, examples, _ = read_train(booleans)
    assert task.labels == ("false", "true") and [e.label for e in examples] == [1, 0]
    # A column of numbers stays regression-capable: 0.5 is still 0.5.
    scores = write(tmp_path, "scores.jsonl", '{"text": "a", "label": 0.5}\n{"text": "b", "label": 2}\n')
    task, examples, _ = read_train(scores)
    assert task.is_regression and [e.label for e in examples] == [0.5, 2.0]
    # A number and a string (or a boolean) in one label column: which class would "1" be? Refused.
    for second in ('"1"', "true"):
        mixed = write(tmp_path, "mixed.jsonl", f'{{"text": "a", "label": 1}}\n{{"text": "b", "label": {second}}}\n')
        with pytest.raises(DataFileError, match=r"mixed.jsonl:2: label .* is a (string|boolean), line 1's a number"):
            read_train(mixed)


def test_a_json_key_given_twice_in_one_object_is_refused(tmp_path):
    path = write(tmp_path, "twice.jsonl", '{"text": "a", "label": "x"}\n{"text": "b", "label": "x", "label": "y"}\n')
    with pytest.raises(DataFileError, match=r"twice.jsonl:2: the key 'label' is given twice"):
        read_train(path)


def test_a_json_array_of_objects_is_read_with_each_objects_line(tmp_path):
    path = write(
        tmp_path,
        "pretty.json",
        '[\n  {\n    "text": "a",\n    "label": "pos"\n  },\n  {"text": "b", "label": "neg"}\n]\n',
    )
    task, examples, _ = read_train(path)
    assert task.labels == ("neg", "pos") and [(e.guid, e.text_a) for e in examples] == [
        ("train-2", "a"),
        ("train-6", "b"),
    ]
    bad = write(tmp_path, "bad.json", '[\n  {"text": "a", "label": "pos"},\n  {"text": "b", "label": }\n]\n')
    with pytest.raises(DataFileError, match=r"bad.json:3: not JSON"):
        read_train(bad)
    one_line = write(tmp_path, "one_line.json", '[{"text": "a", "label": "pos"}, {"text": "b", "label": "neg"}]')
    _, examples, _ = read_train(one_line)
    assert [e.guid for e in examples] == ["train-1", "train-1.1"]  # ids stay distinct (test_predictions.tsv)
    # Only a file that starts with an array is one: a list on a later line of JSON lines is refused.
    later = write(tmp_path, "later.jsonl", '{"text": "a", "label": "pos"}\n[{"text": "b", "label": "neg"}]\n')
    with pytest.raises(DataFileError, match=r"later.jsonl:2: a JSON list, expected an object per line"):
        read_train(later)
    items = write(tmp_path, "items.json", '[\n  {"text": "a", "label": "pos"},\n  "b"\n]\n')
    with pytest.raises(DataFileError, match=r"items.json:3: a JSON str, expected an object"):
        read_train(items)


def test_column_numbers_on_a_file_with_a_header_are_refused(tmp_path):
    path = write(tmp_path, "header.tsv", "sentence\tlabel\na\tpos\nb\tneg\nc\tpos\n")
    by_number = {"text_column": "0", "label_column": "1"}
    with pytest.raises(DataFileError, match=r"header.tsv:1: label 'label' is on line 1 only: a header\?"):
        read_train(path, **by_number)
    # With the labels given (or a dev file), the header row's label is unknown: said the same way.
    with pytest.raises(DataFileError, match=r"header.tsv:1: unknown label 'label' .*: a header\?"):
        read_train(path, labels=("neg", "pos"), **by_number)
    scores = write(tmp_path, "scores.tsv", "sentence\tscore\na\t0.5\nb\t1.5\n")
    with pytest.raises(DataFileError, match=r"scores.tsv:1: label 'score' is not a finite number.*: a header\?"):
        read_train(scores, task_type="regression", **by_number)
    # A file without a header reads as before.
    plain = write(tmp_path, "plain.tsv", "a\tpos\nb\tneg\nc\tpos\n")
    task, examples, _ = read_train(plain, **by_number)
    assert task.labels == ("neg", "pos") and len(examples) == 3


@pytest.mark.parametrize("flags", [{"label_column": "text"}, {"text_b_column": "text"}, {"text_b_column": "label"}])
def test_one_column_for_two_roles_is_refused(tmp_path, flags):
    path = write(tmp_path, "same.csv", "text,label\na,pos\nb,neg\n")
    with pytest.raises(DataFileError, match=r"--\w+_column \w+: the same column as --\w+_column"):
        read_train(path, **flags)


def test_an_own_pair_task_needs_the_same_max_seq_length_as_a_glue_pair(tmp_path):
    from albert_tf.finetuning import runner
    from albert_tf.finetuning.settings import FineTuneError, FineTuneSettings
    from albert_tf.tasks import glue

    path = write(tmp_path, "pairs.csv", "a,b,label\nx,y,pos\nz,w,neg\n")
    task = file_task(train_file=path, text_column="a", text_b_column="b", label_column="label")
    assert task.min_seq_length() == glue.task("mrpc", str(tmp_path)).min_seq_length()
    settings = FineTuneSettings(output_dir=str(tmp_path / "out"), max_seq_length=4, do_train=True, verbose=False)
    with pytest.raises(FineTuneError, match=r"^--max_seq_length 4: pairs needs at least 5 \(\[CLS\] text_a"):
        runner.run(task, settings)
    assert not (tmp_path / "out").exists()
