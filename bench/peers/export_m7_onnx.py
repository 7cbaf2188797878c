#!/usr/bin/python3
"""Exports the peer's m7 (a torch_peer.py --save state_dict) to ONNX for the ONNX Runtime peer
of W2 (bench/peers/ort_predict.js).

  export_m7_onnx.py --state m7.pt --out m7.onnx

The graph takes x float32 [N, 1, 28, 28] (NCHW, scaled to [0, 1]) and gives the class
probabilities p float32 [N, 10] (the softmax included, as Keras's model.predict), with a dynamic
batch axis; opset 13. Written under a temporary name and renamed.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_peer  # noqa: E402
import workloads  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--state", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    torch_peer.setup(None)
    import torch
    model = torch_peer.build_model(workloads.w1_spec("m7"))
    model.load_state_dict(torch.load(a.state))
    model.eval()
    full = torch.nn.Sequential(model, torch.nn.Softmax(dim=1))
    tmp = f"{a.out}.tmp.{os.getpid()}"
    torch.onnx.export(full, torch.zeros(1, 1, 28, 28), tmp, input_names=["x"],
                      output_names=["p"], dynamic_axes={"x": {0: "n"}, "p": {0: "n"}},
                      opset_version=13)
    os.replace(tmp, a.out)
    print(f"export_m7_onnx: wrote {a.out}")


if __name__ == "__main__":
    main()
