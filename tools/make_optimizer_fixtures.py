#!/usr/bin/python3
"""Writes the golden optimizer trajectories tests/optim/optimizer_test.cpp compares against.

Run from anywhere:  /usr/bin/python3 tools/make_optimizer_fixtures.py
Needs python3-numpy and python3-torch (the tests themselves need neither).

Output, in tests/optim/fixtures/ (a few hundred bytes each, np.save format 1.0):
  grads.npy        float32 [3, N]: the gradient of each of the three steps
  <case>.npy       float64 [4, N]: row 0 the starting parameters, row t the parameters after
                   step t (t = 1..3), for each case in CASES below

The expected values follow Keras 3's update rules (keras/src/optimizers/*.py), computed in float64
from the float32 inputs, with Keras's epsilon 1e-7. PyTorch places epsilon differently (Adam adds
it to the bias-corrected sqrt(v_hat); RMSprop and Adagrad add it outside the sqrt) but is
otherwise the same rule, so the script re-runs every case with epsilon 0 in both and asserts torch
agrees with the Keras-rule code to 1e-9: that checks the hand-written rules, decoupled weight
decay, momentum, nesterov, amsgrad and centering against an independent implementation.
"""
import os

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "optim", "fixtures")

P0 = np.array([0.5, -1.2, 2.0, 0.03, -0.7], dtype=np.float32)
GRADS = np.array(
    [
        [0.3, -0.8, 1.5, 0.02, -0.25],
        [-0.1, -0.6, 1.1, 0.05, 0.4],
        [0.2, 0.7, -0.9, -0.03, 0.001],
    ],
    dtype=np.float32,
)

# name -> (Keras-style options, torch constructor or None)
CASES = {
    "sgd": dict(kind="sgd", lr=0.1),
    "sgd_momentum": dict(kind="sgd", lr=0.1, momentum=0.9),
    "sgd_nesterov": dict(kind="sgd", lr=0.1, momentum=0.9, nesterov=True),
    "adam": dict(kind="adam", lr=0.1),
    # beta_2 0.9 and the small last gradient of element 4 make v shrink, so v_hat matters.
    "adam_amsgrad": dict(kind="adam", lr=0.1, beta_2=0.9, amsgrad=True),
    "adamw": dict(kind="adam", lr=0.1, weight_decay=0.004),
    "rmsprop": dict(kind="rmsprop", lr=0.05),
    "rmsprop_centered_momentum": dict(kind="rmsprop", lr=0.05, momentum=0.5, centered=True),
    "adagrad": dict(kind="adagrad", lr=0.5),
}


def keras_trajectory(o, eps=1e-7):
    """Keras 3's update rules in float64: weight decay first, then update_step."""
    p = P0.astype(np.float64)
    lr = o["lr"]
    n = p.size
    m = np.zeros(n)
    v = np.zeros(n)
    vhat = np.zeros(n)
    ag = np.zeros(n)
    acc = np.full(n, 0.1)
    out = [p.copy()]
    for it, g32 in enumerate(GRADS):
        g = g32.astype(np.float64)
        wd = o.get("weight_decay", 0.0)
        p = p - p * wd * lr
        if o["kind"] == "sgd":
            mu = o.get("momentum", 0.0)
            if mu:
                m = mu * m - lr * g
                p = p + (mu * m - lr * g if o.get("nesterov") else m)
            else:
                p = p - lr * g
        elif o["kind"] == "adam":
            b1, b2 = 0.9, o.get("beta_2", 0.999)
            t = it + 1
            alpha = lr * np.sqrt(1 - b2**t) / (1 - b1**t)
            m = m + (g - m) * (1 - b1)
            v = v + (g * g - v) * (1 - b2)
            vv = v
            if o.get("amsgrad"):
                vhat = np.maximum(vhat, v)
                vv = vhat
            p = p - m * alpha / (np.sqrt(vv) + eps)
        elif o["kind"] == "rmsprop":
            rho, mu = 0.9, o.get("momentum", 0.0)
            v = rho * v + (1 - rho) * g * g
            if o.get("centered"):
                ag = rho * ag + (1 - rho) * g
                denom = v - ag * ag + eps
            else:
                denom = v + eps
            inc = lr * g / np.sqrt(denom)
            if mu > 0:
                m = mu * m + inc
                p = p - m
            else:
                p = p - inc
        elif o["kind"] == "adagrad":
            acc = acc + g * g
            p = p - lr * g / np.sqrt(acc + eps)
        out.append(p.copy())
    return np.stack(out)


def torch_trajectory(o, eps):
    p = torch.tensor(P0.astype(np.float64), requires_grad=True)
    lr = o["lr"]
    if o["kind"] == "sgd":
        opt = torch.optim.SGD([p], lr=lr, momentum=o.get("momentum", 0.0),
                              nesterov=o.get("nesterov", False))
    elif o["kind"] == "adam":
        if "weight_decay" in o:
            opt = torch.optim.AdamW([p], lr=lr, eps=eps, weight_decay=o["weight_decay"])
        else:
            opt = torch.optim.Adam([p], lr=lr, eps=eps, betas=(0.9, o.get("beta_2", 0.999)),
                                   amsgrad=o.get("amsgrad", False))
    elif o["kind"] == "rmsprop":
        opt = torch.optim.RMSprop([p], lr=lr, alpha=0.9, eps=eps,
                                  momentum=o.get("momentum", 0.0),
                                  centered=o.get("centered", False))
    else:
        opt = torch.optim.Adagrad([p], lr=lr, initial_accumulator_value=0.1, eps=eps)
    out = [p.detach().numpy().copy()]
    for g in GRADS:
        p.grad = torch.tensor(g.astype(np.float64))
        opt.step()
        out.append(p.detach().numpy().copy())
    return np.stack(out)


def main():
    os.makedirs(OUT, exist_ok=True)
    np.save(os.path.join(OUT, "grads.npy"), GRADS)
    for name, o in CASES.items():
        k0 = keras_trajectory(o, eps=0.0)
        t0 = torch_trajectory(o, eps=0.0)
        rel = np.max(np.abs(k0 - t0) / np.maximum(np.abs(k0), 1e-3))
        assert rel < 1e-9, f"{name}: torch and the Keras rule differ by {rel:.3g} at eps 0"
        k = keras_trajectory(o)
        if o.get("amsgrad"):
            plain = keras_trajectory(dict(o, amsgrad=False))
            assert np.max(np.abs(plain - k)) > 1e-3, f"{name}: amsgrad changes nothing"
        np.save(os.path.join(OUT, name + ".npy"), k)
        print(f"{name:28s} torch vs Keras rule at eps 0: max rel diff {rel:.2e}")


if __name__ == "__main__":
    main()
