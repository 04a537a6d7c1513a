#!/usr/bin/env python3
"""The study behind `dqntrader train`'s defaults (docs/BENCHMARKS.md, "Defaults that learn").

Runs `dqntrader train` on the built-in market for each candidate and seed, and reports what a
new user sees: the last epoch's validation Sharpe against sign-of-ofi's on the same window
(the rule that knows the market's planted signal; from the run's baselines.json), the epoch
of the best validation Sharpe, the selected (best) epoch's Sharpe on the unseen test window
against sign-of-ofi's there (final_metrics.json), and the run's wall-clock time.

    bench/defaults_study.py --build build/openmp --seeds 1-8 \\
        --candidate "defaults=" --candidate "big=--synth-bars 200000 --epochs 12"

A candidate is NAME=FLAGS (flags given to train on top of its defaults). Prints one markdown
table row per candidate and a per-seed table; --json FILE keeps every run's figures.
"""

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time


def seed_list(text):
    seeds = []
    for part in text.split(","):
        if "-" in part:
            lo, hi = part.split("-")
            seeds.extend(range(int(lo), int(hi) + 1))
        else:
            seeds.append(int(part))
    return seeds


def run(dqntrader, flags, seed, work):
    out = os.path.join(work, "seed-%d" % seed)
    command = [dqntrader, "train", "--seed", str(seed), "--out", out] + flags
    start = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = time.monotonic() - start
    if done.returncode != 0:
        sys.exit("defaults_study: %s failed:\n%s" % (" ".join(command), done.stderr))
    with open(os.path.join(out, "metrics.jsonl")) as f:
        sharpes = [json.loads(line)["validation_sharpe"] for line in f if line.strip()]
    with open(os.path.join(out, "baselines.json")) as f:
        rule = json.load(f)["sign-of-ofi"]["validation_sharpe"]
    best = max(range(len(sharpes)), key=lambda e: sharpes[e])
    with open(os.path.join(out, "final_metrics.json")) as f:
        test = json.load(f).get("test")
    nan = float("nan")
    test_best = test["best"]["sharpe"] if test else nan
    test_rule = test["baselines"]["sign-of-ofi"]["sharpe"] if test else nan
    return {
        "seed": seed,
        "epochs": len(sharpes),
        "sharpes": sharpes,
        "last": sharpes[-1],
        "best": sharpes[best],
        "best_epoch": best + 1,
        "rule": rule,
        "last_vs_rule": sharpes[-1] / rule,
        "best_in_second_half": best + 1 > len(sharpes) / 2,
        "test_best": test_best,
        "test_rule": test_rule,
        "test_vs_rule": test_best / test_rule,
        "seconds": seconds,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build/openmp", help="build directory with dqntrader")
    parser.add_argument("--seeds", default="1-8", help="seeds, e.g. 1-8 or 1,3,5")
    parser.add_argument("--candidate", action="append", required=True, help="NAME=FLAGS")
    parser.add_argument("--json", help="write every run's figures here")
    args = parser.parse_args()
    dqntrader = os.path.join(args.build, "dqntrader")
    seeds = seed_list(args.seeds)
    results = {}
    print("| candidate | flags | last / sign-of-ofi: mean (min) | seeds >= 0.95 | best epoch in "
          "second half | test window: best epoch / sign-of-ofi, mean (min) | seconds a run |")
    print("|---|---|---|---|---|---|---|")
    for candidate in args.candidate:
        name, _, flags = candidate.partition("=")
        with tempfile.TemporaryDirectory(prefix="dqntrader-study-") as work:
            runs = [run(dqntrader, shlex.split(flags), seed, work) for seed in seeds]
        results[name] = {"flags": flags, "runs": runs}
        ratios = [r["last_vs_rule"] for r in runs]
        tests = [r["test_vs_rule"] for r in runs]
        print("| %s | `%s` | %.3f (%.3f) | %d/%d | %d/%d | %.3f (%.3f) | %.1f |" % (
            name, flags or "(defaults)", statistics.mean(ratios), min(ratios),
            sum(x >= 0.95 for x in ratios), len(runs),
            sum(r["best_in_second_half"] for r in runs), len(runs),
            statistics.mean(tests), min(tests),
            statistics.mean(r["seconds"] for r in runs)), flush=True)
    print()
    print("| candidate | seed | validation Sharpe per epoch | sign-of-ofi | last / rule | best epoch "
          "| test: best epoch, sign-of-ofi |")
    print("|---|---|---|---|---|---|---|")
    for name, result in results.items():
        for r in result["runs"]:
            print("| %s | %d | %s | %.3f | %.3f | %d of %d | %.3f, %.3f |" % (
                name, r["seed"], " ".join("%.2f" % s for s in r["sharpes"]), r["rule"],
                r["last_vs_rule"], r["best_epoch"], r["epochs"], r["test_best"], r["test_rule"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
