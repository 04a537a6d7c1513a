#!/usr/bin/env bash
# Installs the Python module (import dqntrader) into a virtual environment, with Debian's
# packages only: scripts/build.sh (the OpenMP build of README.md, cached; it builds the module
# for Debian's python3), then a virtual environment at VENV made with --system-site-packages
# (Debian's Python is externally managed; the environment sees Debian's NumPy and pandas), and
# CMake's install of the module into its site-packages. Ends by importing it from there.
#   scripts/install-python.sh VENV          then: VENV/bin/python -c 'import dqntrader'
set -euo pipefail
if [ $# -ne 1 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
  echo "usage: scripts/install-python.sh VENV (a virtual environment's directory, made when missing)" >&2
  exit 2
fi
venv=$1
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/build.sh"
python=/usr/bin/python3
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv --system-site-packages "$venv"
fi
# The module is built for Debian's python3: the environment must run that interpreter.
want=$("$python" -c 'import sys; print(sys.version_info[:2])')
have=$("$venv/bin/python" -c 'import sys; print(sys.version_info[:2])')
if [ "$want" != "$have" ]; then
  echo "install-python: $venv runs Python $have; the module is built for $python ($want)" >&2
  exit 1
fi
cmake --install "$root/build/openmp" --component python --prefix "$venv" >/dev/null
cd /
"$venv/bin/python" -c 'import dqntrader, os; i = dqntrader.info()
print("install-python: dqntrader", i["version"], "(" + i["backend"] + ") in", os.path.dirname(dqntrader.__file__))'
