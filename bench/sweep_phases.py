#!/usr/bin/env python3
"""Times a whole `dqntrader sweep` process and says where its time went (docs/BENCHMARKS.md,
"A sweep at the GPU's speed").

Usage: sweep_phases.py --dqntrader PATH --work DIR [--bars 200000] [--seeds 1-1024]
                       [--timeout SECONDS] [SWEEP OPTIONS ...]

Writes the market (`synth --bars N --seed 1`, as .dqnbars) into DIR, runs `sweep --data it
--out DIR/sweep --seeds ... --epochs 2` plus the options given after the known ones, and prints
one JSON object: the process's wall seconds (or that it did not end within the timeout), the
populations and their members, each population's phases from its members' timings.jsonl (the
"run" line: data, set-up, baselines, learning, validation, records, checkpoints, test window,
files) with the share of its wall that learning and validation took, the share of the
process's wall outside learning and validation (from every build's epoch lines), the sweep's end
(timings.json: the wait for the files, the selection statistics) and the bytes of a
checkpoint per member. A build from before the phases were recorded gives the wall alone.
"""

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import time


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dqntrader", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--bars", type=int, default=200000)
    parser.add_argument("--seeds", default="1-1024")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=600)
    a, extra = parser.parse_known_args()
    os.makedirs(a.work, exist_ok=True)
    bars = os.path.join(a.work, f"market-{a.bars}.dqnbars")
    if not os.path.exists(bars):
        subprocess.run([a.dqntrader, "synth", "--bars", str(a.bars), "--seed", "1", "--out", bars],
                       check=True, capture_output=True)
    out = os.path.join(a.work, "sweep")
    shutil.rmtree(out, ignore_errors=True)
    command = [a.dqntrader, "sweep", "--data", bars, "--out", out, "--seeds", a.seeds,
               "--epochs", str(a.epochs)] + extra
    start = time.monotonic()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=a.timeout)
    except subprocess.TimeoutExpired as e:
        print(json.dumps({"command": " ".join(command[1:]), "ended": False,
                          "timeout_seconds": a.timeout,
                          "last_lines": (e.stderr or b"").decode(errors="replace")
                          .splitlines()[-3:]}))
        return 0
    wall = time.monotonic() - start
    summary = {"command": " ".join(command[1:]), "ended": True, "exit": done.returncode,
               "wall_seconds": round(wall, 3)}
    if done.returncode != 0:
        summary["stderr"] = done.stderr[-2000:]
        print(json.dumps(summary))
        return 1
    plan = json.load(open(os.path.join(out, "sweep.json")))
    summary["members"] = len(plan["members"])
    summary["populations"] = len(plan["populations"])
    timings = os.path.join(out, "timings.json")
    summary["sweep_timings"] = json.load(open(timings)) if os.path.exists(timings) else None
    phases = []
    inside = 0.0  # learning and validation over every population, from their epochs' lines
    for population in plan["populations"]:
        first = plan["members"][population["members"][0]]
        lines = [json.loads(l) for l in open(os.path.join(out, first["run"], "timings.jsonl"))]
        inside += sum(l["train_seconds"] + l["validation_seconds"] for l in lines if "epoch" in l)
        run = [l["run"] for l in lines if "run" in l]
        if run:
            p = run[-1]
            own = p["learning_seconds"] + p["validation_seconds"]
            p["members"] = len(population["members"])
            p["inside_share"] = round(own / p["wall_seconds"], 4) if p["wall_seconds"] else None
            phases.append(p)
    summary["learning_and_validation_seconds"] = round(inside, 3)
    summary["outside_share_of_wall"] = round(1.0 - inside / wall, 4)
    if phases:
        summary["population_phases"] = phases
        summary["least_inside_share"] = min(p["inside_share"] for p in phases)
        summary["populations_wall_seconds"] = round(sum(p["wall_seconds"] for p in phases), 3)
    sizes = []
    for population in plan["populations"]:
        kept = sorted(glob.glob(os.path.join(out, population["checkpoints"], "*.dqnckpt")))
        if kept:
            sizes.append(os.path.getsize(kept[-1]) / len(population["members"]))
    if sizes:
        summary["checkpoint_bytes_per_member"] = round(sum(sizes) / len(sizes))
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
