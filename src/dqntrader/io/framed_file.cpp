#include "dqntrader/io/framed_file.hpp"

#include <cstring>

#include "dqntrader/core/hash.hpp"

namespace dqntrader::io {

void seal(std::string& out) {
  put(out, hash64(out.data(), out.size()));
}

FrameReader::FrameReader(const std::string& bytes, std::function<void(const std::string&)> fail)
    : m_bytes(bytes), m_fail(std::move(fail)) {
  if (bytes.size() < 16)
    m_fail("the file ends inside its header");
  m_end = bytes.size() - 8;
}

bool FrameReader::sealed() const {
  std::uint64_t stored = 0;
  std::memcpy(&stored, m_bytes.data() + m_end, 8);
  return hash64(m_bytes.data(), m_end) == stored;
}

void FrameReader::take(void* into, std::uint64_t n, const std::string& what) {
  if (n > m_end - m_at)
    m_fail(what);
  std::memcpy(into, m_bytes.data() + m_at, static_cast<std::size_t>(n));
  m_at += static_cast<std::size_t>(n);
}

}  // namespace dqntrader::io
