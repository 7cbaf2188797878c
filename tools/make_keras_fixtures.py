#!/usr/bin/env python3
"""Writes small synthetic Keras-layout files for the edge cases of tests/io (the real files Keras
wrote are read from ../shared/keras-models/, see MANIFEST.md there; they are never copied here). Needs only numpy and h5py (Debian
python3-numpy, python3-h5py); Keras itself is not needed. The outputs are committed, so the tests
never run this script:

    /usr/bin/python3 tools/make_keras_fixtures.py tests/io/fixtures/synthetic

Layouts follow Keras's saving code: legacy_h5_format.py / tf.keras hdf5_format.py for .h5 and
saving_lib.py for .keras. Expected outputs come from the NumPy forward passes below (float64).

Files:
  mlp_<strings>.h5        Sequential MLP (Dense, BatchNormalization, Dense) as a legacy .h5, with
                          every string attribute written in one h5py string form: vlen_utf8 (str),
                          vlen_ascii (bytes), fixed_ascii (numpy |S), fixed_utf8, and split
                          (layer_names0/1, weight_names0/1, as Keras splits long lists).
  mlp.input.npy / mlp.output.npy
  nested_legacy.h5        tf.keras-style Functional "Model" calling a nested Sequential
                          [BatchNormalization, Dense]: the nested entry lists all trainable
                          weights before the non-trainable ones; node index 1 refers to the
                          nested model's call.
  nested_legacy.input.npy / .output.npy
  nested_frozen_legacy.h5 a nested Sequential whose first Dense is frozen (trainable: false), so
                          its weights come after every trainable weight of the nested model.
  nested_frozen_legacy.input.npy / .output.npy
  functional_k3.keras     Keras 3 Functional: Rescaling, ZeroPadding2D, DepthwiseConv2D,
                          ReLU(max_value=6), Conv2D 1x1, LeakyReLU, ELU, Add, Concatenate,
                          GlobalAveragePooling2D, a nested Sequential of two Dense, Softmax.
  functional_k3.json      its to_json() architecture, and
  functional_k3.weights.h5  its weights in Keras 3 save_weights layout.
  functional_k3.input.npy / .output.npy
"""
import json
import os
import sys
import zipfile

import h5py
import numpy as np

RNG = np.random.default_rng(20240604)


def randn(*shape, scale=0.5):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


# --- NumPy reference ops (float64) ------------------------------------------------------------

def relu(x):
    return np.maximum(x, 0)


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def batchnorm(x, gamma, beta, mean, var, eps=1e-3):
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def depthwise_valid(x, k, b):
    # x [N,H,W,C], k [kh,kw,C,M] -> [N,H-kh+1,W-kw+1,C*M], channel c*M + m.
    n, h, w, c = x.shape
    kh, kw, _, m = k.shape
    oh, ow = h - kh + 1, w - kw + 1
    y = np.zeros((n, oh, ow, c, m))
    for i in range(kh):
        for j in range(kw):
            y += x[:, i:i + oh, j:j + ow, :, None] * k[i, j][None, None, None]
    return y.reshape(n, oh, ow, c * m) + b


def elu(x, alpha=1.0):
    return np.where(x > 0, x, alpha * (np.exp(np.minimum(x, 0)) - 1))


# --- h5py string forms ------------------------------------------------------------------------

def put_str(attrs, name, value, form):
    if form == "vlen_utf8":
        attrs[name] = value
    elif form == "vlen_ascii":
        attrs.create(name, value.encode(), dtype=h5py.string_dtype("ascii"))
    elif form in ("fixed_ascii", "split"):
        attrs[name] = np.bytes_(value.encode())
    elif form == "fixed_utf8":
        b = value.encode()
        attrs.create(name, b, dtype=h5py.string_dtype("utf-8", max(1, len(b))))
    else:
        raise ValueError(form)


def put_list(attrs, name, values, form):
    if not values:
        attrs[name] = np.array([])  # what h5py makes of Keras's empty list: float64 (0,)
        return
    if form == "vlen_utf8":
        attrs.create(name, values, dtype=h5py.string_dtype("utf-8"))
    elif form == "vlen_ascii":
        attrs.create(name, [v.encode() for v in values], dtype=h5py.string_dtype("ascii"))
    elif form == "fixed_ascii":
        attrs[name] = np.array([v.encode() for v in values])
    elif form == "fixed_utf8":
        width = max(len(v.encode()) for v in values)
        attrs.create(name, [v.encode() for v in values], dtype=h5py.string_dtype("utf-8", width))
    elif form == "split":
        arr = np.array([v.encode() for v in values])
        for i, chunk in enumerate(np.array_split(arr, 2)):
            attrs["%s%d" % (name, i)] = chunk
    else:
        raise ValueError(form)


