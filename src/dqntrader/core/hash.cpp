#include "dqntrader/core/hash.hpp"

// xxHash's implementation, compiled into this file: no library to link, for dqntrader or for
// a project that links it.
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace dqntrader {

struct Hasher64::State {
  XXH64_state_t state;
};

Hasher64::Hasher64(std::uint64_t seed) : m_state(std::make_unique<State>()) {
  XXH64_reset(&m_state->state, seed);
}

Hasher64::~Hasher64() = default;

void Hasher64::update(const void* data, std::size_t bytes) {
  XXH64_update(&m_state->state, data, bytes);
}

std::uint64_t Hasher64::digest() const {
  return XXH64_digest(&m_state->state);
}

std::uint64_t hash64(const void* data, std::size_t bytes, std::uint64_t seed) {
  return XXH64(data, bytes, seed);
}

}  // namespace dqntrader
