#!/usr/bin/env bash
# The test suite built with AddressSanitizer and UndefinedBehaviorSanitizer (OpenMP
# backend), into build/openmp-sanitize, with warnings as errors as in every CI build; any
# report fails it. Run by .ci/run after the tests.
# The long learning tests (whole default runs) and the tests that kill processes at random
# moments run in the plain build only: under the sanitizers they take most of CI's time and
# reach no code the rest of the suite does not. The suite runs at two host threads only (the
# plain build runs it at one and two: results must not depend on it), and only it is built:
# the benchmarks, the oracle's self-test and the package tests hold no code of their own that
# the sanitizers would check.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
KOKKOS_PREFIX=$(scripts/bootstrap.sh --print-prefix)
export KOKKOS_PREFIX
cmake --preset openmp-sanitize -DDQNTRADER_WARNINGS_AS_ERRORS=ON \
  -DDQNTRADER_EXPECT_KOKKOS_VERSION=30401 >/dev/null
cmake --build --preset openmp-sanitize -j "${DQNTRADER_JOBS:-2}" --target dqntrader_tests
GTEST_FILTER='-Learning.*:Population.EveryMemberLearnsAsItsRunAloneWithinRounding:Reliability.KilledAtRandomMomentsNeverLeavesACorruptCheckpoint:Sweep.AKilledSweepResumesBitwise:Sweep.APopulationWhoseCheckpointsAreDamagedTrainsAgain' \
  ctest --preset openmp-sanitize -R '^dqntrader_tests_threads_2$'
