#!/usr/bin/python3
"""Reference values of nnfleet's epoch-level metrics (tests/loss/metrics_test.cpp), computed with
Keras 3's formulas written out in numpy (float32 thresholds, as keras/src/metrics/
confusion_metrics.py and regression_metrics.py define them): precision and recall at 0.5, ROC AUC
with 200 thresholds and trapezoidal interpolation, root mean squared error, r2_score. Prints the
values with 17 significant digits; rerun it after changing the data in both places."""
import numpy as np

# Two outputs per sample, binary targets (the classification data of the test).
Y = np.array([[1, 0], [0, 0], [1, 1], [0, 1], [1, 0], [0, 0],
              [1, 1], [0, 1], [0, 0], [1, 0], [1, 1], [0, 0]], dtype=np.float32)
P = np.array([[0.91, 0.12], [0.33, 0.61], [0.72, 0.87], [0.44, 0.38], [0.58, 0.07], [0.21, 0.49],
              [0.66, 0.93], [0.52, 0.77], [0.09, 0.29], [0.47, 0.55], [0.81, 0.64], [0.62, 0.18]],
             dtype=np.float32)
W = np.array([1.0, 2.0, 0.5, 1.5, 0.0, 3.0, 1.0, 0.25, 2.0, 1.0, 0.75, 1.25], dtype=np.float32)
# Regression data of the test.
YR = np.array([[1.5, -2.0], [0.25, 3.0], [2.0, 1.0], [-1.0, 0.5], [0.75, -0.25]], dtype=np.float32)
PR = np.array([[1.25, -1.5], [0.5, 2.5], [1.75, 1.5], [-0.5, 0.0], [1.0, -0.75]], dtype=np.float32)
WR = np.array([2.0, 1.0, 0.5, 1.0, 3.0], dtype=np.float32)


def confusion(y, p, w, thresholds):
    """tp, fp, tn, fn per threshold: y != 0 is positive, p > threshold predicted positive."""
    y = (y != 0).reshape(-1)
    p = p.reshape(-1)
    w = np.repeat(w, Y.shape[1]).astype(np.float64)
    out = []
    for t in thresholds:
        pos = p > np.float32(t)
        out.append(((w * (y & pos)).sum(), (w * (~y & pos)).sum(), (w * (~y & ~pos)).sum(),
                    (w * (y & ~pos)).sum()))
    return np.array(out)


def div(a, b):
    return np.where(b == 0, 0.0, a / np.where(b == 0, 1, b))


def precision_recall(w):
    tp, fp, tn, fn = confusion(Y, P, w, [0.5])[0]
    return div(tp, tp + fp), div(tp, tp + fn)


def auc(w, n=200):
    eps = 1e-7
    thresholds = [0.0 - eps] + [(i + 1) * 1.0 / (n - 1) for i in range(n - 2)] + [1.0 + eps]
    c = confusion(Y, P, w, thresholds)
    tp, fp, tn, fn = c[:, 0], c[:, 1], c[:, 2], c[:, 3]
    recall = div(tp, tp + fn)
    fpr = div(fp, fp + tn)
    return np.sum((fpr[:-1] - fpr[1:]) * (recall[:-1] + recall[1:]) / 2.0)


def rmse(w):
    se = ((YR.astype(np.float64) - PR) ** 2).mean(axis=1)
    return np.sqrt((w * se).sum() / w.sum())


def r2(w):
    w2 = np.broadcast_to(w.astype(np.float64)[:, None], YR.shape)
    y = YR.astype(np.float64)
    s, s2 = (w2 * y).sum(0), (w2 * y * y).sum(0)
    res, c = (w2 * (y - PR) ** 2).sum(0), w2.sum(0)
    total = s2 - s * (s / c)
    raw = 1 - res / total
    return np.where(np.isinf(raw), 0.0, raw).mean()


ones = np.ones_like(W)
for name, value in [("precision", precision_recall(ones)[0]), ("recall", precision_recall(ones)[1]),
                    ("auc", auc(ones)), ("weighted precision", precision_recall(W)[0]),
                    ("weighted recall", precision_recall(W)[1]), ("weighted auc", auc(W)),
                    ("rmse", rmse(np.ones_like(WR))), ("r2", r2(np.ones_like(WR))),
                    ("weighted rmse", rmse(WR)), ("weighted r2", r2(WR))]:
    print(f"{name}: {float(value):.17g}")
