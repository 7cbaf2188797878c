#!/usr/bin/env python3
"""The independent ONNX reader of the export tests: onnx.checker (Debian python3-onnx) with full
shape inference on every file named, and the graph's declared opset. Prints one line per file and
exits 1 when any file is refused.

    python3 onnx_check.py A.onnx [B.onnx ...]
"""
import sys

import onnx


def main(paths):
    bad = 0
    for p in paths:
        try:
            m = onnx.load(p)
            onnx.checker.check_model(m, full_check=True)
            ops = sorted({n.op_type for n in m.graph.node})
            opset = max(o.version for o in m.opset_import if o.domain in ("", "ai.onnx"))
            print(f"ok {p}: opset {opset}, {len(m.graph.node)} nodes ({', '.join(ops)})")
        except Exception as e:  # every refusal is reported, then the exit code says it
            bad += 1
            print(f"REFUSED {p}: {type(e).__name__}: {e}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
