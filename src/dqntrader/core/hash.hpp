// The checksum of dqntrader's files (policies, checkpoints, the bar cache, a sweep's record of
// its members' files): XXH64 with seed 0, computed by xxHash (Debian's libxxhash-dev, Spack's
// xxhash), fed incrementally. docs/POLICY.md names it so that any reader can recompute it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace dqntrader {

class Hasher64 {
 public:
  explicit Hasher64(std::uint64_t seed = 0);
  ~Hasher64();
  Hasher64(const Hasher64&) = delete;
  Hasher64& operator=(const Hasher64&) = delete;
  void update(const void* data, std::size_t bytes);
  std::uint64_t digest() const;

 private:
  struct State;
  std::unique_ptr<State> m_state;
};

/// The checksum of one buffer.
std::uint64_t hash64(const void* data, std::size_t bytes, std::uint64_t seed = 0);

}  // namespace dqntrader
