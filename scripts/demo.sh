#!/usr/bin/env bash
# The main job on built-in data: sets up a fresh Debian 12 machine, builds, and runs
# dqntrader on this machine.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
scripts/build.sh
build/openmp/dqntrader info
build/openmp/bench/dqntrader_bench_gemm --benchmark_filter='gemm/train_' --benchmark_min_time=0.05
