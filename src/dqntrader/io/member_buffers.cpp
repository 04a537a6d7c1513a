#include "dqntrader/io/member_buffers.hpp"

#include <algorithm>
#include <cstring>

#include "dqntrader/core/error.hpp"
#include "dqntrader/core/kokkos_compat.hpp"
#include "dqntrader/io/view_sections.hpp"

namespace dqntrader::io {

std::vector<std::size_t> MemberBuffers::prefix_bytes(const Buffer& b) const {
  auto written = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), b.written);
  const std::size_t block = b.bytes.span() / m_members;
  std::vector<std::size_t> bytes(m_members);
  for (std::size_t m = 0; m < m_members; ++m) {
    const auto values = static_cast<std::size_t>(std::max<std::int64_t>(written(m), 0));
    bytes[m] = std::min(values * b.value_bytes, block);
  }
  return bytes;
}

std::string MemberBuffers::section_bytes(const Buffer& b) const {
  using HostBytes = Kokkos::View<char*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  if (b.value_bytes == 0) {
    // The whole buffer, copied from the device into the section's bytes themselves.
    std::string out(b.bytes.span(), '\0');
    Kokkos::deep_copy(HostBytes(out.data(), out.size()), b.bytes);
    return out;
  }
  // The prefixes alone, each copied from the device as it lies there.
  const std::vector<std::size_t> bytes = prefix_bytes(b);
  const std::size_t block = b.bytes.span() / m_members;
  std::size_t total = 0;
  for (std::size_t n : bytes)
    total += n;
  std::string out(total, '\0');
  std::size_t at = 0;
  for (std::size_t m = 0; m < m_members; ++m) {
    if (bytes[m] == 0)
      continue;
    Kokkos::deep_copy(HostBytes(out.data() + at, bytes[m]),
                      Kokkos::subview(b.bytes, std::make_pair(m * block, m * block + bytes[m])));
    at += bytes[m];
  }
  return out;
}

void MemberBuffers::save(std::vector<Section>& out) const {
  for (const Buffer& b : m_buffers)
    out.push_back({b.name, section_bytes(b)});
}

void MemberBuffers::save(std::vector<Section>& out, const std::vector<std::size_t>& keep) const {
  for (const Buffer& b : m_buffers) {
    const std::string bytes = section_bytes(b);
    Section kept{b.name, std::string()};
    if (b.value_bytes > 0) {
      const std::vector<std::size_t> prefix = prefix_bytes(b);
      std::vector<std::size_t> start(m_members, 0);
      for (std::size_t m = 1; m < m_members; ++m)
        start[m] = start[m - 1] + prefix[m - 1];
      for (const std::size_t m : keep)
        kept.bytes += bytes.substr(start[m], prefix[m]);
    } else if (b.stride > 0) {
      const std::size_t block = bytes.size() - (m_members - 1) * b.stride;
      for (std::size_t i = 0; i < keep.size(); ++i) {
        kept.bytes += bytes.substr(keep[i] * b.stride, block);
        if (i + 1 < keep.size())
          kept.bytes.append(b.stride - block, '\0');  // the padding between members
      }
    } else {
      if (bytes.size() % m_members != 0)
        throw Error("MemberBuffers: section " + b.name + " is not a member's block each");
      const std::size_t block = bytes.size() / m_members;
      for (const std::size_t m : keep)
        kept.bytes += bytes.substr(m * block, block);
    }
    out.push_back(std::move(kept));
  }
}

void MemberBuffers::load(const std::vector<Section>& sections, const std::string& source) const {
  // The whole buffers first: the counts of what the prefix buffers hold are among them.
  for (const Buffer& b : m_buffers) {
    if (b.value_bytes == 0)
      io::load(sections, b.name, b.bytes, source);
  }
  for (const Buffer& b : m_buffers) {
    if (b.value_bytes == 0)
      continue;
    const Section& s = find_section(sections, b.name, source);
    if (s.bytes.size() == b.bytes.span()) {
      io::load(sections, b.name, b.bytes, source);  // every block whole
      continue;
    }
    const std::vector<std::size_t> bytes = prefix_bytes(b);
    std::size_t total = 0;
    for (std::size_t n : bytes)
      total += n;
    if (s.bytes.size() != total) {
      throw InputError(source, 0, 0,
                       "checkpoint section '" + b.name + "' holds " +
                           std::to_string(s.bytes.size()) + " bytes, what its members wrote is " +
                           std::to_string(total));
    }
    Kokkos::deep_copy(b.bytes, char(0));
    const std::size_t block = b.bytes.span() / m_members;
    std::size_t at = 0;
    for (std::size_t m = 0; m < m_members; ++m) {
      if (bytes[m] == 0)
        continue;
      const Kokkos::View<const char*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>
          host(s.bytes.data() + at, bytes[m]);
      Kokkos::deep_copy(Kokkos::subview(b.bytes, std::make_pair(m * block, m * block + bytes[m])),
                        host);
      at += bytes[m];
    }
  }
}

}  // namespace dqntrader::io