# --- 1. MLP in every string form ----------------------------------------------------------------

def mlp(out_dir):
    w = {
        "dense": {"kernel:0": randn(5, 4), "bias:0": randn(4)},
        "bn": {"gamma:0": 1 + randn(4, scale=0.2), "beta:0": randn(4, scale=0.2),
               "moving_mean:0": randn(4, scale=0.3),
               "moving_variance:0": (0.5 + RNG.random(4)).astype(np.float32)},
        "out": {"kernel:0": randn(4, 3), "bias:0": randn(3)},
    }
    order = {"dense": ["kernel:0", "bias:0"], "bn": ["gamma:0", "beta:0", "moving_mean:0",
                                                    "moving_variance:0"],
             "out": ["kernel:0", "bias:0"]}
    x = RNG.standard_normal((6, 5)).astype(np.float32)
    h = relu(x.astype(np.float64) @ w["dense"]["kernel:0"] + w["dense"]["bias:0"])
    h = batchnorm(h, *(w["bn"][k] for k in order["bn"]))
    y = softmax(h @ w["out"]["kernel:0"] + w["out"]["bias:0"])
    np.save(os.path.join(out_dir, "mlp.input.npy"), x)
    np.save(os.path.join(out_dir, "mlp.output.npy"), y.astype(np.float32))
    config = {"class_name": "Sequential", "config": {"name": "mlp", "layers": [
        {"class_name": "InputLayer", "config": {"batch_input_shape": [None, 5], "dtype": "float32",
                                                "sparse": False, "name": "input_1"}},
        {"class_name": "Dense", "config": {"name": "dense", "trainable": True, "dtype": "float32",
                                           "units": 4, "activation": "relu", "use_bias": True}},
        {"class_name": "BatchNormalization", "config": {"name": "bn", "axis": -1,
                                                        "epsilon": 0.001, "momentum": 0.99}},
        {"class_name": "Dense", "config": {"name": "out", "units": 3,
                                           "activation": "softmax"}}]}}
    for form in ("vlen_utf8", "vlen_ascii", "fixed_ascii", "fixed_utf8", "split"):
        with h5py.File(os.path.join(out_dir, "mlp_%s.h5" % form), "w") as f:
            put_str(f.attrs, "keras_version", "2.3.1", form)
            put_str(f.attrs, "backend", "tensorflow", form)
            put_str(f.attrs, "model_config", json.dumps(config), form)
            g = f.create_group("model_weights")
            put_list(g.attrs, "layer_names", ["dense", "bn", "out"], form)
            for layer in ("dense", "bn", "out"):
                lg = g.create_group(layer)
                put_list(lg.attrs, "weight_names", ["%s/%s" % (layer, k) for k in order[layer]],
                         form)
                for k in order[layer]:
                    lg.create_dataset("%s/%s" % (layer, k), data=w[layer][k])


# --- 2. Nested Sequential in a tf.keras Functional model (legacy h5) -----------------------------

