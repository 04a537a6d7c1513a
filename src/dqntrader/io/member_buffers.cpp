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

void MemberBuffers::save(Snapshot& out, const ExecSpace& space) const {
  // Each buffer's pieces: the whole buffer, or each member's prefix (from, bytes).
  std::vector<std::vector<std::pair<std::size_t, std::size_t>>> pieces(m_buffers.size());
  std::size_t total = 0;
  for (std::size_t i = 0; i < m_buffers.size(); ++i) {
    const Buffer& b = m_buffers[i];
    if (b.value_bytes == 0) {
      pieces[i].emplace_back(0, b.bytes.span());
    } else {
      const std::vector<std::size_t> bytes = prefix_bytes(b);
      const std::size_t block = b.bytes.span() / m_members;
      for (std::size_t m = 0; m < m_members; ++m) {
        if (bytes[m] > 0)
          pieces[i].emplace_back(m * block, bytes[m]);
      }
    }
    for (const auto& [from, bytes] : pieces[i])
      total += bytes;
  }
  using Pinned = Kokkos::View<char*, PinnedHostMemory, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  char* const into = out.reserve(total);
  std::size_t at = 0;
  for (std::size_t i = 0; i < m_buffers.size(); ++i) {
    const std::size_t start = at;
    for (const auto& [from, bytes] : pieces[i]) {
      Kokkos::deep_copy(space, Pinned(into + at, bytes),
                        Kokkos::subview(m_buffers[i].bytes, std::make_pair(from, from + bytes)));
      at += bytes;
    }
    out.add_reserved(m_buffers[i].name, start, at - start);
  }
  compat::fence(space, "dqntrader::io::MemberBuffers::save: the snapshot is whole");
}

void MemberBuffers::save(std::vector<Section>& out, const std::vector<std::size_t>& keep,
                         const ExecSpace& space) const {
  Snapshot whole;
  save(whole, space);
  const std::vector<SectionView> sections = whole.sections();
  for (std::size_t i = 0; i < m_buffers.size(); ++i) {
    const Buffer& b = m_buffers[i];
    const std::string_view bytes = sections[i].bytes;
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
      for (std::size_t k = 0; k < keep.size(); ++k) {
        kept.bytes += bytes.substr(keep[k] * b.stride, block);
        if (k + 1 < keep.size())
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
