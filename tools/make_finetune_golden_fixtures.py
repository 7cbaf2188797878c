#!/usr/bin/python3
"""Writes the fine-tuning golden fixtures of tests/fleet/fine_tune_test.cpp with PyTorch.

A Keras 3 Functional model file (finetune.keras, written in saving_lib.py's layout as
tools/make_keras_fixtures.py does) with a frozen nested Sequential base [Dense with an L2
kernel regularizer, BatchNormalization with moving statistics away from 0/1], then a Dense with
kernel L1L2, bias L2 and activity L2 regularizers and a MaxNorm kernel constraint, and a softmax
Dense with an L1 kernel regularizer. It is trained as Keras's fit() would (Adam with an
ExponentialDecay schedule, batch 5 over 16 rows, the last 4 of 20 the validation split,
no shuffling, 3 epochs), with Keras's formulas written out here and PyTorch for the gradients
(float64):
  - loss = mean sparse categorical cross-entropy (probabilities clipped to [1e-7, 1 - 1e-7])
    + the weight penalties of the TRAINABLE weights only (keras/src/layers/layer.py
    _get_regularization_losses walks trainable_weights: the frozen base's L2 does not count)
    + the activity penalty divided by the batch size (layer.py, Keras >= 3.14 and tf.keras 2);
  - the frozen BatchNormalization uses its moving statistics (Keras 3: training and trainable);
  - Adam (Keras 3: epsilon outside the bias-corrected root), the rate schedule(iterations);
  - the MaxNorm projection after each update (optimizer.apply, constraints.py);
  - history: loss = batch losses weighted by batch size; val_loss = the same total loss over the
    validation rows (Trainer.compute_loss adds model.losses in test_step too); learning_rate =
    schedule(iterations) after the epoch.
Outputs (tests/fleet/fixtures/finetune/): finetune.keras, x.npy, y.npy, history.json (per epoch
loss, val_loss, learning_rate, and the final weights of the trainable layers).

Run: /usr/bin/python3 tools/make_finetune_golden_fixtures.py
"""
import json
import os
import zipfile

import h5py
import numpy as np
import torch

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fleet", "fixtures", "finetune")
RNG = np.random.default_rng(1212)
EPS = 1e-7
POLICY = {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
          "registered_name": None}
LR0, DECAY_STEPS, DECAY_RATE = 0.02, 3.0, 0.5
B1, B2, ADAM_EPS = 0.9, 0.999, 1e-7
EPOCHS, BATCH, N, N_VAL = 3, 5, 20, 4
REG = {"base_k": 0.01, "h_l1": 0.001, "h_l2": 0.01, "hb_l2": 0.005, "act_l2": 0.01,
       "o_l1": 0.002}
MAX_NORM = 1.5


def f32(*shape, scale=0.5):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def reg(cls, **cfg):
    return {"module": "keras.regularizers", "class_name": cls, "config": cfg,
            "registered_name": None}


def layer(cls, name, config, inputs=None, build=None, trainable=True):
    cfg = {"name": name, "trainable": trainable, "dtype": POLICY}
    cfg.update(config)
    e = {"module": "keras.layers", "class_name": cls, "config": cfg, "registered_name": None}
    if build is not None:
        e["build_config"] = {"input_shape": build}
    if inputs is not None:
        e["name"] = name
        e["inbound_nodes"] = [{"args": [{"class_name": "__keras_tensor__", "config": {
            "shape": s, "dtype": "float32", "keras_history": [n, 0, 0]}} for n, s in inputs],
            "kwargs": {}}]
    return e


