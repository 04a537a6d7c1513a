#!/usr/bin/env bash
# The test suite built with AddressSanitizer and UndefinedBehaviorSanitizer (OpenMP
# backend), into build/openmp-sanitize; any report fails it. Run by .ci/run after the tests.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
KOKKOS_PREFIX=$(scripts/bootstrap.sh --print-prefix)
export KOKKOS_PREFIX
cmake --preset openmp-sanitize -DDQNTRADER_EXPECT_KOKKOS_VERSION=30401 >/dev/null
cmake --build --preset openmp-sanitize -j "${DQNTRADER_JOBS:-2}"
ctest --preset openmp-sanitize
