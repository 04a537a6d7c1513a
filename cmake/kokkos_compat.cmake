# The CMake side of src/dqntrader/core/kokkos_compat.hpp: spellings that differ between the
# Kokkos releases dqntrader builds against, chosen by the version found.

# The command-line argument that sets the host threads: --kokkos-threads up to 3.6 (3.4 has
# no other), --kokkos-num-threads from 3.7 (4.3 removed --kokkos-threads, warning only).
if(Kokkos_VERSION VERSION_LESS 3.7)
  set(DQNTRADER_KOKKOS_THREADS_FLAG --kokkos-threads)
else()
  set(DQNTRADER_KOKKOS_THREADS_FLAG --kokkos-num-threads)
endif()
