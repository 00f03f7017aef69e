"""The layers use keras.ops only: the same weights give the same forward pass
under Keras' NumPy backend (in a subprocess). JAX: tests/test_jax_backend.py trains
on it from the same weights as TensorFlow, to the same losses."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from albert_tf import AlbertBackbone, AlbertPretrainer

from paths import REPO

FORWARD = textwrap.dedent("""
    import sys
    import numpy as np
    import keras
    from albert_tf import AlbertBackbone, AlbertPretrainer
    backend, config, weights, inputs, output = sys.argv[1:]
    assert keras.backend.backend() == backend
    assert "tensorflow" not in sys.modules, "albert_tf imported TensorFlow"
    model = AlbertPretrainer(AlbertBackbone.from_albert_config(config))
    model.load_weights(weights)
    out = model(dict(np.load(inputs)))
    np.savez(output, **{k: keras.ops.convert_to_numpy(v) for k, v in out.items()})
""")


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["numpy"])
def test_forward_matches_tensorflow(tmp_path, backend):
    config = str(REPO / "configs" / "albert_tiny.json")
    model = AlbertPretrainer(AlbertBackbone.from_albert_config(config))
    rng = np.random.default_rng(4)
    ids = rng.integers(5, 8000, (2, 12)).astype("int32")
    mask = np.ones_like(ids)
    mask[1, 9:] = 0
    inputs = {
        "input_ids": ids,
        "input_mask": mask,
        "segment_ids": np.zeros_like(ids),
        "masked_lm_positions": np.array([[1, 4, 7], [2, 3, 8]], "int32"),
    }
    np.savez(tmp_path / "inputs.npz", **inputs)
    model.save_weights(str(tmp_path / "model.weights.h5"))
    expected = model(inputs)

    env = dict(os.environ, KERAS_BACKEND=backend, PYTHONPATH=str(REPO))
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            FORWARD,
            backend,
            config,
            str(tmp_path / "model.weights.h5"),
            str(tmp_path / "inputs.npz"),
            str(tmp_path / "out.npz"),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    got = np.load(tmp_path / "out.npz")
    for key in ("mlm_logits", "sop_logits"):
        np.testing.assert_allclose(got[key], np.asarray(expected[key]), atol=1e-4, rtol=0)
