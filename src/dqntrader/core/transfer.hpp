// Host vector -> device view, the one way the library uploads.
#pragma once

#include <Kokkos_Core.hpp>

#include <string>
#include <vector>

#include "dqntrader/core/kokkos_compat.hpp"
#include "dqntrader/core/types.hpp"

namespace dqntrader {

/// A device copy of values, enqueued on space; returns once the copy is done, so the host
/// vector may go away.
template <class T>
Kokkos::View<T*, DeviceMemory> upload(const ExecSpace& space, const std::vector<T>& values,
                                      const std::string& label) {
  Kokkos::View<T*, DeviceMemory> device(
      Kokkos::view_alloc(space, Kokkos::WithoutInitializing, label), values.size());
  Kokkos::View<const T*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> host(
      values.data(), values.size());
  Kokkos::deep_copy(space, device, host);
  compat::fence(space, "dqntrader::upload: the host vector may go away after return");
  return device;
}

}  // namespace dqntrader
