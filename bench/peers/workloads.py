"""The benchmark workloads W1, W3, W4 and W5 (/work/shared/workloads.md) as plain data, for the peers and
for bench/run_bench.py: the layer lists, the W3 grid, parameter and FLOP counts, and the cost
estimate that orders a fleet longest first. No torch here, so the harness can import it cheaply.

A layer is a tuple in Keras terms:
  ("flatten",)  ("dense", units, activation)  ("conv", filters, kernel, activation)
  ("maxpool", pool)  ("dropout", rate)
The last Dense of every model has a softmax activation, as in examples/w1.yaml and w3.yaml.

FLOPs follow workloads.md "The limit": multiply-adds count 2, only Dense and Conv2D count, and a
training step costs 3x the forward pass.
"""

W1_MODELS = {
    "m1": [("flatten",), ("dense", 32, "relu"), ("dense", 10, "softmax")],
    "m2": [("flatten",), ("dense", 128, "relu"), ("dense", 10, "softmax")],
    "m3": [("flatten",), ("dense", 256, "relu"), ("dense", 128, "relu"), ("dense", 10, "softmax")],
    "m4": [("flatten",), ("dense", 64, "tanh"), ("dense", 64, "tanh"), ("dense", 10, "softmax")],
    "m5": [("conv", 8, 3, "relu"), ("maxpool", 2), ("flatten",), ("dense", 10, "softmax")],
    "m6": [("conv", 16, 3, "relu"), ("maxpool", 2), ("conv", 32, 3, "relu"), ("maxpool", 2),
           ("flatten",), ("dense", 64, "relu"), ("dense", 10, "softmax")],
    "m7": [("conv", 32, 3, "relu"), ("conv", 64, 3, "relu"), ("maxpool", 2), ("dropout", 0.25),
           ("flatten",), ("dense", 128, "relu"), ("dropout", 0.5), ("dense", 10, "softmax")],
    "m8": [("flatten",), ("dense", 512, "relu"), ("dropout", 0.2), ("dense", 512, "relu"),
           ("dropout", 0.2), ("dense", 10, "softmax")],
}
W1_INPUT = (28, 28, 1)  # H, W, C (channels_last, as Keras)
W1_TRAIN, W1_TEST = 60000, 10000

# W3: the grid of examples/w3.yaml, in its order (the last var varies fastest).
W3_GRID = {"width": [8, 16, 32, 64, 128], "act": ["relu", "tanh"], "lr": [0.001, 0.003, 0.01],
           "bs": [16, 32]}
W3_DEPTHS = [1, 2]
W3_EPOCHS = 30
W3_INPUT = (64,)
W3_TRAIN, W3_TEST = 1437, 360


def num_text(v):
    """A grid value as nnfleet writes it inside a name: numbers compact (0.001, 32)."""
    if isinstance(v, float):
        return repr(v) if v != int(v) else str(int(v))
    return str(v)


def w3_name(depth, width, act, lr, bs):
    return f"w3-d{depth}-{width}-{act}-lr{num_text(lr)}-bs{bs}"


def w3_layers(depth, width, act):
    return [("dense", width, act) for _ in range(depth)] + [("dense", 10, "softmax")]


def w3_specs(grid=None, depths=None, epochs=W3_EPOCHS):
    """The W3 models as job specs (plan order: depth 1 entry first, then depth 2)."""
    grid = grid or W3_GRID
    specs = []
    for depth in depths or W3_DEPTHS:
        for width in grid["width"]:
            for act in grid["act"]:
                for lr in grid["lr"]:
                    for bs in grid["bs"]:
                        specs.append({"workload": "w3", "name": w3_name(depth, width, act, lr, bs),
                                      "depth": depth, "width": width, "act": act, "lr": lr,
                                      "batch_size": bs, "epochs": epochs})
    return specs


def w1_spec(name, epochs=1):
    return {"workload": "w1", "name": name, "lr": 0.001, "batch_size": 32, "epochs": epochs}


def spec_layers(spec):
    if spec["workload"] == "w1":
        return W1_MODELS[spec["name"]]
    if spec["workload"] == "w5":
        return w5_layers(spec["params"])
    return w3_layers(spec["depth"], spec["width"], spec["act"])


def spec_input(spec):
    return W1_INPUT if spec["workload"] in ("w1", "w5") else W3_INPUT


