#!/usr/bin/env bash
# The test command: sets up a fresh Debian 12 machine, builds, and runs the whole suite
# (CTest). Exits non-zero on any failure.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
scripts/build.sh --browser
# The report test renders a page in Chromium; here a missing browser is a failure, not a skip.
export DQNTRADER_REQUIRE_BROWSER=1
ctest --preset ci
