#include "dqntrader/io/member_buffers.hpp"

#include "dqntrader/core/error.hpp"
#include "dqntrader/io/view_sections.hpp"

namespace dqntrader::io {

void MemberBuffers::save(std::vector<Section>& out) const {
  for (const Buffer& b : m_buffers)
    io::save(out, b.name, b.bytes);
}

void MemberBuffers::save(std::vector<Section>& out, const std::vector<std::size_t>& keep) const {
  for (const Buffer& b : m_buffers) {
    std::vector<Section> all;
    io::save(all, b.name, b.bytes);
    const std::string& bytes = all.front().bytes;
    Section kept{b.name, std::string()};
    if (b.stride > 0) {
      const std::size_t block = bytes.size() - (m_members - 1) * b.stride;
      for (std::size_t i = 0; i < keep.size(); ++i) {
        kept.bytes += bytes.substr(keep[i] * b.stride, block);
        if (i + 1 < keep.size())
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
  for (const Buffer& b : m_buffers)
    io::load(sections, b.name, b.bytes, source);
}

}  // namespace dqntrader::io
