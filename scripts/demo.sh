#!/usr/bin/env bash
# The main job on built-in data: sets up a fresh Debian 12 machine, builds, generates the
# synthetic market and backtests the built-in baselines on it. Output goes to out/demo/.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
scripts/build.sh
out=out/demo
mkdir -p "$out"
dqn=build/openmp/dqntrader
"$dqn" synth --bars 20000 --seed 1 --out "$out/bars.csv"
for policy in buy-and-hold sign-of-ofi; do
  "$dqn" backtest --data "$out/bars.csv" --policy "$policy" --json "$out/$policy.json"
done
