#!/usr/bin/env bash
# The main job on built-in data: sets up a fresh Debian 12 machine, builds, trains an agent
# on the built-in synthetic market (validating it on the device every epoch, beside the
# built-in policies), then backtests the best policy and the baselines together on the
# validation window, which the agent never trained on, and writes the run's HTML report.
# Everything lands in out/demo/.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
scripts/build.sh
out=out/demo
mkdir -p "$out"
dqn=build/openmp/dqntrader
"$dqn" train --seed 1 --force --out "$out/run"  # --force: a second demo starts the run again
# The market train used (its size is in the run's config.json) and the validation window
# (in final_metrics.json).
read -r bars first last < <(python3 -c '
import json, sys
config = json.load(open(sys.argv[1] + "/config.json"))
window = json.load(open(sys.argv[1] + "/final_metrics.json"))["validation_window"]
print(config["synth-bars"], window["first_bar"], window["last_bar"])' "$out/run")
"$dqn" synth --bars "$bars" --seed 1 --out "$out/bars.dqnbars"
"$dqn" backtest --data "$out/bars.dqnbars" --weights "$out/run/best.dqnpolicy" \
  --policy buy-and-hold --policy flat --policy sign-of-ofi --start "$first" --end "$last" \
  --json "$out/backtest.json"
"$dqn" report "$out/run"  # out/demo/run/report.html