# W5: a hyper-parameter search with pruning on Fashion-MNIST. The space in the order the plan
# (examples/search/w5.yaml) and the Optuna peer draw it: (name, distribution, arguments, the
# family it belongs to or None). `width` is drawn once per hidden layer as width_0..width_{depth-1}.
W5_SPACE = [
    ("family", "choice", ["mlp", "cnn"], None),
    ("depth", "int", (1, 3), "mlp"),
    ("width", "int_log", (32, 512), "mlp"),
    ("activation", "choice", ["relu", "tanh"], "mlp"),
    ("dropout", "uniform", (0.0, 0.5), "mlp"),
    ("filters", "int_log", (4, 32), "cnn"),
    ("kernel", "choice", [3, 5], "cnn"),
    ("dense", "int_log", (32, 256), "cnn"),
    ("lr", "loguniform", (1e-4, 1e-2), None),
    ("batch_size", "choice", [32, 64, 128], None),
]
W5_TRIALS, W5_MAX_EPOCHS, W5_REDUCTION = 81, 9, 3
W5_TRAIN, W5_VAL, W5_TEST = 10000, 2000, 10000


def w5_layers(p):
    """A W5 trial's layers from its parameters: the MLP (Flatten, then per hidden layer Dense and
    Dropout) or the CNN (two Conv2D + MaxPooling2D(2) blocks, the second with twice the filters,
    then a relu Dense), each ending in Dense(10, softmax)."""
    if p["family"] == "mlp":
        layers = [("flatten",)]
        for i in range(p["depth"]):
            layers += [("dense", p[f"width_{i}"], p["activation"]), ("dropout", p["dropout"])]
    else:
        f, k = p["filters"], p["kernel"]
        layers = [("conv", f, k, "relu"), ("maxpool", 2), ("conv", 2 * f, k, "relu"),
                  ("maxpool", 2), ("flatten",), ("dense", p["dense"], "relu")]
    return layers + [("dense", 10, "softmax")]


def layer_stats(layers, input_shape):
    """(trainable parameters, forward FLOPs per sample) of a layer list."""
    shape = tuple(input_shape)
    params = 0
    flops = 0
    for layer in layers:
        kind = layer[0]
        if kind == "flatten":
            n = 1
            for d in shape:
                n *= d
            shape = (n,)
        elif kind == "dense":
            units = layer[1]
            if len(shape) != 1:
                raise ValueError(f"Dense on a non-flat shape {shape}")
            params += shape[0] * units + units
            flops += 2 * shape[0] * units
            shape = (units,)
        elif kind == "conv":
            filters, k = layer[1], layer[2]
            h, w, c = shape
            ho, wo = h - k + 1, w - k + 1
            params += k * k * c * filters + filters
            flops += 2 * ho * wo * k * k * c * filters
            shape = (ho, wo, filters)
        elif kind == "maxpool":
            p = layer[1]
            h, w, c = shape
            shape = (h // p, w // p, c)
        elif kind == "dropout":
            pass
        else:
            raise ValueError(f"unknown layer kind {kind!r}")
    return params, flops


def spec_stats(spec):
    return layer_stats(spec_layers(spec), spec_input(spec))


def train_flops_per_sample(spec):
    return 3 * spec_stats(spec)[1]


def cost(spec, n_train):
    """Estimated single-core seconds-ish cost, to order a fleet longest first: the training
    FLOPs plus a fixed per-step overhead (which dominates tiny models)."""
    steps = -(-n_train // spec["batch_size"]) * spec["epochs"]
    return train_flops_per_sample(spec) * n_train * spec["epochs"] + 2.0e5 * steps


# W4: one small model per series (sequence models). Each series: windows of W4_WINDOW steps of
# one feature; its first 80% train (W4_TRAIN windows). Models per series, as examples/forecast.yaml.
W4_SERIES, W4_EPOCHS, W4_WINDOW, W4_TRAIN, W4_UNITS = 32, 10, 48, 3238, 32
W4_ARCHS = {"lstm": "LSTM(32), Dense(1)", "gru": "GRU(32) (reset_after), Dense(1)",
            "tcn": "Conv1D(16, 5, causal, relu), Conv1D(16, 5, causal, dilation 2, relu), "
                   "GlobalAveragePooling1D, Dense(1)"}


def w4_train_flops_per_sample(arch):
    """workloads.md: 3x the forward multiply-adds x 2 of the kernel and recurrent-kernel products
    (RNNs), of the convolutions (Conv1D) and of the Dense layers."""
    u, t = W4_UNITS, W4_WINDOW
    if arch in ("lstm", "gru"):
        gates = 4 if arch == "lstm" else 3
        macs = t * gates * u * (1 + u) + u
    else:
        macs = t * 5 * 1 * 16 + t * 5 * 16 * 16 + 16
    return 6 * macs