def nested_legacy(out_dir):
    bn = {"gamma": 1 + randn(3, scale=0.2), "beta": randn(3, scale=0.2),
          "moving_mean": randn(3, scale=0.3),
          "moving_variance": (0.5 + RNG.random(3)).astype(np.float32)}
    inner = {"kernel": randn(3, 4), "bias": randn(4)}
    head = {"kernel": randn(4, 2), "bias": randn(2)}
    x = RNG.standard_normal((5, 3)).astype(np.float32)
    h = batchnorm(x.astype(np.float64), bn["gamma"], bn["beta"], bn["moving_mean"],
                  bn["moving_variance"])
    h = np.tanh(h @ inner["kernel"] + inner["bias"])
    y = h @ head["kernel"] + head["bias"]
    np.save(os.path.join(out_dir, "nested_legacy.input.npy"), x)
    np.save(os.path.join(out_dir, "nested_legacy.output.npy"), y.astype(np.float32))
    nested = {"name": "block", "layers": [
        {"class_name": "BatchNormalization", "config": {"name": "bn", "batch_input_shape": [None, 3],
                                                        "axis": [1]}},
        {"class_name": "Dense", "config": {"name": "inner", "units": 4, "activation": "tanh"}}]}
    config = {"class_name": "Model", "config": {"name": "outer", "layers": [
        {"name": "x", "class_name": "InputLayer",
         "config": {"batch_input_shape": [None, 3], "name": "x"}, "inbound_nodes": []},
        {"name": "block", "class_name": "Sequential", "config": nested,
         "inbound_nodes": [[["x", 0, 0, {}]]]},
        {"name": "head", "class_name": "Dense", "config": {"name": "head", "units": 2},
         "inbound_nodes": [[["block", 1, 0, {}]]]}],
        "input_layers": [["x", 0, 0]], "output_layers": [["head", 0, 0]]}}
    with h5py.File(os.path.join(out_dir, "nested_legacy.h5"), "w") as f:
        f.attrs["keras_version"] = b"2.2.4-tf"
        f.attrs["backend"] = b"tensorflow"
        f.attrs["model_config"] = json.dumps(config).encode()
        g = f.create_group("model_weights")
        g.attrs["layer_names"] = np.array([b"x", b"block", b"head"])
        g.create_group("x").attrs["weight_names"] = np.array([])
        # A nested model's weights: all trainable ones (of every sublayer), then the rest.
        names = ["bn/gamma:0", "bn/beta:0", "inner/kernel:0", "inner/bias:0",
                 "bn/moving_mean:0", "bn/moving_variance:0"]
        values = [bn["gamma"], bn["beta"], inner["kernel"], inner["bias"], bn["moving_mean"],
                  bn["moving_variance"]]
        bg = g.create_group("block")
        bg.attrs["weight_names"] = np.array([n.encode() for n in names])
        for n, v in zip(names, values):
            bg.create_dataset(n, data=v)
        hg = g.create_group("head")
        hg.attrs["weight_names"] = np.array([b"head/kernel:0", b"head/bias:0"])
        hg.create_dataset("head/kernel:0", data=head["kernel"])
        hg.create_dataset("head/bias:0", data=head["bias"])


def nested_frozen_legacy(out_dir):
    """A frozen Dense inside a nested Sequential: its weights move to the non-trainable part."""
    d1 = {"kernel": randn(3, 4), "bias": randn(4)}
    bn = {"gamma": 1 + randn(4, scale=0.2), "beta": randn(4, scale=0.2),
          "moving_mean": randn(4, scale=0.3),
          "moving_variance": (0.5 + RNG.random(4)).astype(np.float32)}
    d2 = {"kernel": randn(4, 2), "bias": randn(2)}
    x = RNG.standard_normal((4, 3)).astype(np.float32)
    h = relu(x.astype(np.float64) @ d1["kernel"] + d1["bias"])
    h = batchnorm(h, bn["gamma"], bn["beta"], bn["moving_mean"], bn["moving_variance"])
    y = h @ d2["kernel"] + d2["bias"]
    np.save(os.path.join(out_dir, "nested_frozen_legacy.input.npy"), x)
    np.save(os.path.join(out_dir, "nested_frozen_legacy.output.npy"), y.astype(np.float32))
    nested = {"name": "base", "layers": [
        {"class_name": "Dense", "config": {"name": "frozen", "trainable": False, "units": 4,
                                           "activation": "relu",
                                           "batch_input_shape": [None, 3]}},
        {"class_name": "BatchNormalization", "config": {"name": "bn"}},
        {"class_name": "Dense", "config": {"name": "top", "units": 2}}]}
    config = {"class_name": "Sequential", "config": {"name": "outer", "layers": [
        {"class_name": "Sequential", "config": nested}]}}
    with h5py.File(os.path.join(out_dir, "nested_frozen_legacy.h5"), "w") as f:
        f.attrs["keras_version"] = b"2.4.0"
        f.attrs["backend"] = b"tensorflow"
        f.attrs["model_config"] = json.dumps(config).encode()
        g = f.create_group("model_weights")
        g.attrs["layer_names"] = np.array([b"base"])
        names = ["bn/gamma:0", "bn/beta:0", "top/kernel:0", "top/bias:0",
                 "frozen/kernel:0", "frozen/bias:0", "bn/moving_mean:0", "bn/moving_variance:0"]
        values = [bn["gamma"], bn["beta"], d2["kernel"], d2["bias"], d1["kernel"], d1["bias"],
                  bn["moving_mean"], bn["moving_variance"]]
        bg = g.create_group("base")
        bg.attrs["weight_names"] = np.array([n.encode() for n in names])
        for n, v in zip(names, values):
            bg.create_dataset(n, data=v)


