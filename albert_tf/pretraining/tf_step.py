"""The pretraining step on TensorFlow: tf.distribute replicas, one `tf.function` per step.

Per optimizer step:

  1. each replica computes gradients of its batch, split into
     `grad_accum_steps` micro-batches whose gradients are summed;
  2. the gradients of all replicas are summed (all-reduce);
  3. the summed gradient is clipped to global norm 1.0 (the original's order:
     clip once, after aggregation);
  4. LAMB/AdamW applies it.

`objective` is the run's (`pretraining.objectives`: anything with `batch_stats(outputs, labels)` and
`loss(stats)`). `jax_step` is the same step on Keras' JAX backend.
"""

import keras
import tensorflow as tf


def make_train_step(strategy, model, optimizer, grad_accum_steps: int, jit_compile: bool, objective):
    """`train_step(iterator) → stats`: one optimizer step on the iterator's next (distributed) batch."""
    accum = grad_accum_steps
    replicas = strategy.num_replicas_in_sync
    loss_scaled = isinstance(optimizer, keras.optimizers.LossScaleOptimizer)

    def micro_step(inputs, labels):
        with tf.GradientTape() as tape:
            outputs = model(inputs, training=True)
            stats = objective.batch_stats(outputs, labels)
            loss = objective.loss(stats)
            # Gradients are summed over micro-batches and replicas: pre-divide.
            scaled = loss / float(accum * replicas)
            if loss_scaled:
                scaled = optimizer.scale_loss(scaled)
        # Embedding gradients come as IndexedSlices; LAMB/AdamW update every row anyway. A weight the loss
        # does not read (PL-BERT's pooler) gets zeros, as JAX's gradient gives it.
        variables = model.trainable_variables
        grads = [
            tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
            for g, v in zip(tape.gradient(scaled, variables), variables)
        ]
        stats["loss"] = loss / float(accum * replicas)
        return grads, stats

    def replica_step(inputs, labels):
        grads, stats = None, None
        for i in range(accum):  # unrolled: accum is small and static
            chunk = lambda t: tf.split(t, accum, axis=0)[i]  # noqa: E731
            g, st = micro_step(tf.nest.map_structure(chunk, inputs), tf.nest.map_structure(chunk, labels))
            grads = g if grads is None else [a + b for a, b in zip(grads, g)]
            stats = st if stats is None else {k: stats[k] + st[k] for k in st}
        return grads, stats

    if jit_compile:
        replica_step = tf.function(replica_step, jit_compile=True)

    @tf.function
    def train_step(iterator):
        inputs, labels = next(iterator)
        grads, stats = strategy.run(replica_step, args=(inputs, labels))
        grads = [strategy.reduce(tf.distribute.ReduceOp.SUM, g, axis=None) for g in grads]
        stats = {k: strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None) for k, v in stats.items()}
        if loss_scaled:
            scale = tf.cast(optimizer.scale_loss(1.0), tf.float32)
            grads = [g / scale for g in grads]
        grads, norm = tf.clip_by_global_norm(grads, 1.0)
        if loss_scaled:  # LossScaleOptimizer unscales (and skips non-finite steps) itself
            grads = [g * scale for g in grads]
        optimizer.apply(grads, model.trainable_variables)
        stats["grad_norm"] = norm
        return stats

    return train_step


def make_eval_step(strategy, model, objective):
    """`eval_step(iterator) → stats`, summed over the replicas."""

    def replica_eval(inputs, labels):
        stats = objective.batch_stats(model(inputs, training=False), labels)
        stats["loss"] = objective.loss(stats) / float(strategy.num_replicas_in_sync)
        return stats

    @tf.function
    def eval_step(iterator):
        inputs, labels = next(iterator)
        stats = strategy.run(replica_eval, args=(inputs, labels))
        return {k: strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None) for k, v in stats.items()}

    return eval_step
