"""Full-integer int8 TFLite: int8 weights and int8 activations into every matmul, calibrated on real text.

Every FULLY_CONNECTED (the projections, the feed-forward and the heads) takes
int8 activations whose ranges come from the representative samples
(`albert_tf.export.representative`), with int8 weights (per channel); GELU,
tanh, the embedding gathers and the reshapes/transposes between them stay in
int8 with them. What stays float32 (`FLOAT_OPS`, by op kind), and why:

- the attention scores and softmax (BATCH_MATMUL, the key-mask ADD, SOFTMAX):
  in int8 the scores share one scale with the additive mask bias
  `(1 - mask) * -10000` — a step of ~39, every real score the same level,
  uniform attention: the fine-tuned SST-2 model's labels agreed with float32 on
  54%. They are S×S per head, small next to the projections.
- LayerNorm and the residual ADDs (MEAN, SQUARED_DIFFERENCE, RSQRT, MUL, ADD,
  SUB): ALBERT's hidden states have a few large features, so one int8 scale per
  tensor is coarse, and the normalisation multiplies that error into every
  feature. Kept in int8 (attention islands float), SST-2 labels agreed on
  98.4-98.9% and the file ran 2× slower than this one (bench/README.md).
- the signature: int32 ids in and float32 outputs out (dequantized), so the
  file is a drop-in for the float32 one.

The file takes any sequence length up to `max_seq_length`, as the float one:
its activation ranges are fixed at calibration (samples padded to
`max_seq_length`, the padding masked), and a shorter input only has fewer rows
in the same ranges (the agreement is tested at each example's real length).

Ops are kept float with the converter's selective quantization
(`tf.lite.experimental.QuantizationDebugger`, `denylisted_ops`): builtin ops only.
"""

import warnings
from typing import Dict, List, Sequence

import numpy as np
import tensorflow as tf

LAYER_NORM_STATISTICS = ("MEAN", "SQUARED_DIFFERENCE", "RSQRT")
FLOAT_OPS = LAYER_NORM_STATISTICS + ("ADD", "SUB", "MUL", "SOFTMAX", "BATCH_MATMUL")


def quantize_full_integer(
    converter: tf.lite.TFLiteConverter, samples: List[Dict[str, np.ndarray]], float_ops: Sequence[str] = FLOAT_OPS
) -> bytes:
    """The full-integer flatbuffer from a float32 `converter`, calibrated on `samples` (input dicts)."""
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: (dict(sample) for sample in samples)
    with warnings.catch_warnings():  # the debugger builds TF's deprecated tf.lite.Interpreter
        warnings.simplefilter("ignore", UserWarning)
        debugger = tf.lite.experimental.QuantizationDebugger(
            converter=converter,
            debug_dataset=lambda: (dict(sample) for sample in samples[:1]),
            debug_options=tf.lite.experimental.QuantizationDebugOptions(denylisted_ops=list(float_ops)),
        )
        return debugger.get_nondebug_quantized_model()


def op_output_types(tflite_file: str) -> Dict[str, Dict[str, int]]:
    """{op kind: {output tensor type: count}} of a .tflite file's main graph: which ops run in int8."""
    from ai_edge_litert import schema_py_generated as schema

    kinds = {code: name for name, code in vars(schema.BuiltinOperator).items() if not name.startswith("_")}
    types = {code: name for name, code in vars(schema.TensorType).items() if not name.startswith("_")}
    with open(tflite_file, "rb") as f:
        model = schema.ModelT.InitFromPackedBuf(f.read(), 0)
    graph = model.subgraphs[0]
    table: Dict[str, Dict[str, int]] = {}
    for op in graph.operators:
        code = model.operatorCodes[op.opcodeIndex]
        kind = kinds[max(code.builtinCode, code.deprecatedBuiltinCode)]
        output_type = types[graph.tensors[op.outputs[0]].type]
        table.setdefault(kind, {})
        table[kind][output_type] = table[kind].get(output_type, 0) + 1
    return dict(sorted(table.items()))
