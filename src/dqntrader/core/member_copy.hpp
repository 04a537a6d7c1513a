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

/// The copies, (to, from) each, on the device. No member is both a to and a from, and no two
/// copies have the same to, so that the copies may run in any order.
using MemberCopies = Kokkos::View<std::uint32_t* [2], DeviceMemory>;

inline MemberCopies upload_copies(const ExecSpace& space,
                                  const std::vector<std::pair<std::size_t, std::size_t>>& copies) {
  MemberCopies out(Kokkos::view_alloc(space, std::string("dqntrader::member_copies")),
                   copies.size());
  auto host = Kokkos::create_mirror_view(out);
  for (std::size_t i = 0; i < copies.size(); ++i) {
    host(i, 0) = static_cast<std::uint32_t>(copies[i].first);
    host(i, 1) = static_cast<std::uint32_t>(copies[i].second);
  }
  Kokkos::deep_copy(space, out, host);
  compat::fence(space, "dqntrader::upload_copies: the host mirror may go away after return");
  return out;
}

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
