// The settings the device starts with, checked before it starts: the same bounds for the
// command's --threads and --device and the module's configure(threads=, device=).
#pragma once

#include <string>

#include "dqntrader/core/kokkos_compat.hpp"

namespace dqntrader {

/// The most host threads taken: four per hardware thread (256 where the count is unknown).
/// Kokkos's OpenMP backend starts every thread asked for at once; far past the cores it only
/// costs, and past the process's limits it fails without a message.
int most_host_threads();

/// The options for threads host threads and the device ordinal device, each -1 for Kokkos's
/// default. InputError naming threads_name (how the caller spells it: "--threads",
/// "threads=") for a count that is neither -1 nor 1 .. most_host_threads(), and device_name
/// for an ordinal below -1 or past 2^31 - 1.
compat::InitOptions init_options(long long threads, long long device,
                                 const std::string& threads_name, const std::string& device_name);

}  // namespace dqntrader
