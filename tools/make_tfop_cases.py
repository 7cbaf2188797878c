"""Small Keras configs with serialized TensorFlow operations (tf.keras TFOpLambda/SlicingOpLambda
in both node forms, and Keras 3 keras.ops calls) and their outputs computed with numpy, for
tests/io/next_tfop_files_test.cpp: writes the configs to tests/io/fixtures/synthetic/tfop_*.json
(to_json() form) and prints the expected outputs, which the test holds.
Inputs: flat index i of the batch of 2 -> sin(0.37 i + 0.1) (first input), cos(0.23 i) (second)."""
import json
import numpy as np


def inputs(shape, k):
    i = np.arange(int(np.prod(shape)), dtype=np.float64)
    v = np.sin(0.37 * i + 0.1) if k == 0 else np.cos(0.23 * i)
    return v.astype(np.float32).astype(np.float64).reshape(shape)


def inp(name, shape):
    return {"class_name": "InputLayer", "name": name, "inbound_nodes": [],
            "config": {"batch_input_shape": [None] + shape, "dtype": "float32",
                       "sparse": False, "ragged": False, "name": name}}


def tfop(name, fn, node, cls="TFOpLambda"):
    return {"class_name": cls, "name": name, "inbound_nodes": [node],
            "config": {"name": name, "trainable": True, "dtype": "float32", "function": fn}}


S = lambda a, b, c: {"start": a, "stop": b, "step": c}
ALL = S(None, None, None)


def model_a():
    # Single unwrapped entries (tf.keras 2.11's form), a constant first argument, a list.
    C = [[1.0, -1.0], [0.5, 2.0], [0.0, 1.0], [-0.5, 0.25]]
    layers = [inp("a", [3, 4]), inp("b", [3, 4]),
              tfop("t1", "__operators__.add", ["a", 0, 0, {"y": ["b", 0, 0], "name": None}]),
              tfop("t2", "math.multiply", ["t1", 0, 0, {"y": 0.5, "name": None}]),
              tfop("t3", "math.subtract", ["_CONSTANT_VALUE", -1, 1.0, {"y": ["t2", 0, 0], "name": None}]),
              tfop("t4", "concat", [["t3", 0, 0, {"axis": -1, "name": "concat"}],
                                    ["a", 0, 0, {"axis": -1, "name": "concat"}]]),
              tfop("t5", "__operators__.getitem",
                   ["t4", 0, 0, {"slice_spec": [ALL, S(1, None, None), S(None, None, 2)]}],
                   "SlicingOpLambda"),
              tfop("t6", "linalg.matmul", ["t5", 0, 0, {"b": C, "name": None}]),
              tfop("t7", "nn.relu", ["t6", 0, 0, {"name": None}]),
              tfop("t8", "compat.v1.transpose", ["t7", 0, 0, {"perm": [0, 2, 1], "name": "transpose"}]),
              tfop("t9", "reshape", ["t8", 0, 0, {"shape": [-1, 4], "name": None}]),
              tfop("t10", "expand_dims", ["t9", 0, 0, {"axis": 1, "name": None}]),
              tfop("t11", "math.reduce_mean", ["t10", 0, 0, {"axis": [1]}]),
              tfop("t12", "nn.softmax", ["t11", 0, 0, {"name": None}])]
    cfg = {"class_name": "Functional", "keras_version": "2.11.0", "backend": "tensorflow",
           "config": {"name": "ops_a", "layers": layers, "input_layers": [["a", 0, 0], ["b", 0, 0]],
                      "output_layers": [["t12", 0, 0]]}}
    a, b = inputs([2, 3, 4], 0), inputs([2, 3, 4], 1)
    t3 = 1.0 - (a + b) * 0.5
    t4 = np.concatenate([t3, a], axis=-1)
    t5 = t4[:, 1:, ::2]
    t7 = np.maximum(t5 @ np.array(C), 0)
    t9 = np.transpose(t7, [0, 2, 1]).reshape(-1, 4)
    t11 = np.expand_dims(t9, 1).mean(axis=1)
    e = np.exp(t11 - t11.max(-1, keepdims=True))
    return cfg, e / e.sum(-1, keepdims=True)


