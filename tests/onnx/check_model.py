#!/usr/bin/env python3
"""Checks an exported model with ONNX's own checker and prints what a runner needs of it.

Usage: check_model.py MODEL.onnx

Loads the model with the onnx package (Debian's python3-onnx), runs
onnx.checker.check_model(model, full_check=True) (which also infers every shape), and prints
one JSON object: the model's opset and IR version, its inputs and outputs (name, element type,
shape) and the metadata dqntrader writes (the inputs' form (form), positions, warmup, ofi_window,
extra). Exit status 2 with a message on stderr when the checker refuses the model.
"""

import json
import sys

import onnx


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    model = onnx.load(argv[1])
    try:
        onnx.checker.check_model(model, full_check=True)
    except onnx.checker.ValidationError as error:
        print("check_model.py: %s: %s" % (argv[1], error), file=sys.stderr)
        return 2

    def values(infos):
        out = []
        for v in infos:
            t = v.type.tensor_type
            out.append({"name": v.name,
                        "type": onnx.TensorProto.DataType.Name(t.elem_type),
                        "shape": [d.dim_param or d.dim_value for d in t.shape.dim]})
        return out

    meta = {p.key: p.value for p in model.metadata_props}
    print(json.dumps({
        "ir_version": model.ir_version,
        "opset": [{"domain": o.domain, "version": o.version} for o in model.opset_import],
        "inputs": values(model.graph.input),
        "outputs": values(model.graph.output),
        "form": meta["dqntrader.inputs"],
        "positions": json.loads(meta["dqntrader.positions"]),
        "warmup": int(meta["dqntrader.warmup"]),
        "ofi_window": int(meta["dqntrader.ofi_window"]),
        "extra": json.loads(meta["dqntrader.extra"]),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
