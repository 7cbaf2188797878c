# W5 of the benchmark workloads from Python: the search examples/search/w5.yaml runs as a plan,
# written as a build(trial) function (81 trials of a conditional MLP/CNN space on Fashion-MNIST,
# successive halving over 1, 3 and 9 epochs, ranked by validation accuracy).
#   /usr/bin/python3 examples/search/w5.py [TRIALS] [OUT]     (PYTHONPATH=build/python, or make python)
import sys

import nnfleet


def build(trial):
    if trial.choice("family", ["mlp", "cnn"]) == "mlp":
        act, rate = trial.choice("activation", ["relu", "tanh"]), trial.uniform("dropout", 0.0, 0.5)
        layers = [{"Flatten": {}}]
        for i in range(trial.int("depth", 1, 3)):
            layers += [{"Dense": {"units": trial.int(f"width_{i}", 32, 512, log=True), "activation": act}},
                       {"Dropout": {"rate": rate}}]
    else:
        f, k = trial.int("filters", 4, 32, log=True), trial.choice("kernel", [3, 5])
        conv = lambda n: {"Conv2D": {"filters": n, "kernel_size": k, "activation": "relu", "padding": "same"}}
        layers = [conv(f), {"MaxPooling2D": {"pool_size": 2}}, conv(2 * f), {"MaxPooling2D": {"pool_size": 2}},
                  {"Flatten": {}}, {"Dense": {"units": trial.int("dense", 32, 256, log=True), "activation": "relu"}}]
    layers.append({"Dense": {"units": 10, "activation": "softmax"}})
    return {"layers": layers, "batch_size": trial.choice("batch_size", [32, 64, 128]),
            "optimizer": {"Adam": {"learning_rate": trial.loguniform("lr", 1e-4, 1e-2)}}}


if __name__ == "__main__":
    trials = int(sys.argv[1]) if len(sys.argv) > 1 else 81
    x, y = nnfleet.datasets.fashion_mnist("train")
    test = nnfleet.datasets.fashion_mnist("test")
    # The first 10,000 images train and the next 2,000 validate (the last sixth of 12,000).
    run = nnfleet.search(build, x[:12000], y[:12000], trials=trials, min_epochs=1, max_epochs=9,
                         reduction_factor=3, metric="val_accuracy", seed=5, scale=1 / 255,
                         validation_split=1 / 6, test_data=test,
                         loss="sparse_categorical_crossentropy", metrics=["accuracy"],
                         out=sys.argv[2] if len(sys.argv) > 2 else None)
    best = run.best
    print(f"best: {best.name} val_accuracy={best.metrics['val_accuracy']:.4f} "
          f"test_accuracy={best.metrics['test_accuracy']:.4f} {best.parameters}")
    print(f"{sum(t['status'] == 'pruned' for t in run.trials)} of {trials} trials pruned")
