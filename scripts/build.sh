#!/usr/bin/env bash
# Sets up the machine (scripts/bootstrap.sh: Debian packages, Kokkos and Kokkos Kernels
# 3.4.01 from Debian's trilinos sources, cached) and builds the OpenMP variant into
# build/openmp as CI does (the preset ci: the preset openmp with warnings as errors).
# Extra arguments go to bootstrap.sh (e.g. --bench).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
KOKKOS_PREFIX=$(scripts/bootstrap.sh --print-prefix --onnx --python "$@")
export KOKKOS_PREFIX
# The preset ci builds the ONNX export; its tests run the models in the onnxruntime-node that
# bootstrap.sh --onnx installed. It builds the Python module too, for Debian's python3 (whose
# python3-numpy, -pandas and -pytest bootstrap.sh --python installed).
cmake --preset ci -DDQNTRADER_EXPECT_KOKKOS_VERSION=30401 \
  -DDQNTRADER_NODE_PATH="${DQNTRADER_DEPS_DIR:-${HOME}/.cache/dqntrader}/node/node_modules" >/dev/null
cmake --build --preset ci -j "${DQNTRADER_JOBS:-2}"
