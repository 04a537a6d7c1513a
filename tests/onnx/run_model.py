#!/usr/bin/env python3
"""Runs an exported dqntrader model in a runtime of another vendor, from Python: OpenCV's DNN
module (cv2.dnn; Debian's python3-opencv) or onnxruntime (its Python package, where one is
installed; tests/onnx/run_model.js runs onnxruntime's npm package), over the bars FROM .. TO
of a CSV file, every bar with every incoming position, as one batch of rows. Nothing here
reads dqntrader's code or files other than the model and the CSV.

Usage: run_model.py opencv|onnxruntime MODEL.onnx META.json BARS.csv FROM TO

META.json: what check_model.py prints of the model. OpenCV computes in float32 and takes the
float32 form only. Prints one JSON object per bar and incoming position, one per line:
{"bar", "incoming", "q", "action"} (indices of positions). Exit status 2 with a message when
the runtime cannot load or run the model.
"""

import csv
import json
import sys

import numpy as np


def main(argv):
    if len(argv) != 7 or argv[1] not in ("opencv", "onnxruntime"):
        print(__doc__, file=sys.stderr)
        return 2
    runtime, model, meta_path, csv_path, first, last = argv[1:]
    with open(meta_path, encoding="utf-8") as f:
        meta = json.load(f)
    exact = meta["form"] == "float64"
    if runtime == "opencv" and exact:
        print("run_model.py: OpenCV computes in float32; export with --inputs float32",
              file=sys.stderr)
        return 2
    with open(csv_path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    close = np.array([float(r["close"]) for r in rows])
    W, O, K = meta["warmup"], meta["ofi_window"], len(meta["positions"])
    values = np.float64 if exact else np.float32
    bars = np.repeat(np.arange(int(first), int(last) + 1), K)
    incoming = np.tile(np.arange(K), int(last) - int(first) + 1)
    window = close[bars[:, None] + np.arange(-W, 1)[None, :]]
    feeds = {"closes": window.astype(values),
             "position": np.eye(K, dtype=np.float32)[incoming]}
    if not exact:  # the rest of each double close, in float32
        feeds["closes_low"] = (window - window.astype(np.float32).astype(np.float64)).astype(
            np.float32)
    if O > 0:
        ofi = np.array([float(r["ofi"]) for r in rows])
        feeds["ofi"] = ofi[bars[:, None] + np.arange(-O + 1, 1)[None, :]].astype(values)
    if meta["extra"]:
        extra = np.array([[float(r[name]) for name in meta["extra"]] for r in rows])
        feeds["extra"] = extra[bars].astype(values)
    if runtime == "opencv":
        import cv2
        try:
            net = cv2.dnn.readNetFromONNX(model)
            for name, value in feeds.items():
                net.setInput(value, name)
            q, action = net.forward(["q", "action"])
        except cv2.error as error:
            print("run_model.py: OpenCV: %s" % error, file=sys.stderr)
            return 2
    else:
        import onnxruntime
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        session = onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        q, action = session.run(["q", "action"], feeds)
    action = np.asarray(action).reshape(-1).astype(np.int64)  # OpenCV gives float32 [N, 1]
    for i in range(len(bars)):
        print(json.dumps({"bar": int(bars[i]), "incoming": int(incoming[i]),
                          "q": [float(v) for v in q[i]], "action": int(action[i])}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
