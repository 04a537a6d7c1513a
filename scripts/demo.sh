#!/usr/bin/env bash
# The main job on built-in data: sets up a fresh Debian 12 machine, builds, trains an agent
# on the built-in synthetic market (validating it on the device every epoch), then backtests
# the best policy and the baselines on that market and writes the run's HTML report.
# Everything lands in out/demo/.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
scripts/build.sh
out=out/demo
mkdir -p "$out"
dqn=build/openmp/dqntrader
"$dqn" train --seed 1 --out "$out/run"
"$dqn" synth --bars 12000 --seed 1 --out "$out/bars.csv"  # the market train used
for policy in buy-and-hold sign-of-ofi; do
  "$dqn" backtest --data "$out/bars.csv" --policy "$policy" --json "$out/$policy.json"
done
"$dqn" backtest --data "$out/bars.csv" --weights "$out/run/best.dqnpolicy" --json "$out/agent.json"
"$dqn" report "$out/run"  # out/demo/run/report.html