def model_config():
    base = {"module": "keras", "class_name": "Sequential", "config": {
        "name": "base", "trainable": False, "dtype": POLICY, "layers": [
            {"module": "keras.layers", "class_name": "InputLayer",
             "config": {"batch_shape": [None, 6], "dtype": "float32", "sparse": False,
                        "ragged": False, "name": "base_input"}, "registered_name": None},
            layer("Dense", "base_dense", {"units": 8, "activation": "relu", "use_bias": True,
                                          "kernel_regularizer": reg("L2", l2=REG["base_k"])},
                  build=[None, 6], trainable=False),
            layer("BatchNormalization", "base_bn", {"axis": -1, "momentum": 0.99,
                                                    "epsilon": 0.001, "center": True,
                                                    "scale": True},
                  build=[None, 8], trainable=False)],
        "build_input_shape": [None, 6]}, "registered_name": None,
        "build_config": {"input_shape": [None, 6]}, "name": "base",
        "inbound_nodes": [{"args": [{"class_name": "__keras_tensor__", "config": {
            "shape": [None, 6], "dtype": "float32", "keras_history": ["features", 0, 0]}}],
            "kwargs": {}}]}
    layers = [
        {"module": "keras.layers", "class_name": "InputLayer",
         "config": {"batch_shape": [None, 6], "dtype": "float32", "sparse": False,
                    "ragged": False, "name": "features"}, "registered_name": None,
         "name": "features", "inbound_nodes": []},
        base,
        layer("Dense", "hidden", {
            "units": 5, "activation": "tanh", "use_bias": True,
            "kernel_regularizer": reg("L1L2", l1=REG["h_l1"], l2=REG["h_l2"]),
            "bias_regularizer": reg("L2", l2=REG["hb_l2"]),
            "activity_regularizer": reg("L2", l2=REG["act_l2"]),
            "kernel_constraint": {"module": "keras.constraints", "class_name": "MaxNorm",
                                  "config": {"max_value": MAX_NORM, "axis": 0},
                                  "registered_name": None}},
              [("base", [None, 8])], [None, 8]),
        layer("Dense", "out", {"units": 3, "activation": "softmax", "use_bias": True,
                               "kernel_regularizer": reg("L1", l1=REG["o_l1"])},
              [("hidden", [None, 5])], [None, 5]),
    ]
    return {"module": "keras.src.models.functional", "class_name": "Functional",
            "config": {"name": "finetune", "trainable": True, "layers": layers,
                       "input_layers": [["features", 0, 0]],
                       "output_layers": [["out", 0, 0]]},
            "registered_name": "Functional"}


def write_keras(path, w):
    tmp = os.path.join(OUT, "model.weights.h5")
    with h5py.File(tmp, "w") as f:
        f.create_group("vars").attrs["name"] = "finetune"
        for key, name, values in [
                ("input_layer", "features", []), ("sequential", "base", []),
                ("sequential/layers/dense", "base_dense", [w["bk"], w["bb"]]),
                ("sequential/layers/batch_normalization", "base_bn",
                 [w["gamma"], w["beta"], w["mean"], w["var"]]),
                ("dense", "hidden", [w["hk"], w["hb"]]), ("dense_1", "out", [w["ok"], w["ob"]])]:
            g = f.create_group("layers/%s/vars" % key)
            g.attrs["name"] = name
            for i, v in enumerate(values):
                g.create_dataset(str(i), data=v)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("metadata.json", json.dumps({"keras_version": "3.10.0",
                                                "date_saved": "2025-01-01@00:00:00"}))
        z.writestr("config.json", json.dumps(model_config()))
        z.write(tmp, "model.weights.h5")
    os.remove(tmp)


def t64(a):
    return torch.tensor(np.asarray(a, dtype=np.float64))


def forward(w, p, x):
    """Returns (probabilities, hidden output) with the base frozen (moving statistics)."""
    h = torch.relu(x @ w["bk"] + w["bb"])
    h = (h - w["mean"]) / torch.sqrt(w["var"] + 1e-3) * w["gamma"] + w["beta"]
    a = torch.tanh(h @ p[0] + p[1])
    return torch.softmax(a @ p[2] + p[3], dim=1), a


def data_loss_sum(probs, labels):
    q = (probs / probs.sum(dim=1, keepdim=True)).clamp(EPS, 1 - EPS)
    return -torch.log(q[torch.arange(len(labels)), labels]).sum()


