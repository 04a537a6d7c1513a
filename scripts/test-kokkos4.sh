#!/usr/bin/env bash
# The suite against Kokkos 4.6.01 and Kokkos Kernels 4.6.01 (OpenMP + Serial, Kokkos built
# without its deprecated code, which Kokkos 5 removes), from the upstream release tarballs in
# the shared/deps folder beside the checkout (or $DQNTRADER_KOKKOS_TARBALLS): the project in
# C++20 (scripts/test.sh builds it in C++17 against Kokkos 3.4.01), with -Wall -Wextra -Werror
# (the preset ci) and the CTest suite with the tests at two host threads (scripts/test.sh runs
# them at one and at two; one thread count here keeps CI inside its time). Left to
# scripts/test.sh, as they hold nothing Kokkos's version could change: the oracle's self-test
# (Python alone), the test that kills processes at random moments (the checkpoints' files) and
# README's command blocks (the document's commands, which test.sh runs).
# Run by .ci/run after scripts/test.sh, whose set-up it reuses.
# Without the tarballs it says so and exits 0: a fresh machine has no such folder.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
version=4.6.01
tarballs=${DQNTRADER_KOKKOS_TARBALLS:-$(cd "$root/.." && pwd)/shared/deps}
for t in kokkos kokkos-kernels; do
  if [ ! -f "$tarballs/$t-$version.tar.gz" ]; then
    echo "test-kokkos4: skipped: $tarballs/$t-$version.tar.gz is not there (set DQNTRADER_KOKKOS_TARBALLS to the folder with the Kokkos $version release tarballs)"
    exit 0
  fi
done
prefix=$(scripts/bootstrap.sh --kokkos "$version" --tarballs "$tarballs" --print-prefix)
export DQNTRADER_REQUIRE_BROWSER=1
build=build/kokkos-$version-cxx20
echo "test-kokkos4: Kokkos $version, C++20, in $build"
cmake --preset ci -B "$build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_STANDARD=20 \
  -DDQNTRADER_EXPECT_KOKKOS_VERSION=40601 >/dev/null
cmake --build "$build" -j "${DQNTRADER_JOBS:-2}"
GTEST_FILTER='-Reliability.KilledAtRandomMomentsNeverLeavesACorruptCheckpoint' \
  ctest --test-dir "$build" --output-on-failure \
  -E '^(dqntrader_tests_threads_1|selection_statistics_oracle|policy_reference_oracle|readme_commands)$'
