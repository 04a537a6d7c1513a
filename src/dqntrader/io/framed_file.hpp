// What dqntrader's binary files share (policies: docs/POLICY.md; checkpoints:
// io/checkpoint_file.hpp; bar caches: data/bar_cache.hpp): an 8-byte magic, fields as their
// little-endian bytes, and a trailer, the XXH64 of every byte before it. Each format keeps its
// own fields, order of checks and wording; these are the pieces they write and read them with.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>

namespace dqntrader::io {

/// Appends value's bytes (the host's, little-endian on every machine dqntrader builds for).
template <class T>
void put(std::string& out, const T& value) {
  static_assert(std::is_trivially_copyable<T>::value, "a field is plain bytes");
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

/// Appends the trailer: the XXH64 of everything in out.
void seal(std::string& out);

/// A framed file read whole, its fields taken in order from after the magic up to the trailer.
/// Every length is checked against the bytes left before it is used: a field that runs past
/// the trailer calls fail(what it was), which throws.
class FrameReader {
 public:
  FrameReader(const std::string& bytes, std::function<void(const std::string&)> fail);

  /// Whether the trailer is the XXH64 of the bytes before it.
  bool sealed() const;
  /// The next n bytes into into.
  void take(void* into, std::uint64_t n, const std::string& what);
  template <class T>
  T get(const std::string& what) {
    T value{};
    take(&value, sizeof(T), what);
    return value;
  }
  /// Bytes left before the trailer.
  std::size_t left() const { return m_end - m_at; }

 private:
  const std::string& m_bytes;
  std::function<void(const std::string&)> m_fail;
  std::size_t m_at = 8, m_end = 8;
};

}  // namespace dqntrader::io
