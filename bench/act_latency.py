#!/usr/bin/env python3
"""The latency of a decision as bars arrive: `dqntrader act --follow --data -` against the same
decision through onnxruntime (bench/peers/onnx_follow.js on the model `dqntrader export`
writes), and against the floor of the measurement itself (`cat`, which answers a row with the
row: the round trip through the pipes and this process).

For each command: the CSV header and the warm-up's rows are written, then N rows one at a
time; the time from writing a complete row to reading its JSON line is recorded. Prints one
Markdown table: p50, p99 and mean in microseconds, and each command's p50 less the floor's.

  bench/act_latency.py --build build/openmp --policy RUN_DIR/best.dqnpolicy --bars 10000

Needs onnxruntime-node (scripts/bootstrap.sh --onnx) and python3-onnx; a build with
DQNTRADER_ENABLE_ONNX. Speed is reported here, never asserted.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def measure(command, rows, header, warmup, env=None):
    """Round trips of rows[warmup + 1:] through command's stdin and stdout, in microseconds."""
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               bufsize=0, env=env)
    out = process.stdout
    # The header and the warm-up's bars: the first decision answers the last of them (cat the
    # header and every row).
    process.stdin.write((header + "\n").encode())
    for row in rows[:warmup + 1]:
        process.stdin.write((row + "\n").encode())
    for _ in range(warmup + 2 if command[0] == "cat" else 1):
        out.readline()
    times = []
    for row in rows[warmup + 1:]:
        data = (row + "\n").encode()
        start = time.perf_counter_ns()
        process.stdin.write(data)
        line = out.readline()
        times.append((time.perf_counter_ns() - start) / 1000.0)
        if not line:
            raise RuntimeError("%s ended early" % command[0])
    process.stdin.close()
    process.wait()
    return times


def summary(times):
    ordered = sorted(times)
    return {"p50": ordered[len(ordered) // 2], "p99": ordered[int(len(ordered) * 0.99)],
            "mean": statistics.fmean(ordered)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build", "openmp"))
    parser.add_argument("--policy", required=True, help="a .dqnpolicy (or a run's directory)")
    parser.add_argument("--bars", type=int, default=10000, help="rows timed")
    parser.add_argument("--node-path", default=os.path.expanduser("~/.cache/dqntrader/node/node_modules"))
    parser.add_argument("--python", default="/usr/bin/python3", help="a python3 with onnx")
    args = parser.parse_args()
    dqntrader = os.path.join(args.build, "dqntrader")
    with tempfile.TemporaryDirectory(prefix="dqntrader-act-latency-") as work:
        bars = os.path.join(work, "bars.csv")
        model = os.path.join(work, "model.onnx")
        meta = os.path.join(work, "meta.json")
        subprocess.run([dqntrader, "synth", "--bars", str(args.bars + 200), "--seed", "3",
                        "--out", bars], check=True, stderr=subprocess.DEVNULL)
        subprocess.run([dqntrader, "export", "--onnx", model, "--weights", args.policy],
                       check=True, stderr=subprocess.DEVNULL)
        with open(meta, "w") as f:
            subprocess.run([args.python, os.path.join(ROOT, "tests", "onnx", "check_model.py"),
                            model], check=True, stdout=f)
        warmup = json.load(open(meta))["warmup"]
        lines = open(bars).read().splitlines()
        header, rows = lines[0], lines[1:]
        env = dict(os.environ, NODE_PATH=args.node_path, OMP_PROC_BIND="false")
        commands = [
            ("floor: cat", ["cat"]),
            ("dqntrader act --follow (1 thread)",
             [dqntrader, "--threads", "1", "act", "--weights", args.policy, "--data", "-",
              "--follow"]),
            ("onnxruntime-node (1 thread)",
             ["node", os.path.join(HERE, "peers", "onnx_follow.js"), model, meta]),
        ]
        results = [(name, summary(measure(cmd, rows, header, warmup, env))) for name, cmd in commands]
    floor = results[0][1]["p50"]
    print("| command | p50 us | p99 us | mean us | p50 - floor us |")
    print("|---|---|---|---|---|")
    for name, s in results:
        print("| %s | %.1f | %.1f | %.1f | %.1f |" % (name, s["p50"], s["p99"], s["mean"],
                                                    s["p50"] - floor))
    return 0


if __name__ == "__main__":
    sys.exit(main())
