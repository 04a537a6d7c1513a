#include "dqntrader/core/init_check.hpp"

#include <limits>
#include <thread>

#include "dqntrader/core/error.hpp"

namespace dqntrader {

int most_host_threads() {
  const unsigned hardware = std::thread::hardware_concurrency();
  return hardware == 0 ? 256 : static_cast<int>(4 * hardware);
}

compat::InitOptions init_options(long long threads, long long device,
                                 const std::string& threads_name, const std::string& device_name) {
  const int most = most_host_threads();
  if (threads != -1 && (threads < 1 || threads > most)) {
    throw InputError(threads_name + " " + std::to_string(threads) + ": host threads go from 1 to " +
                     std::to_string(most) + " (four per hardware thread of this machine)");
  }
  if (device < -1 || device > std::numeric_limits<int>::max())
    throw InputError(device_name + " " + std::to_string(device) + ": not a device ordinal");
  compat::InitOptions options;
  options.num_threads = static_cast<int>(threads);
  options.device_id = static_cast<int>(device);
  return options;
}

}  // namespace dqntrader
