#!/usr/bin/env bash
# The test command: sets up a fresh Debian 12 machine, builds, and runs the whole suite
# (CTest), then installs the Python module into a fresh virtual environment the way README.md
# says (scripts/install-python.sh, reusing the build) and imports it from there. Exits non-zero
# on any failure.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
scripts/build.sh --browser
# The report test renders a page in Chromium; here a missing browser is a failure, not a skip.
export DQNTRADER_REQUIRE_BROWSER=1
ctest --preset ci
venv=$(mktemp -d)
trap 'rm -rf "$venv"' EXIT
scripts/install-python.sh "$venv/env" >/dev/null
"$venv/env/bin/python" -c 'import dqntrader; assert len(dqntrader.synth(100)) == 100' </dev/null
echo "test: the Python module installs into a virtual environment and imports there"
