#!/usr/bin/python3
"""Writes the data and the initial model of examples/transformer_forecast.yaml.

The data: one synthetic series (three sines and noise, numpy default_rng(7)) cut into windows of
24 steps; x [N, 24, 1] is a window, y [N, 1] the value after it; the first 512 windows train, the
next 128 test. The positions of a window's steps, 0..23, are a second model input pos [N, 24]
(int32), which an Embedding turns into learned positional embeddings (the position ids are data,
so the model's graph stays a plain Keras Functional one). The positions are the model's first
input: nnfleet's data check of Embedding ids reads the first input (see the example's comment).

The model, a one-block Transformer encoder (Keras 3 .keras archive written here with zipfile and
h5py, weights drawn as Keras's initializers would draw them: glorot_uniform kernels, zero biases,
uniform(-0.05, 0.05) embeddings, LayerNormalization gamma 1 and beta 0):
  series [24, 1] -> Dense(16) "proj";  positions [24] -> Embedding(24, 16) "pos_embedding"
  h = Add(proj, pos_embedding)
  a = MultiHeadAttention(num_heads 2, key_dim 8)(h, h);   n1 = LayerNormalization(h + a)
  f = Dense(16)(Dense(32, relu)(n1));                      n2 = LayerNormalization(n1 + f)
  GlobalAveragePooling1D -> Dense(1) "forecast"

Run: /usr/bin/python3 tools/make_transformer_forecast.py [OUT]  (default build/bench-data/transformer)
"""
import io
import json
import os
import sys
import zipfile

import h5py
import numpy as np

T, D, HEADS, KEY_DIM, FF = 24, 16, 2, 8, 32
N_TRAIN, N_TEST = 512, 128


def series(rng):
    n = N_TRAIN + N_TEST + T
    t = np.arange(n, dtype=np.float64)
    s = (np.sin(t * 2 * np.pi / 24) + 0.5 * np.sin(t * 2 * np.pi / 7.3)
         + 0.25 * np.sin(t * 2 * np.pi / 61) + 0.1 * rng.normal(size=n))
    x = np.stack([s[i:i + T] for i in range(N_TRAIN + N_TEST)])[:, :, None].astype(np.float32)
    y = s[T:T + N_TRAIN + N_TEST, None].astype(np.float32)
    pos = np.tile(np.arange(T, dtype=np.int32), (N_TRAIN + N_TEST, 1))
    return x, pos, y


def tensor(name, shape):
    return {"class_name": "__keras_tensor__",
            "config": {"shape": [None, *shape], "dtype": "float32", "keras_history": [name, 0, 0]}}


def layer(cls, name, config, args, kwargs=None):
    return {"module": "keras.layers", "class_name": cls, "config": {"name": name, **config},
            "registered_name": None, "name": name,
            "inbound_nodes": [{"args": args, "kwargs": kwargs or {}}]}


def model_config():
    seq = lambda name, d=D: tensor(name, [T, d])
    inputs = [
        {"module": "keras.layers", "class_name": "InputLayer", "registered_name": None,
         "config": {"batch_shape": [None, T, 1], "dtype": "float32", "sparse": False,
                    "name": "series"}, "name": "series", "inbound_nodes": []},
        {"module": "keras.layers", "class_name": "InputLayer", "registered_name": None,
         "config": {"batch_shape": [None, T], "dtype": "int32", "sparse": False,
                    "name": "positions"}, "name": "positions", "inbound_nodes": []},
    ]
    layers = inputs + [
        layer("Dense", "proj", {"units": D}, [seq("series", 1)]),
        layer("Embedding", "pos_embedding", {"input_dim": T, "output_dim": D},
              [tensor("positions", [T])]),
        layer("Add", "add", {}, [[seq("proj"), seq("pos_embedding")]]),
        layer("MultiHeadAttention", "attention", {"num_heads": HEADS, "key_dim": KEY_DIM},
              [seq("add"), seq("add")]),
        layer("Add", "residual_1", {}, [[seq("add"), seq("attention")]]),
        layer("LayerNormalization", "norm_1", {"epsilon": 1e-6}, [seq("residual_1")]),
        layer("Dense", "ff_1", {"units": FF, "activation": "relu"}, [seq("norm_1")]),
        layer("Dense", "ff_2", {"units": D}, [seq("ff_1", FF)]),
        layer("Add", "residual_2", {}, [[seq("norm_1"), seq("ff_2")]]),
        layer("LayerNormalization", "norm_2", {"epsilon": 1e-6}, [seq("residual_2")]),
        layer("GlobalAveragePooling1D", "pool", {}, [seq("norm_2")]),
        layer("Dense", "forecast", {"units": 1}, [tensor("pool", [D])]),
    ]
    return {"module": "keras", "class_name": "Functional", "registered_name": "Functional",
            "config": {"name": "transformer_forecast", "trainable": True, "layers": layers,
                       "input_layers": [["positions", 0, 0], ["series", 0, 0]],
                       "output_layers": [["forecast", 0, 0]]}}


def glorot(rng, shape):
    """Keras's fans: the last two axes, times the product of the others (the receptive field)."""
    rf = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
    fan_in, fan_out = shape[-2] * rf, shape[-1] * rf
    lim = np.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-lim, lim, size=shape).astype(np.float32)


def weights(rng):
    """{group path: [vars]} in the keys Keras 3 gives the layers (snake_case class, numbered)."""
    z = lambda *s: np.zeros(s, np.float32)
    mha = {f"layers/multi_head_attention/{g}": v for g, v in {
        "query_dense": [glorot(rng, (D, HEADS, KEY_DIM)), z(HEADS, KEY_DIM)],
        "key_dense": [glorot(rng, (D, HEADS, KEY_DIM)), z(HEADS, KEY_DIM)],
        "value_dense": [glorot(rng, (D, HEADS, KEY_DIM)), z(HEADS, KEY_DIM)],
        "output_dense": [glorot(rng, (HEADS, KEY_DIM, D)), z(D)]}.items()}
    return {"layers/dense": [glorot(rng, (1, D)), z(D)],
            "layers/embedding": [rng.uniform(-0.05, 0.05, size=(T, D)).astype(np.float32)],
            **mha,
            "layers/layer_normalization": [np.ones(D, np.float32), z(D)],
            "layers/dense_1": [glorot(rng, (D, FF)), z(FF)],
            "layers/dense_2": [glorot(rng, (FF, D)), z(D)],
            "layers/layer_normalization_1": [np.ones(D, np.float32), z(D)],
            "layers/dense_3": [glorot(rng, (D, 1)), z(1)]}


def write_keras(path, rng):
    buf = io.BytesIO()
    with h5py.File(buf, "w") as f:
        for group, vs in weights(rng).items():
            g = f.create_group(group + "/vars")
            for i, v in enumerate(vs):
                g.create_dataset(str(i), data=v)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("metadata.json", json.dumps({"keras_version": "3.5.0"}))
        z.writestr("config.json", json.dumps(model_config()))
        z.writestr("model.weights.h5", buf.getvalue())


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "build/bench-data/transformer"
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(7)
    x, pos, y = series(rng)
    for split, rows in (("train", slice(0, N_TRAIN)), ("test", slice(N_TRAIN, None))):
        np.save(os.path.join(out, f"{split}_x.npy"), x[rows])
        np.save(os.path.join(out, f"{split}_pos.npy"), pos[rows])
        np.save(os.path.join(out, f"{split}_y.npy"), y[rows])
    write_keras(os.path.join(out, "transformer_forecast.keras"), rng)


if __name__ == "__main__":
    main()
