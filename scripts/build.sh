#!/usr/bin/env bash
# Sets up the machine (scripts/bootstrap.sh: Debian packages, Kokkos and Kokkos Kernels
# 3.4.01 from Debian's trilinos sources, cached) and builds the OpenMP variant into
# build/openmp as CI does (the preset ci: the preset openmp with warnings as errors).
# Extra arguments go to bootstrap.sh (e.g. --bench).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
KOKKOS_PREFIX=$(scripts/bootstrap.sh --print-prefix "$@")
export KOKKOS_PREFIX
cmake --preset ci -DDQNTRADER_EXPECT_KOKKOS_VERSION=30401 >/dev/null
cmake --build --preset ci -j "${DQNTRADER_JOBS:-2}"
