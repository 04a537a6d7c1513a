#!/usr/bin/env bash
# A short training run through the command, its report, and the report checked in headless
# Chromium (check_report.py). Exits 77 (CTest: skipped) when no browser is installed, unless
# DQNTRADER_REQUIRE_BROWSER=1 makes that a failure.
#   report_in_browser.sh DQNTRADER_CLI WORK_DIR
set -euo pipefail
cli=$1
work=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
rm -rf "$work"
mkdir -p "$work"
"$cli" train --synth-bars 3000 --epochs 4 --steps-per-epoch 60 --learning-starts 256 \
  --hidden 16 --out "$work/run" >"$work/train.log" 2>&1 || { cat "$work/train.log"; exit 1; }
"$cli" report "$work/run"
exec python3 "$here/check_report.py" "$work/run/report.html" --screenshot "$work/report.png"
