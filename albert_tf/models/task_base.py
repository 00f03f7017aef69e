"""What every task model shares: a backbone, a head initializer, and its config."""

import keras


def head_initializer(backbone):
    """The original's heads: truncated normal with the config's `initializer_range` (0.02)."""
    return keras.initializers.TruncatedNormal(stddev=backbone.albert_config.initializer_range)


class TaskModel(keras.Model):
    """Base of the models with heads (pretraining and fine-tuning): `backbone` plus flat keyword config values.

    Subclasses build their functional graph in `__init__`, then call
    `_set_task_config(backbone, **values)`; `get_config` returns those values
    and the serialized backbone, `from_config` rebuilds it. Heads that read
    only `sequence_output` set `reads_pooled_output = False`, so fine-tuning
    leaves the pooler as loaded (as the original: it gets no gradient).
    """

    reads_pooled_output = True

    def _set_task_config(self, backbone, **values):
        self.backbone = backbone
        self._task_config = values

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "backbone": keras.saving.serialize_keras_object(self.backbone),
            **self._task_config,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["backbone"] = keras.saving.deserialize_keras_object(config["backbone"])
        return cls(**config)


def label_config(labels, num_classes) -> dict:
    """`{"labels": [...]}` for a classifier's config when names are given (and fit), else `{}`."""
    if labels is None:
        return {}
    labels = [str(label) for label in labels]
    if len(labels) != num_classes or len(set(labels)) != len(labels):
        raise ValueError(f"labels {labels}: need {num_classes} distinct names (num_classes)")
    return {"labels": labels}


def label_names(model):
    """The class names a classifier was fine-tuned with (its config's `labels`), or None."""
    return tuple(model.get_config().get("labels") or ()) or None
