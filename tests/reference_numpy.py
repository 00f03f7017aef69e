"""Google's `modeling.py` forward pass in plain NumPy, on TF1 variable names.

The independent "hand computation" the model is checked against: it reads
the original checkpoint layout directly and shares no code with
albert_tf.
"""

import math

import numpy as np


def _layer_norm(x, prefix, v):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-12) * v[prefix + "/gamma"] + v[prefix + "/beta"]


def _gelu(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


ACTIVATIONS = {"gelu": _gelu, "relu": lambda x: np.maximum(x, 0), "tanh": np.tanh, "linear": lambda x: x}


def _softmax(x):
    x = x - x.max(-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(-1, keepdims=True)


def albert_forward(v, cfg, input_ids, input_mask, segment_ids, masked_positions=None):
    """Returns sequence, pooled, all layers, and (if positions) MLM and SOP logits."""
    v = {k: np.asarray(x, np.float64) for k, x in v.items()}
    act = ACTIVATIONS[cfg["hidden_act"]]
    batch, seq = input_ids.shape
    heads = cfg["num_attention_heads"]
    size = cfg["hidden_size"] // heads
    x = (
        v["bert/embeddings/word_embeddings"][input_ids]
        + v["bert/embeddings/token_type_embeddings"][segment_ids]
        + v["bert/embeddings/position_embeddings"][:seq][None]
    )
    x = _layer_norm(x, "bert/embeddings/LayerNorm", v)
    if cfg["embedding_size"] != cfg["hidden_size"]:
        x = (
            x @ v["bert/encoder/embedding_hidden_mapping_in/kernel"]
            + v["bert/encoder/embedding_hidden_mapping_in/bias"]
        )
    adder = (1.0 - input_mask[:, None, None, :].astype(np.float64)) * -10000.0
    layers = []
    L, G = cfg["num_hidden_layers"], cfg["num_hidden_groups"]
    for layer in range(L):
        group = int(layer / L * G)
        for inner in range(cfg["inner_group_num"]):
            p = f"bert/encoder/transformer/group_{group}/inner_group_{inner}"

            def proj(name):
                out = x @ v[f"{p}/attention_1/self/{name}/kernel"] + v[f"{p}/attention_1/self/{name}/bias"]
                return out.reshape(batch, seq, heads, size).transpose(0, 2, 1, 3)

            q, k, val = proj("query"), proj("key"), proj("value")
            probs = _softmax(q @ k.transpose(0, 1, 3, 2) / math.sqrt(size) + adder)
            ctx = (probs @ val).transpose(0, 2, 1, 3).reshape(batch, seq, heads * size)
            a = ctx @ v[f"{p}/attention_1/output/dense/kernel"] + v[f"{p}/attention_1/output/dense/bias"]
            a = _layer_norm(a + x, f"{p}/LayerNorm", v)
            m = act(a @ v[f"{p}/ffn_1/intermediate/dense/kernel"] + v[f"{p}/ffn_1/intermediate/dense/bias"])
            f = m @ v[f"{p}/ffn_1/intermediate/output/dense/kernel"] + v[f"{p}/ffn_1/intermediate/output/dense/bias"]
            x = _layer_norm(f + a, f"{p}/LayerNorm_1", v)
            layers.append(x)
    pooled = np.tanh(x[:, 0] @ v["bert/pooler/dense/kernel"] + v["bert/pooler/dense/bias"])
    out = {"sequence_output": x, "pooled_output": pooled, "encoder_outputs": layers}
    if masked_positions is not None:
        gathered = np.take_along_axis(x, masked_positions[:, :, None], axis=1)
        t = act(gathered @ v["cls/predictions/transform/dense/kernel"] + v["cls/predictions/transform/dense/bias"])
        t = _layer_norm(t, "cls/predictions/transform/LayerNorm", v)
        out["mlm_logits"] = t @ v["bert/embeddings/word_embeddings"].T + v["cls/predictions/output_bias"]
        out["sop_logits"] = pooled @ v["cls/seq_relationship/output_weights"].T + v["cls/seq_relationship/output_bias"]
    return out


def random_original_checkpoint(cfg, rng, with_heads=True):
    """Random weights under Google's names and shapes for `cfg` (a dict)."""
    V, E, H = cfg["vocab_size"], cfg["embedding_size"], cfg["hidden_size"]
    I, P, T = cfg["intermediate_size"], cfg["max_position_embeddings"], cfg["type_vocab_size"]

    def w(*shape, scale=0.1):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    v = {
        "bert/embeddings/word_embeddings": w(V, E),
        "bert/embeddings/token_type_embeddings": w(T, E),
        "bert/embeddings/position_embeddings": w(P, E),
        "bert/embeddings/LayerNorm/gamma": 1 + w(E),
        "bert/embeddings/LayerNorm/beta": w(E),
        "bert/pooler/dense/kernel": w(H, H),
        "bert/pooler/dense/bias": w(H),
    }
    if E != H:
        v["bert/encoder/embedding_hidden_mapping_in/kernel"] = w(E, H)
        v["bert/encoder/embedding_hidden_mapping_in/bias"] = w(H)
    L, G = cfg["num_hidden_layers"], cfg["num_hidden_groups"]
    for group in sorted({int(l / L * G) for l in range(L)}):
        for inner in range(cfg["inner_group_num"]):
            p = f"bert/encoder/transformer/group_{group}/inner_group_{inner}"
            for name in ("query", "key", "value"):
                v[f"{p}/attention_1/self/{name}/kernel"] = w(H, H)
                v[f"{p}/attention_1/self/{name}/bias"] = w(H)
            v[f"{p}/attention_1/output/dense/kernel"] = w(H, H)
            v[f"{p}/attention_1/output/dense/bias"] = w(H)
            v[f"{p}/ffn_1/intermediate/dense/kernel"] = w(H, I)
            v[f"{p}/ffn_1/intermediate/dense/bias"] = w(I)
            v[f"{p}/ffn_1/intermediate/output/dense/kernel"] = w(I, H)
            v[f"{p}/ffn_1/intermediate/output/dense/bias"] = w(H)
            for ln in ("LayerNorm", "LayerNorm_1"):
                v[f"{p}/{ln}/gamma"] = 1 + w(H)
                v[f"{p}/{ln}/beta"] = w(H)
    if with_heads:
        v["cls/predictions/transform/dense/kernel"] = w(H, E)
        v["cls/predictions/transform/dense/bias"] = w(E)
        v["cls/predictions/transform/LayerNorm/gamma"] = 1 + w(E)
        v["cls/predictions/transform/LayerNorm/beta"] = w(E)
        v["cls/predictions/output_bias"] = w(V)
        v["cls/seq_relationship/output_weights"] = w(2, H)
        v["cls/seq_relationship/output_bias"] = w(2)
    return v
