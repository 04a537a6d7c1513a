// A population's device buffers as checkpoint sections: each buffer with its section's name
// and how it holds the members, listed once where the buffers are made. The list saves them,
// loads them back, and saves them for some of the members only (what a population of those
// members loads: DqnTrainer::compact).
#pragma once

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "dqntrader/core/types.hpp"
#include "dqntrader/io/checkpoint_file.hpp"
#include "dqntrader/io/snapshot.hpp"

namespace dqntrader::io {

class MemberBuffers {
 public:
  /// The buffers of a population of `members` members.
  explicit MemberBuffers(std::size_t members) : m_members(members) {}

  /// A buffer that holds member m's vector at m * stride values; it ends with the last
  /// member's vector or with the padding after it.
  template <class T>
  void add_strided(const std::string& name, const Kokkos::View<T*, DeviceMemory>& view,
                   std::size_t stride) {
    add(name, view, stride * sizeof(T));
  }
  /// A buffer of one block of equal size per member, in member order.
  template <class T>
  void add_blocks(const std::string& name, const Kokkos::View<T*, DeviceMemory>& view) {
    add(name, view, 0);
  }
  /// A buffer of one block of equal size per member, written from its start: of member m's
  /// block only the first written(m) values (at most the block) were ever written, the rest is
  /// zero. It is saved as those prefixes alone, back to back in member order, and loaded into
  /// zeros; written must be a buffer of the list too. A section that holds every block whole
  /// (what was saved before prefixes were) loads as it is.
  template <class T>
  void add_prefixes(const std::string& name, const Kokkos::View<T*, DeviceMemory>& view,
                    const Kokkos::View<std::int64_t*, DeviceMemory>& written) {
    add(name, view, 0);
    m_buffers.back().value_bytes = sizeof(T);
    m_buffers.back().written = Written(written.data(), written.extent(0));
  }

  /// Appends one section per buffer to out, in the order they were added: the bytes copied
  /// from the device into the snapshot's reserved memory on space, fenced once.
  void save(Snapshot& out, const ExecSpace& space) const;
  /// The same for the members at positions keep (ascending) alone, laid out as the buffers
  /// of a population of those members hold them.
  void save(std::vector<Section>& out, const std::vector<std::size_t>& keep,
            const ExecSpace& space) const;
  /// Fills every buffer from its section; InputError (naming source) when one is missing or
  /// of another size.
  void load(const std::vector<Section>& sections, const std::string& source) const;

 private:
  // The list refers to a buffer's bytes without holding its memory: the buffers' owners keep
  // them while the list is used.
  using Bytes = Kokkos::View<char*, DeviceMemory, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  using Written =
      Kokkos::View<std::int64_t*, DeviceMemory, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  struct Buffer {
    std::string name;
    Bytes bytes;
    std::size_t stride;  // bytes from one member's vector to the next; 0: equal blocks
    // Prefix buffers (add_prefixes) alone: the values written per member, a value's bytes.
    Written written;
    std::size_t value_bytes = 0;
  };
  // Each member's bytes of a prefix buffer that hold what was written, read from the device.
  std::vector<std::size_t> prefix_bytes(const Buffer& b) const;

  template <class T>
  void add(const std::string& name, const Kokkos::View<T*, DeviceMemory>& view,
           std::size_t stride) {
    m_buffers.push_back({name, Bytes(reinterpret_cast<char*>(view.data()), view.span() * sizeof(T)),
                         stride, Written(), 0});
  }

  std::size_t m_members;
  std::vector<Buffer> m_buffers;
};

}  // namespace dqntrader::io