# --- 3. Keras 3 Functional with the Keras layer classes real files use ---------------------------

POLICY = {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
          "registered_name": None}


def k3_layer(cls, name, config, inputs, build_shape=None):
    cfg = {"name": name, "trainable": True, "dtype": POLICY}
    cfg.update(config)
    args = [{"class_name": "__keras_tensor__",
             "config": {"shape": s, "dtype": "float32", "keras_history": [n, 0, 0]}}
            for n, s in inputs]
    entry = {"module": "keras.layers", "class_name": cls, "config": cfg, "registered_name": None}
    if build_shape is not None:
        entry["build_config"] = {"input_shape": build_shape}
    entry["name"] = name
    entry["inbound_nodes"] = [{"args": [args] if cls in ("Add", "Concatenate") else args,
                               "kwargs": {}}]
    return entry


def functional_k3(out_dir):
    dw_k, dw_b = randn(3, 3, 2, 2), randn(4, scale=0.2)
    pw_k, pw_b = randn(1, 1, 4, 4), randn(4, scale=0.2)
    d1_k, d1_b = randn(8, 5), randn(5)
    d2_k, d2_b = randn(5, 3), randn(3)
    x = RNG.standard_normal((3, 6, 6, 2)).astype(np.float32)
    h = x.astype(np.float64) * 0.5 + 0.1
    h = np.pad(h, ((0, 0), (1, 1), (1, 1), (0, 0)))
    h = np.minimum(relu(depthwise_valid(h, dw_k, dw_b)), 6.0)
    h = np.einsum("nhwc,cf->nhwf", h, pw_k[0, 0]) + pw_b
    a = np.where(h > 0, h, 0.2 * h)
    b = elu(h)
    cat = np.concatenate([a + b, a], axis=-1)
    g = cat.mean(axis=(1, 2))
    y = softmax(relu(g @ d1_k + d1_b) @ d2_k + d2_b)
    np.save(os.path.join(out_dir, "functional_k3.input.npy"), x)
    np.save(os.path.join(out_dir, "functional_k3.output.npy"), y.astype(np.float32))

    nested = {"module": "keras", "class_name": "Sequential", "config": {
        "name": "head", "trainable": True, "dtype": POLICY, "layers": [
            {"module": "keras.layers", "class_name": "InputLayer",
             "config": {"batch_shape": [None, 8], "dtype": "float32", "sparse": False,
                        "ragged": False, "name": "head_input"}, "registered_name": None},
            {"module": "keras.layers", "class_name": "Dense",
             "config": {"name": "dense", "trainable": True, "dtype": POLICY, "units": 5,
                        "activation": "relu", "use_bias": True},
             "registered_name": None, "build_config": {"input_shape": [None, 8]}},
            {"module": "keras.layers", "class_name": "Dense",
             "config": {"name": "dense_1", "trainable": True, "dtype": POLICY, "units": 3,
                        "activation": "linear", "use_bias": True},
             "registered_name": None, "build_config": {"input_shape": [None, 5]}}],
        "build_input_shape": [None, 8]}, "registered_name": None,
        "build_config": {"input_shape": [None, 8]}}
    nested_entry = dict(nested)
    nested_entry["name"] = "head"
    nested_entry["inbound_nodes"] = [{"args": [{"class_name": "__keras_tensor__", "config": {
        "shape": [None, 8], "dtype": "float32", "keras_history": ["gap", 0, 0]}}], "kwargs": {}}]
    layers = [
        {"module": "keras.layers", "class_name": "InputLayer",
         "config": {"batch_shape": [None, 6, 6, 2], "dtype": "float32", "sparse": False,
                    "ragged": False, "name": "image"}, "registered_name": None, "name": "image",
         "inbound_nodes": []},
        k3_layer("Rescaling", "rescale", {"scale": 0.5, "offset": 0.1},
                 [("image", [None, 6, 6, 2])]),
        k3_layer("ZeroPadding2D", "pad", {"padding": [[1, 1], [1, 1]],
                                          "data_format": "channels_last"},
                 [("rescale", [None, 6, 6, 2])]),
        k3_layer("DepthwiseConv2D", "dw", {"kernel_size": [3, 3], "strides": [1, 1],
                                           "padding": "valid", "depth_multiplier": 2,
                                           "data_format": "channels_last",
                                           "dilation_rate": [1, 1], "activation": "linear",
                                           "use_bias": True},
                 [("pad", [None, 8, 8, 2])], [None, 8, 8, 2]),
        k3_layer("ReLU", "relu6", {"max_value": 6.0, "negative_slope": 0.0, "threshold": 0.0},
                 [("dw", [None, 6, 6, 4])]),
        k3_layer("Conv2D", "pw", {"filters": 4, "kernel_size": [1, 1], "strides": [1, 1],
                                  "padding": "valid", "data_format": "channels_last",
                                  "dilation_rate": [1, 1], "groups": 1, "activation": "linear",
                                  "use_bias": True},
                 [("relu6", [None, 6, 6, 4])], [None, 6, 6, 4]),
        k3_layer("LeakyReLU", "leaky", {"negative_slope": 0.2}, [("pw", [None, 6, 6, 4])]),
        k3_layer("ELU", "elu", {"alpha": 1.0}, [("pw", [None, 6, 6, 4])]),
        k3_layer("Add", "add", {}, [("leaky", [None, 6, 6, 4]), ("elu", [None, 6, 6, 4])],
                 [[None, 6, 6, 4], [None, 6, 6, 4]]),
        k3_layer("Concatenate", "cat", {"axis": -1},
                 [("add", [None, 6, 6, 4]), ("leaky", [None, 6, 6, 4])],
                 [[None, 6, 6, 4], [None, 6, 6, 4]]),
        k3_layer("GlobalAveragePooling2D", "gap", {"data_format": "channels_last",
                                                   "keepdims": False},
                 [("cat", [None, 6, 6, 8])]),
        nested_entry,
        k3_layer("Softmax", "probs", {"axis": -1}, [("head", [None, 3])]),
    ]
    config = {"module": "keras.src.models.functional", "class_name": "Functional",
              "config": {"name": "functional", "trainable": True, "layers": layers,
                         "input_layers": [["image", 0, 0]], "output_layers": [["probs", 0, 0]]},
              "registered_name": "Functional"}
    with open(os.path.join(out_dir, "functional_k3.json"), "w") as f:
        json.dump(config, f)

    def weights(path):
        # Keys are snake_case class names made unique per container (saving_lib.py).
        with h5py.File(path, "w") as f:
            f.create_group("vars").attrs["name"] = "functional"
            for key, name, values in [
                    ("input_layer", "image", []), ("rescaling", "rescale", []),
                    ("zero_padding2d", "pad", []), ("depthwise_conv2d", "dw", [dw_k, dw_b]),
                    ("re_lu", "relu6", []), ("conv2d", "pw", [pw_k, pw_b]),
                    ("leaky_re_lu", "leaky", []), ("elu", "elu", []), ("add", "add", []),
                    ("concatenate", "cat", []), ("global_average_pooling2d", "gap", []),
                    ("sequential", "head", []), ("softmax", "probs", []),
                    ("sequential/layers/dense", "dense", [d1_k, d1_b]),
                    ("sequential/layers/dense_1", "dense_1", [d2_k, d2_b])]:
                g = f.create_group("layers/%s/vars" % key)
                g.attrs["name"] = name
                for i, v in enumerate(values):
                    g.create_dataset(str(i), data=v)

    weights(os.path.join(out_dir, "functional_k3.weights.h5"))
    tmp = os.path.join(out_dir, "model.weights.h5")
    weights(tmp)
    with zipfile.ZipFile(os.path.join(out_dir, "functional_k3.keras"), "w") as z:
        z.writestr("metadata.json", json.dumps({"keras_version": "3.10.0",
                                                "date_saved": "2025-01-01@00:00:00"}))
        z.writestr("config.json", json.dumps(config))
        z.write(tmp, "model.weights.h5")
    os.remove(tmp)


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "tests/io/fixtures/synthetic"
    os.makedirs(out_dir, exist_ok=True)
    mlp(out_dir)
    nested_legacy(out_dir)
    nested_frozen_legacy(out_dir)
    functional_k3(out_dir)


if __name__ == "__main__":
    main()
