"""Full-integer int8 TFLite: int8 weights and activations, calibrated on real text, a few float islands.

Every FULLY_CONNECTED, GELU, residual ADD, embedding GATHER and the attention's
probability × value product run in int8 (ranges from the representative
samples, `albert_tf.export.representative`). What stays float32, and why:

- the attention scores: the query · key product, the additive key-mask bias
  `(1 - mask) * -10000` with every op computed from the mask alone, their sum
  and the softmax. In int8 the sum shares one scale over [-10000, scores]:
  a step of ~39, so every real score rounds to the same level, attention goes
  uniform, and the fine-tuned SST-2 model's labels fell to chance (54%
  agreement). These are small next to the projections (S×S per head).
- LayerNorm's statistics (MEAN, SQUARED_DIFFERENCE, RSQRT): per-row values whose
  int8 error the normalisation multiplies into every feature.
- the signature: int32 ids in and float32 outputs out (dequantized), so the
  file is a drop-in for the float32 one.

Islands are found on the float32 TFLite graph by structure (the ops feeding
each SOFTMAX and the ops that read only `input_mask`), and kept float with the
converter's selective quantization (`tf.lite.experimental.QuantizationDebugger`
with `denylisted_nodes`, nodes named by their output tensors).
"""

from typing import Callable, Dict, List, Set

import numpy as np
import tensorflow as tf

LAYER_NORM_STATISTICS = ["MEAN", "SQUARED_DIFFERENCE", "RSQRT"]
MASK_INPUT = "input_mask"


def _operator_kinds():
    from ai_edge_litert import schema_py_generated as schema

    return schema, {code: name for name, code in vars(schema.BuiltinOperator).items() if not name.startswith("_")}


def float_islands(float_flatbuffer: bytes) -> List[str]:
    """Output tensor names of the ops that stay float32: the attention scores, softmax and key-mask bias."""
    schema, kinds = _operator_kinds()
    model = schema.ModelT.InitFromPackedBuf(float_flatbuffer, 0)
    names: Set[str] = set()
    for graph in model.subgraphs:

        def kind(op):
            code = model.operatorCodes[op.opcodeIndex]
            return kinds[max(code.builtinCode, code.deprecatedBuiltinCode)]

        def name(tensor):
            return graph.tensors[tensor].name.decode()

        producer = {tensor: op for op in graph.operators for tensor in op.outputs}
        # Graph inputs each tensor depends on (constants and variables depend on none).
        sources: Dict[int, Set[str]] = {tensor: {name(tensor)} for tensor in graph.inputs}
        for op in graph.operators:  # flatbuffer order is a topological order
            reached = set().union(*(sources.get(t, set()) for t in op.inputs if t >= 0))
            for tensor in op.outputs:
                sources[tensor] = reached
        mask_inputs = {
            name(entry.tensorIndex)
            for signature in model.signatureDefs or []
            if signature.subgraphIndex == model.subgraphs.index(graph)
            for entry in signature.inputs
            if entry.name.decode() == MASK_INPUT
        }
        for op in graph.operators:
            if mask_inputs and sources[op.outputs[0]] and sources[op.outputs[0]] <= mask_inputs:
                names.add(name(op.outputs[0]))  # the key-mask bias: computed from the mask alone
            if kind(op) == "SOFTMAX":
                names.add(name(op.outputs[0]))
                scores = producer[op.inputs[0]]
                names.add(name(scores.outputs[0]))
                names.update(name(producer[t].outputs[0]) for t in scores.inputs if t in producer)
    return sorted(names)


def quantize_full_integer(new_converter: Callable, samples: List[Dict[str, np.ndarray]]) -> bytes:
    """The full-integer flatbuffer; `new_converter()` gives a fresh float32 converter of the model."""
    islands = float_islands(new_converter().convert())
    converter = new_converter()
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: (dict(sample) for sample in samples)
    debugger = tf.lite.experimental.QuantizationDebugger(
        converter=converter,
        debug_dataset=lambda: (dict(sample) for sample in samples[:1]),
        debug_options=tf.lite.experimental.QuantizationDebugOptions(
            denylisted_ops=LAYER_NORM_STATISTICS, denylisted_nodes=islands
        ),
    )
    return debugger.get_nondebug_quantized_model()