def model_b():
    # Entries wrapped in a list ([[entry]]), reductions, stack, squeeze, newaxis, Ellipsis.
    w = lambda name, node: [node]
    L = [inp("a", [2, 3]),
         tfop("s1", "math.reduce_max", [["a", 0, 0, {"axis": -1, "keepdims": True}]]),
         tfop("s2", "math.subtract", [["a", 0, 0, {"y": ["s1", 0, 0], "name": None}]]),
         tfop("s3", "math.exp", [["s2", 0, 0, {"name": None}]]),
         tfop("s4", "math.reduce_sum", [["s3", 0, 0, {"axis": 2, "keepdims": True}]]),
         tfop("s5", "math.truediv", [["s3", 0, 0, {"y": ["s4", 0, 0], "name": None}]]),
         tfop("s6", "__operators__.getitem",
              [["s5", 0, 0, {"slice_spec": [{"class_name": "__ellipsis__"}, None, S(1, None, None)]}]],
              "SlicingOpLambda"),
         tfop("s7", "squeeze", [["s6", 0, 0, {"axis": 2}]]),
         tfop("s9", "__operators__.getitem", [["a", 0, 0, {"slice_spec": [ALL, ALL, S(None, 2, None)]}]],
              "SlicingOpLambda"),
         tfop("s8", "stack", [["s7", 0, 0, {"axis": 1}], ["s9", 0, 0, {"axis": 1}]]),
         tfop("s10", "math.reduce_min", [["s8", 0, 0, {"axis": 1}]]),
         tfop("s11", "math.pow", [["s10", 0, 0, {"y": 2.0, "name": None}]]),
         tfop("s12", "__operators__.add", [["s11", 0, 0, {"y": 1.0, "name": None}]]),
         tfop("s13", "math.sqrt", [["s12", 0, 0, {"name": None}]]),
         tfop("s14", "cast", [["s13", 0, 0, {"dtype": "float32"}]])]
    cfg = {"class_name": "Functional", "keras_version": "2.14.0", "backend": "tensorflow",
           "config": {"name": "ops_b", "layers": L, "input_layers": [["a", 0, 0]],
                      "output_layers": [["s14", 0, 0]]}}
    a = inputs([2, 2, 3], 0)
    s3 = np.exp(a - a.max(-1, keepdims=True))
    s5 = s3 / s3.sum(2, keepdims=True)
    s7 = np.squeeze(s5[..., None, 1:], axis=2)
    s8 = np.stack([s7, a[:, :, :2]], axis=1)
    return cfg, np.sqrt(s8.min(axis=1) ** 2 + 1.0)


def kt(name, shape):
    return {"class_name": "__keras_tensor__",
            "config": {"shape": [None] + shape, "dtype": "float32", "keras_history": [name, 0, 0]}}


def k3op(cls, name, args, module="keras.src.ops.numpy", **config):
    return {"module": module, "class_name": cls, "config": dict(name=name, **config),
            "registered_name": cls, "name": name, "inbound_nodes": [{"args": args, "kwargs": {}}]}


def model_c():
    # Keras 3's keras.ops calls in a Functional config.
    sl = lambda a, b, c: {"class_name": "__slice__", "config": {"start": a, "stop": b, "step": c}}
    L = [{"module": "keras.layers", "class_name": "InputLayer", "registered_name": None, "name": "x",
          "inbound_nodes": [], "config": {"batch_shape": [None, 3, 4], "dtype": "float32",
                                          "sparse": False, "name": "x"}},
         k3op("Mean", "k1", [kt("x", [3, 4])], axis=1, keepdims=False),
         k3op("Add", "k2", [kt("k1", [4]), 1.0]),
         k3op("GetItem", "k3", [kt("x", [3, 4]), [sl(None, None, None), 0]]),
         k3op("Multiply", "k4", [kt("k2", [4]), kt("k3", [4])]),
         k3op("Concatenate", "k5", [[kt("k4", [4]), kt("k1", [4])]], axis=-1),
         k3op("Reshape", "k6", [kt("k5", [8])], newshape=[-1, 2, 4]),
         k3op("Transpose", "k7", [kt("k6", [2, 4])], axes=[0, 2, 1]),
         k3op("Matmul", "k8", [kt("k7", [4, 2]), kt("k6", [2, 4])]),
         k3op("Softmax", "k9", [kt("k8", [4, 4])], module="keras.src.ops.nn", axis=-1),
         k3op("Sum", "k10", [kt("k9", [4, 4])], axis=1, keepdims=False),
         k3op("Relu", "k11", [kt("k10", [4])], module="keras.src.ops.nn")]
    cfg = {"module": "keras.src.models.functional", "class_name": "Functional",
           "registered_name": "Functional",
           "config": {"name": "ops_c", "trainable": True, "layers": L,
                      "input_layers": [["x", 0, 0]], "output_layers": [["k11", 0, 0]]}}
    x = inputs([2, 3, 4], 0)
    k1 = x.mean(axis=1)
    k5 = np.concatenate([(k1 + 1.0) * x[:, 0], k1], axis=-1)
    k6 = k5.reshape(-1, 2, 4)
    k8 = np.transpose(k6, [0, 2, 1]) @ k6
    e = np.exp(k8 - k8.max(-1, keepdims=True))
    return cfg, np.maximum((e / e.sum(-1, keepdims=True)).sum(axis=1), 0)


if __name__ == "__main__":
    import os
    out = os.path.join(os.path.dirname(__file__), "..", "tests", "io", "fixtures", "synthetic")
    for f, stem in ((model_a, "tfop_unwrapped_k211"), (model_b, "tfop_wrapped_k214"),
                    (model_c, "tfop_keras3_ops")):
        cfg, want = f()
        with open(os.path.join(out, stem + ".json"), "w") as fh:
            json.dump(cfg, fh, indent=1)
            fh.write("\n")
        print(stem, ", ".join("%.9g" % v for v in want.ravel()))
