"""A few paragraphs of a real SQuAD file written as a file of their own."""

import json


def squad_slice(real_data, tmp_path, name, source, paragraphs):
    data = json.loads(source.read_text(encoding="utf-8"))
    article = data["data"][0]
    article["paragraphs"] = article["paragraphs"][paragraphs]
    data["data"] = [article]
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return str(path)
