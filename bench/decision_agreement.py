#!/usr/bin/env python3
"""Whether what a run reports is what its exported policy does: a run trained by `dqntrader
train` (on the GPU, its learning step in bf16), then on its test window the positions of

- the run's own evaluation: `backtest --returns` of its best policy on the window, whose
  metrics are checked equal to the run's reported test metrics (final_metrics.json), so that
  its positions are the ones the run reported on;
- `dqntrader act` over the window;
- the exported ONNX model in onnxruntime, float64 and float32 forms, and in OpenCV's DNN (the
  float32 form), where those Python packages are installed (tests/onnx/run_model.py);
- tests/oracles/policy_reference.py, the reader written from docs/POLICY.md alone;

compared bar by bar, each carrying its own position from flat. And, as the figure before
every evaluation took float32 products, the positions of `backtest --precision bf16`.

Usage: decision_agreement.py --dqntrader PATH --work DIR [--bars 10000] [--epochs 4]
Prints one JSON object: the window, each path's count of positions that differ from the
run's, and whether the run's reported metrics were reproduced.
"""

import argparse
import csv
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def run(*args, **kw):
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True, **kw)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, args))}: exit {result.returncode}\n{result.stderr}")
    return result.stdout


def backtest_positions(dqn, policy, bars, first, last, work, precision):
    """The positions of the run's evaluation path over bars first .. last - 1 and its metrics."""
    returns, metrics = os.path.join(work, f"r-{precision}.csv"), os.path.join(work, f"m-{precision}.json")
    run(dqn, "backtest", "--weights", policy, "--data", bars, "--start", first, "--end", last,
        "--precision", precision, "--returns", returns, "--json", metrics)
    with open(returns, newline="") as f:
        rows = list(csv.DictReader(f))
    column = [c for c in rows[0] if c.endswith(":position")][0]
    return [float(r[column]) for r in rows], json.load(open(metrics))[0]["metrics"]


def carried(table, positions, first, last):
    """Positions from a runtime's rows (every bar with every incoming position), carried from
    flat: the decision at each bar comes in with the one before."""
    held = positions.index(0.0)
    index = {(r["bar"], r["incoming"]): r["action"] for r in table}
    out = []
    for t in range(first, last):
        held = index[(t, held)]
        out.append(positions[held])
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dqntrader", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--bars", type=int, default=10000)
    parser.add_argument("--epochs", type=int, default=4)
    a = parser.parse_args()
    dqn, work = a.dqntrader, a.work
    os.makedirs(work, exist_ok=True)
    bars = os.path.join(work, "bars.csv")
    run(dqn, "synth", "--bars", a.bars, "--seed", 7, "--out", bars)
    run(dqn, "train", "--data", bars, "--epochs", a.epochs, "--out", os.path.join(work, "run"),
        "--force")
    final = json.load(open(os.path.join(work, "run", "final_metrics.json")))
    window = final["test"]["window"]
    first, last = window["first_bar"], window["last_bar"]
    policy = os.path.join(work, "run", "best.dqnpolicy")
    reported = final["test"]["best"]

    ours, metrics = backtest_positions(dqn, policy, bars, first, last, work, "fp32")
    keys = [k for k in reported if k in metrics]
    summary = {"bars": last - first, "first_bar": first, "last_bar": last - 1,
               "reported_metrics_reproduced": all(
                   (reported[k] == metrics[k]) or (reported[k] is None and metrics[k] is None)
                   for k in keys),
               "differences_from_the_run": {}}
    differs = summary["differences_from_the_run"]

    decisions = [json.loads(l) for l in run(dqn, "act", "--weights", policy, "--data", bars,
                                           "--start", first, "--end", last - 1,
                                           "--json").splitlines()]
    differs["act"] = int(sum(d["position"] != p for d, p in zip(decisions, ours)))

    reference = [json.loads(l) for l in run(
        sys.executable, os.path.join(ROOT, "tests", "oracles", "policy_reference.py"), policy,
        bars, "--from", first, "--to", last - 1, "--position", 0).splitlines()]
    differs["reference reader"] = int(sum(d["position"] != p for d, p in zip(reference, ours)))

    for form in ("float64", "float32"):
        model = os.path.join(work, f"model-{form}.onnx")
        run(dqn, "export", "--onnx", model, "--weights", policy, "--inputs", form)
        meta = os.path.join(work, f"meta-{form}.json")
        with open(meta, "w") as f:
            f.write(run(sys.executable, os.path.join(ROOT, "tests", "onnx", "check_model.py"),
                        model))
        positions = json.load(open(meta))["positions"]
        for runtime in ("onnxruntime", "opencv"):
            if runtime == "opencv" and form == "float64":
                continue
            try:
                __import__({"onnxruntime": "onnxruntime", "opencv": "cv2"}[runtime])
            except ImportError:
                differs[f"{runtime} {form}"] = "not installed"
                continue
            table = [json.loads(l) for l in run(
                sys.executable, os.path.join(ROOT, "tests", "onnx", "run_model.py"), runtime,
                model, meta, bars, first, last - 1).splitlines()]
            got = carried(table, positions, first, last)
            differs[f"{runtime} {form}"] = int(sum(g != p for g, p in zip(got, ours)))

    before, _ = backtest_positions(dqn, policy, bars, first, last, work, "bf16")
    summary["bf16_products_differ_at"] = int(sum(b != p for b, p in zip(before, ours)))
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
