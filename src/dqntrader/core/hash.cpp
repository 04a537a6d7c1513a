#include "dqntrader/core/hash.hpp"

#include <cstring>

namespace dqntrader {

namespace {

constexpr std::uint64_t P1 = 0x9E3779B185EBCA87ull;
constexpr std::uint64_t P2 = 0xC2B2AE3D27D4EB4Full;
constexpr std::uint64_t P3 = 0x165667B19E3779F9ull;
constexpr std::uint64_t P4 = 0x85EBCA77C2B2AE63ull;
constexpr std::uint64_t P5 = 0x27D4EB2F165667C5ull;

inline std::uint64_t rotl(std::uint64_t x, int r) {
  return (x << r) | (x >> (64 - r));
}

inline std::uint64_t load64(const unsigned char* p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;  // little-endian hosts only (x86-64, aarch64): the format is defined so
}

inline std::uint32_t load32(const unsigned char* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline std::uint64_t round(std::uint64_t lane, std::uint64_t input) {
  lane += input * P2;
  lane = rotl(lane, 31);
  return lane * P1;
}

inline std::uint64_t merge(std::uint64_t acc, std::uint64_t lane) {
  acc ^= round(0, lane);
  return acc * P1 + P4;
}

}  // namespace

Hasher64::Hasher64(std::uint64_t seed)
    : m_lanes{seed + P1 + P2, seed + P2, seed, seed - P1}, m_seed(seed) {}

void Hasher64::update(const void* data, std::size_t bytes) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  m_total += bytes;
  if (m_buffered > 0) {
    const std::size_t take = bytes < 32 - m_buffered ? bytes : 32 - m_buffered;
    std::memcpy(m_buffer + m_buffered, p, take);
    m_buffered += take;
    p += take;
    bytes -= take;
    if (m_buffered < 32)
      return;
    for (int i = 0; i < 4; ++i)
      m_lanes[i] = round(m_lanes[i], load64(m_buffer + 8 * i));
    m_buffered = 0;
  }
  while (bytes >= 32) {
    for (int i = 0; i < 4; ++i)
      m_lanes[i] = round(m_lanes[i], load64(p + 8 * i));
    p += 32;
    bytes -= 32;
  }
  std::memcpy(m_buffer, p, bytes);
  m_buffered = bytes;
}

std::uint64_t Hasher64::digest() const {
  std::uint64_t h;
  if (m_total >= 32) {
    h = rotl(m_lanes[0], 1) + rotl(m_lanes[1], 7) + rotl(m_lanes[2], 12) + rotl(m_lanes[3], 18);
    for (int i = 0; i < 4; ++i)
      h = merge(h, m_lanes[i]);
  } else {
    h = m_seed + P5;
  }
  h += m_total;
  const unsigned char* p = m_buffer;
  std::size_t left = m_buffered;
  while (left >= 8) {
    h ^= round(0, load64(p));
    h = rotl(h, 27) * P1 + P4;
    p += 8;
    left -= 8;
  }
  if (left >= 4) {
    h ^= static_cast<std::uint64_t>(load32(p)) * P1;
    h = rotl(h, 23) * P2 + P3;
    p += 4;
    left -= 4;
  }
  while (left > 0) {
    h ^= (*p) * P5;
    h = rotl(h, 11) * P1;
    ++p;
    --left;
  }
  h ^= h >> 33;
  h *= P2;
  h ^= h >> 29;
  h *= P3;
  h ^= h >> 32;
  return h;
}

std::uint64_t hash64(const void* data, std::size_t bytes, std::uint64_t seed) {
  Hasher64 hasher(seed);
  hasher.update(data, bytes);
  return hasher.digest();
}

}  // namespace dqntrader
