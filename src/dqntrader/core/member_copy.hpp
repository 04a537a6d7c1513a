// Copies of whole members between the slots of a population's buffers, device to device: what
// population based training's exploit does (sweep/schedule.hpp). Every buffer holds each
// member's vector at member * stride; a copy (to, from) makes member to's vector member
// from's, and leaves every other member's untouched.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "dqntrader/core/transfer.hpp"
#include "dqntrader/core/types.hpp"

namespace dqntrader {

/// The copies, [copy][0: to, 1: from], on the device. No member is both a to and a from, and
/// no two copies have the same to, so that the copies may run in any order.
using MemberCopies = Kokkos::View<std::uint32_t**, Kokkos::LayoutRight, DeviceMemory>;

/// Room for a population's copies on the device and its host mirror, allocated once: a
/// decision's list goes up without an allocation or a wait.
class CopyList {
 public:
  CopyList(const ExecSpace& space, std::size_t most)
      : m_device(Kokkos::view_alloc(space, std::string("dqntrader::member_copies")), most, 2),
        m_host(Kokkos::create_mirror_view(m_device)) {}

  /// The copies on the device (enqueued on space; the next upload must follow a fence).
  MemberCopies upload(const ExecSpace& space,
                      const std::vector<std::pair<std::size_t, std::size_t>>& copies) const {
    const std::pair<std::size_t, std::size_t> rows(0, copies.size());
    for (std::size_t i = 0; i < copies.size(); ++i) {
      m_host(i, 0) = static_cast<std::uint32_t>(copies[i].first);
      m_host(i, 1) = static_cast<std::uint32_t>(copies[i].second);
    }
    const MemberCopies used = Kokkos::subview(m_device, rows, Kokkos::ALL());
    Kokkos::deep_copy(space, used, Kokkos::subview(m_host, rows, Kokkos::ALL()));
    return used;
  }

 private:
  MemberCopies m_device;
  MemberCopies::HostMirror m_host;
};

/// Member to's `size` values of values become member from's, for every copy.
template <class T>
void copy_member_vectors(const ExecSpace& space, const Kokkos::View<T*, DeviceMemory>& values,
                         std::size_t size, std::size_t stride, const MemberCopies& copies) {
  if (values.extent(0) == 0 || copies.extent(0) == 0)
    return;
  Kokkos::parallel_for(
      "dqntrader::copy_member_vectors",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>(space, {std::size_t{0}, std::size_t{0}},
                                                        {std::size_t{copies.extent(0)}, size}),
      KOKKOS_LAMBDA(const std::size_t c, const std::size_t i) {
        values(copies(c, 0) * stride + i) = values(copies(c, 1) * stride + i);
      });
}

}  // namespace dqntrader