def weight_penalty(p):
    return (REG["h_l1"] * p[0].abs().sum() + REG["h_l2"] * (p[0] ** 2).sum() +
            REG["hb_l2"] * (p[1] ** 2).sum() + REG["o_l1"] * p[2].abs().sum())


def activity_sum(a):
    return REG["act_l2"] * (a ** 2).sum()


def lr_at(it):
    return LR0 * DECAY_RATE ** (it / DECAY_STEPS)


def max_norm(k):
    norms = torch.sqrt((k ** 2).sum(dim=0, keepdim=True))
    return k * (norms.clamp(0, MAX_NORM) / (1e-7 + norms))


def main():
    os.makedirs(OUT, exist_ok=True)
    w = {"bk": f32(6, 8), "bb": f32(8, scale=0.1), "gamma": (1 + f32(8, scale=0.2)),
         "beta": f32(8, scale=0.2), "mean": np.abs(f32(8, scale=0.3)),
         "var": (0.5 + np.abs(f32(8, scale=0.5))), "hk": f32(8, 5, scale=0.8),
         "hb": f32(5, scale=0.1), "ok": f32(5, 3, scale=0.8), "ob": f32(3, scale=0.1)}
    x = RNG.standard_normal((N, 6)).astype(np.float32)
    y = (np.arange(N) % 3).astype(np.int32)
    RNG.shuffle(y)
    np.save(os.path.join(OUT, "x.npy"), x)
    np.save(os.path.join(OUT, "y.npy"), y)
    write_keras(os.path.join(OUT, "finetune.keras"), w)

    wt = {k: t64(v) for k, v in w.items()}
    p = [t64(w["hk"]), t64(w["hb"]), t64(w["ok"]), t64(w["ob"])]
    m = [torch.zeros_like(q) for q in p]
    v = [torch.zeros_like(q) for q in p]
    xt, yt = t64(x), torch.tensor(y.astype(np.int64))
    n_train = N - N_VAL
    it = 0
    hist = {"loss": [], "val_loss": [], "learning_rate": []}
    for _ in range(EPOCHS):
        total, seen = 0.0, 0
        for b0 in range(0, n_train, BATCH):
            xb, yb = xt[b0:min(b0 + BATCH, n_train)], yt[b0:min(b0 + BATCH, n_train)]
            n = len(yb)
            ps = [q.clone().requires_grad_(True) for q in p]
            probs, a = forward(wt, ps, xb)
            loss = data_loss_sum(probs, yb) / n + weight_penalty(ps) + activity_sum(a) / n
            loss.backward()
            total += loss.item() * n
            seen += n
            lr = lr_at(it)
            it += 1
            alpha = lr * np.sqrt(1 - B2 ** it) / (1 - B1 ** it)
            for i in range(4):
                g = ps[i].grad.detach()
                m[i] = m[i] + (g - m[i]) * (1 - B1)
                v[i] = v[i] + (g * g - v[i]) * (1 - B2)
                p[i] = p[i] - alpha * m[i] / (torch.sqrt(v[i]) + ADAM_EPS)
            p[0] = max_norm(p[0])
        hist["loss"].append(total / seen)
        with torch.no_grad():
            probs, a = forward(wt, p, xt[n_train:])
            val = (data_loss_sum(probs, yt[n_train:]) + activity_sum(a)) / N_VAL + \
                weight_penalty(p)
        hist["val_loss"].append(val.item())
        hist["learning_rate"].append(lr_at(it))
    hist["final"] = {"hidden_kernel": p[0].flatten().tolist(), "hidden_bias": p[1].tolist(),
                     "out_kernel": p[2].flatten().tolist(), "out_bias": p[3].tolist()}
    with open(os.path.join(OUT, "history.json"), "w") as f:
        json.dump(hist, f, indent=1)
    print(json.dumps({k: hist[k] for k in ("loss", "val_loss", "learning_rate")}))


if __name__ == "__main__":
    main()
