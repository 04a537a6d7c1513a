#!/usr/bin/env python3
"""One JSON line about a finished sweep's selection (scripts/device/cuda-suite.sh selection).

The winner's validation and test Sharpe ratios, the median member's, the best built-in rule on
the test window, the selection statistics of leaderboard.json and the seconds they took
against the sweep's wall time.
"""
import argparse
import json
import os
import re
import statistics
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("sweep", help="the sweep's directory")
    ap.add_argument("--signal", required=True, help="the market's planted signal (synth --ofi-signal)")
    ap.add_argument("--begin", type=float, required=True, help="the sweep's start (seconds since the epoch)")
    ap.add_argument("--log", required=True, help="the sweep's output (its last lines)")
    args = ap.parse_args()
    wall = time.time() - args.begin
    board = json.load(open(os.path.join(args.sweep, "leaderboard.json")))
    members = [m for m in board["members"] if m["validation_sharpe"] is not None]
    s = board["selection"]
    winner = members[0]
    final = json.load(open(os.path.join(args.sweep, winner["run"], "final_metrics.json")))
    seconds = float(re.search(r"measured in ([0-9.]+) s", open(args.log).read()).group(1))
    print(json.dumps({
        "signal": float(args.signal),
        "members": len(members),
        "winner_validation_sharpe": winner["validation_sharpe"],
        "winner_test_sharpe": winner["test_sharpe"],
        "median_validation_sharpe": statistics.median(m["validation_sharpe"] for m in members),
        "median_test_sharpe": statistics.median(m["test_sharpe"] for m in members),
        "sign_of_ofi_test_sharpe": final["test"]["baselines"].get("sign-of-ofi", {}).get("sharpe"),
        "expected_max_sharpe_annualised": s.get("expected_max_sharpe_annualised"),
        "deflated_sharpe": s.get("deflated_sharpe"),
        "pbo": s.get("pbo"),
        "probability_of_loss": s.get("probability_of_loss"),
        "selection_seconds": seconds,
        "sweep_seconds": round(wall, 2),
        "selection_share": round(seconds / wall, 5),
    }))


if __name__ == "__main__":
    main()
