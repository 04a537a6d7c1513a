#!/usr/bin/env python3
"""Schedules at equal budget (docs/BENCHMARKS.md, "Schedules").

Runs three sweeps of `dqntrader sweep` on one data file and the same space (4 learning rates
x 4 gammas): the grid with 2 seeds (32 members, --schedule none), population based training
on the same 32 members (--schedule pbt), and successive halving from 4 seeds (64 members,
--schedule halving --halving-interval 2, which over 8 epochs trains 64, 64, 32, 32, 16, 16, 8,
8 members: 240 member-epochs against the others' 256). For each: the winner's validation and
test Sharpe (leaderboard.json's first member), the median member's, the member-epochs trained
and the wall time; for PBT the seconds a decision takes against an epoch's (timings.jsonl); for
halving the agent-steps per second of each epoch as members stop.

    bench/schedule_study.py --dqntrader build/cuda/dqntrader --data bars.dqnbars \\
        --work /tmp/schedules --epochs 8

Prints one JSON line per sweep and a markdown table.
"""

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time

SPACE = ["--set", "learning-rate=1e-4,3e-4,1e-3,3e-3", "--set", "gamma=0.8,0.9,0.95,0.99"]


def number(v):
    return float("nan") if v is None else float(v)


def median(values):
    finite = [v for v in values if v == v]
    return statistics.median(finite) if finite else float("nan")


def sweep(args, name, seeds, extra):
    out = os.path.join(args.work, name)
    command = [args.dqntrader, "sweep", "--data", args.data, "--out", out, "--seeds", seeds,
               "--epochs", str(args.epochs)] + SPACE + extra + shlex.split(args.flags)
    start = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True)
    wall = time.monotonic() - start
    if done.returncode != 0:
        sys.exit("schedule_study: %s failed:\n%s" % (" ".join(command), done.stderr))
    with open(os.path.join(out, "leaderboard.json")) as f:
        board = json.load(f)
    with open(os.path.join(out, "sweep.json")) as f:
        plan = json.load(f)
    steps = int(plan["base"]["steps-per-epoch"])
    members = board["members"]
    member_epochs = sum(m["result"]["epochs"] for m in plan["members"])
    row = {
        "sweep": name,
        "members": len(members),
        "member_epochs": member_epochs,
        "agent_steps": member_epochs * int(steps),
        "winner_validation_sharpe": number(members[0]["validation_sharpe"]),
        "winner_test_sharpe": number(members[0]["test_sharpe"]),
        "median_validation_sharpe": median([number(m["validation_sharpe"]) for m in members]),
        "median_test_sharpe": median([number(m["test_sharpe"]) for m in members]),
        "wall_seconds": wall,
        "command": " ".join(command),
    }
    timings = []
    with open(os.path.join(out, plan["members"][0]["run"], "timings.jsonl")) as f:
        timings = [json.loads(line) for line in f if line.strip()]
    decisions = [t for t in timings if "schedule_seconds" in t]
    if name == "pbt" and decisions:
        epoch = statistics.mean(t["train_seconds"] + t["validation_seconds"] for t in timings)
        decision = statistics.mean(t["schedule_seconds"] for t in decisions)
        row["decision_seconds"] = decision
        row["epoch_seconds"] = epoch
        row["decision_share_of_epoch"] = decision / epoch
    if name == "halving":
        # Each epoch's training seconds (the population's, recorded by every member that ran
        # it) against the members that ran it.
        per_epoch = {}
        for m in plan["members"]:
            with open(os.path.join(out, m["run"], "timings.jsonl")) as f:
                for line in f:
                    if line.strip():
                        t = json.loads(line)
                        entry = per_epoch.setdefault(t["epoch"], [0, t["train_seconds"]])
                        entry[0] += 1
        row["agent_steps_per_second_by_epoch"] = [
            {"epoch": e, "members": n, "rate": n * int(steps) / seconds}
            for e, (n, seconds) in sorted(per_epoch.items())]
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dqntrader", required=True)
    parser.add_argument("--data", required=True, help="a bar file (dqntrader synth writes one)")
    parser.add_argument("--work", required=True, help="directory for the sweeps")
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--flags", default="", help="more flags for every sweep")
    args = parser.parse_args()
    os.makedirs(args.work, exist_ok=True)
    rows = [
        sweep(args, "grid", "1-2", []),
        sweep(args, "pbt", "1-2", ["--schedule", "pbt"]),
        sweep(args, "halving", "1-4", ["--schedule", "halving", "--halving-interval", "2"]),
    ]
    for row in rows:
        print(json.dumps(row))
    print()
    print("| sweep | members | member-epochs | winner val / test | median val / test | wall s |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print("| %s | %d | %d | %.3f / %.3f | %.3f / %.3f | %.1f |" % (
            r["sweep"], r["members"], r["member_epochs"], r["winner_validation_sharpe"],
            r["winner_test_sharpe"], r["median_validation_sharpe"], r["median_test_sharpe"],
            r["wall_seconds"]))
    for r in rows:
        if "decision_seconds" in r:
            print("\nPBT decision: %.6f s against an epoch of %.3f s (%.3f%%)" % (
                r["decision_seconds"], r["epoch_seconds"], 100 * r["decision_share_of_epoch"]))
        if "agent_steps_per_second_by_epoch" in r:
            print("\nhalving, agent-steps/s by epoch: " + ", ".join(
                "%d: %d members %.0f" % (e["epoch"], e["members"], e["rate"])
                for e in r["agent_steps_per_second_by_epoch"]))


if __name__ == "__main__":
    main()
