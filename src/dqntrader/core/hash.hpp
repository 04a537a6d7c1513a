// A fast 64-bit checksum for file payloads (the xxHash64 construction: four lanes of
// multiply-rotate over 32-byte stripes), fed incrementally.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dqntrader {

class Hasher64 {
 public:
  explicit Hasher64(std::uint64_t seed = 0);
  void update(const void* data, std::size_t bytes);
  std::uint64_t digest() const;

 private:
  std::uint64_t m_lanes[4];
  std::uint64_t m_seed;
  std::uint64_t m_total = 0;
  unsigned char m_buffer[32];
  std::size_t m_buffered = 0;
};

/// The checksum of one buffer.
std::uint64_t hash64(const void* data, std::size_t bytes, std::uint64_t seed = 0);

}  // namespace dqntrader
