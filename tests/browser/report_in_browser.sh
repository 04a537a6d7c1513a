#!/usr/bin/env bash
# A short training run through the command and its report, then a tiny sweep and its sweep
# report, each report checked in headless Chromium (check_report.py, the sweep one with
# --sweep). Exits 0 when both checks pass, non-zero when anything fails, and 77 (CTest: skipped)
# only when no browser is installed, unless DQNTRADER_REQUIRE_BROWSER=1 makes that a failure.
#   report_in_browser.sh DQNTRADER_CLI WORK_DIR
set -euo pipefail
cli=$1
work=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
rm -rf "$work"
mkdir -p "$work"

failed=0   # first exit status of a failed check (not 77)
skipped=0  # a check found no browser
check() {
  local rc=0
  python3 "$here/check_report.py" "$@" || rc=$?
  if [ "$rc" -eq 77 ]; then
    skipped=1
  elif [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
    failed=$rc
  fi
}

"$cli" train --synth-bars 3000 --epochs 4 --steps-per-epoch 60 --learning-starts 256 \
  --hidden 16 --out "$work/run" >"$work/train.log" 2>&1 || { cat "$work/train.log"; exit 1; }
"$cli" report "$work/run"
check "$work/run/report.html" --screenshot "$work/report.png"

"$cli" synth --bars 3000 --seed 4 --out "$work/bars.dqnbars" >"$work/synth.log" 2>&1 \
  || { cat "$work/synth.log"; exit 1; }
"$cli" sweep --data "$work/bars.dqnbars" --out "$work/sweep" --epochs 3 --steps-per-epoch 60 \
  --learning-starts 256 --hidden 16 --environments 16 --batch-size 32 --replay-capacity 4096 \
  --probe-batch 32 --seeds 1-2 --set learning-rate=1e-4,1e-3 --set gamma=0.9,0.99 \
  >"$work/sweep.log" 2>&1 || { cat "$work/sweep.log"; exit 1; }
"$cli" report "$work/sweep"
check "$work/sweep/report.html" --screenshot "$work/sweep-report.png" --sweep

if [ "$failed" -ne 0 ]; then
  exit "$failed"
fi
if [ "$skipped" -ne 0 ]; then
  exit 77
fi
exit 0
