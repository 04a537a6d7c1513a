#!/usr/bin/env python3
"""dqntrader against its PyTorch peers, side by side in one invocation.

Runs, --runs times each, the training-epoch and evaluation benchmarks of a build
(bench/bench_train.cpp, bench/bench_eval.cpp) and the peers of bench/peers/ on the same
machine, then prints one Markdown table of medians with the spread (min-max) over the runs
and the ratio peer / dqntrader (above 1: dqntrader is faster).

  GPU (the reference workloads EPOCH and EVAL-1M):  bench/compare.py --build build/cuda
  Host (EPOCH-CPU and EVAL-CPU, 2 threads):         bench/compare.py --build build/openmp --cpu

The peer's epoch is derived: steps x its step time + its evaluation time.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

WORKLOADS = {
    "gpu": {
        "train": "train/EPOCH/graphed", "eval": "eval/EVAL-1M/K1/graphed", "steps": 2000,
        "train_peer": ["--steps", "500"], "train_peer_eager": ["--steps", "100"],
        "eval_peer": ["--bars", "1000000", "--hidden", "512,512,512", "--repeats", "10"],
    },
    "cpu": {
        "train": "train/EPOCH-CPU/eager", "eval": "eval/EVAL-CPU/K1", "steps": 200,
        "train_peer": None,
        "train_peer_eager": ["--device", "cpu", "--hidden", "256,256", "--batch", "256",
                             "--envs", "256", "--steps", "50", "--capacity", "100000",
                             "--bars", "50000", "--threads", "2"],
        "eval_peer": ["--device", "cpu", "--bars", "100000", "--hidden", "256,256",
                      "--repeats", "3", "--threads", "2"],
    },
}


def run_json(command):
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return out


def benchmark(binary, pattern):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        run_json([binary, "--benchmark_filter=" + pattern, "--benchmark_out=" + out.name,
                  "--benchmark_out_format=json"])
        results = json.load(open(out.name))["benchmarks"]
    def base(name):  # without the options google-benchmark appends (/iterations:3, ...)
        return "/".join(p for p in name.split("/") if ":" not in p and not p.endswith("_time"))
    found = [b for b in results
             if b.get("run_type", "iteration") == "iteration" and base(b["name"]) == pattern]
    if not found:
        sys.exit(f"compare.py: {binary} ran no benchmark matching {pattern}")
    return found[0]


def peer(script, args):
    lines = run_json([sys.executable, os.path.join(HERE, "peers", script)] + args).splitlines()
    return json.loads(lines[-1])


def to_ms(b):
    scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b["time_unit"]]
    return b["real_time"] * scale


def cell(values, digits):
    if not values:
        return "n/a"
    med = statistics.median(values)
    if len(values) == 1:
        return f"{med:,.{digits}f}"
    return f"{med:,.{digits}f} ({min(values):,.{digits}f}-{max(values):,.{digits}f})"


def ratio(peer_values, ours, higher_is_better=False):
    if not peer_values or not ours:
        return ""
    p, o = statistics.median(peer_values), statistics.median(ours)
    return f"{(o / p if higher_is_better else p / o):.2f}x"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", required=True, help="build directory holding bench/")
    ap.add_argument("--cpu", action="store_true", help="host workloads (EPOCH-CPU, EVAL-CPU)")
    ap.add_argument("--runs", type=int, default=3, help="invocations of each program")
    args = ap.parse_args()
    w = WORKLOADS["cpu" if args.cpu else "gpu"]
    bench_train = os.path.join(args.build, "bench", "dqntrader_bench_train")
    bench_eval = os.path.join(args.build, "bench", "dqntrader_bench_eval")

    ours = {"step": [], "kernels": [], "epoch": [], "eval": []}
    peers = {"eager": [], "graphs": [], "eval": []}
    for run in range(args.runs):
        print(f"run {run + 1}/{args.runs}", file=sys.stderr, flush=True)
        t = benchmark(bench_train, w["train"])
        ours["step"].append(t["step_us"])
        ours["kernels"].append(t["kernels/step"])
        ours["epoch"].append(to_ms(t))
        ours["eval"].append(to_ms(benchmark(bench_eval, w["eval"])))
        peers["eager"].append(peer("train_peer.py", w["train_peer_eager"])["step_us_median"])
        if w["train_peer"] is not None:
            peers["graphs"].append(
                peer("train_peer.py", w["train_peer"] + ["--graphs"])["step_us_median"])
        peers["eval"].append(1e3 * peer("eval_peer.py", w["eval_peer"])["median_s"])

    steps_per_s = [1e6 / s for s in ours["step"]]
    rows = [
        ("step time (us)", cell(ours["step"], 0), "PyTorch eager", cell(peers["eager"], 0),
         ratio(peers["eager"], ours["step"])),
    ]
    if peers["graphs"]:
        rows.append(("step time (us)", cell(ours["step"], 0), "PyTorch CUDA graphs",
                     cell(peers["graphs"], 0), ratio(peers["graphs"], ours["step"])))
    best_peer = peers["graphs"] or peers["eager"]
    rows += [
        ("steps/s", cell(steps_per_s, 0), "PyTorch, best", cell([1e6 / s for s in best_peer], 0),
         ratio([1e6 / s for s in best_peer], steps_per_s, higher_is_better=True)),
        ("kernels per step (recorded cycle)", cell(ours["kernels"], 1) if any(ours["kernels"]) else
         "not recorded (OpenMP)", "", "", ""),
    ]
    peer_epoch = [w["steps"] * s / 1e3 + e for s, e in zip(best_peer, peers["eval"])]
    rows += [
        ("epoch (ms)", cell(ours["epoch"], 0), "PyTorch, best (derived)", cell(peer_epoch, 0),
         ratio(peer_epoch, ours["epoch"])),
        ("evaluation (ms)", cell(ours["eval"], 2), "PyTorch eager", cell(peers["eval"], 2),
         ratio(peers["eval"], ours["eval"])),
    ]
    print(f"| {w['train']} / {w['eval']}, {args.runs} runs: median (min-max) "
          "| dqntrader | peer | peer's figure | peer / dqntrader |")
    print("|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()
