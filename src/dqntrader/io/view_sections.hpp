// Checkpoint sections back into device views: their bytes, copied through the host.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "dqntrader/core/error.hpp"
#include "dqntrader/io/checkpoint_file.hpp"

namespace dqntrader::io {

/// Fills view from the section called name; InputError (naming source) when the section is
/// missing or of another size.
template <class V>
void load(const std::vector<Section>& sections, const std::string& name, const V& view,
          const std::string& source) {
  const Section& s = find_section(sections, name, source);
  auto host = Kokkos::create_mirror_view(view);
  const std::size_t bytes = host.span() * sizeof(typename V::value_type);
  if (s.bytes.size() != bytes) {
    throw InputError(source, 0, 0,
                     "checkpoint section '" + name + "' holds " + std::to_string(s.bytes.size()) +
                         " bytes, this configuration needs " + std::to_string(bytes));
  }
  std::memcpy(static_cast<void*>(host.data()), s.bytes.data(), bytes);
  Kokkos::deep_copy(view, host);
}

}  // namespace dqntrader::io
