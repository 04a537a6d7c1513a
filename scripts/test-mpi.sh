#!/usr/bin/env bash
# Sweeps across ranks: builds the OpenMP variant with DQNTRADER_ENABLE_MPI (Debian's OpenMPI,
# which bootstrap.sh --mpi installs) into build/openmp-mpi, with warnings as errors as in every
# CI build, then runs the MPI tests (CTest label mpi: sweeps under mpiexec against one rank, a
# killed rank and --resume, ranks that do not share the output directory) and the sweep tests,
# whose command now starts MPI as a single rank. Run by .ci/run after scripts/test.sh, whose
# set-up it reuses.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
KOKKOS_PREFIX=$(scripts/bootstrap.sh --mpi --print-prefix)
export KOKKOS_PREFIX
cmake --preset openmp-mpi -DDQNTRADER_WARNINGS_AS_ERRORS=ON \
  -DDQNTRADER_EXPECT_KOKKOS_VERSION=30401 >/dev/null
cmake --build --preset openmp-mpi -j "${DQNTRADER_JOBS:-2}"
ctest --preset openmp-mpi -L mpi
OMP_PROC_BIND=false build/openmp-mpi/tests/dqntrader_tests --gtest_filter='Sweep*:SearchSpace*'
