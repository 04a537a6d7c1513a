#include "dqntrader/io/checkpoint_file.hpp"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>

#include "dqntrader/core/error.hpp"
#include "dqntrader/core/hash.hpp"
#include "dqntrader/io/atomic_file.hpp"
#include "dqntrader/io/framed_file.hpp"
#include "dqntrader/io/input_file.hpp"

namespace dqntrader::io {

namespace {

constexpr char magic[8] = {'D', 'Q', 'N', 'C', 'K', 'P', 'T', '\0'};

}  // namespace

void write_sections(const std::string& path, std::uint32_t format,
                    const std::vector<Section>& sections) {
  std::string out(magic, 8);
  put(out, format);
  put(out, static_cast<std::uint32_t>(sections.size()));
  for (const Section& s : sections) {
    put(out, static_cast<std::uint16_t>(s.name.size()));
    out += s.name;
    put(out, static_cast<std::uint64_t>(s.bytes.size()));
    put(out, hash64(s.bytes.data(), s.bytes.size()));
    out += s.bytes;
  }
  seal(out);
  write_file_atomically(path, out);
}

std::vector<Section> read_sections(const std::string& path, std::uint32_t* format) {
  auto fail = [&](const std::string& what) -> void { throw InputError(path, 0, 0, what); };
  const std::string bytes = read_file(path);
  if (bytes.size() < 24 || std::memcmp(bytes.data(), magic, 8) != 0)
    fail("not a dqntrader checkpoint");
  FrameReader frame(bytes, fail);
  auto inside = [](const char* what) {
    return std::string("truncated checkpoint: the file ends inside ") + what;
  };
  const auto got_version = frame.get<std::uint32_t>(inside("the header"));
  if (format != nullptr)
    *format = got_version;
  const auto count = frame.get<std::uint32_t>(inside("the header"));
  std::vector<Section> sections;
  for (std::uint32_t i = 0; i < count; ++i) {
    Section s;
    s.name.resize(frame.get<std::uint16_t>(inside("a section header")));
    frame.take(s.name.data(), s.name.size(), inside("a section header"));
    const auto size = frame.get<std::uint64_t>(inside("a section header"));
    const auto checksum = frame.get<std::uint64_t>(inside("a section header"));
    if (size > frame.left())
      fail("truncated checkpoint: section '" + s.name + "' is cut short");
    s.bytes.resize(static_cast<std::size_t>(size));
    frame.take(s.bytes.data(), size, "");
    if (hash64(s.bytes.data(), s.bytes.size()) != checksum) {
      fail("corrupted checkpoint: checksum mismatch in section '" + s.name + "'");
    }
    sections.push_back(std::move(s));
  }
  if (frame.left() != 0)
    fail("corrupted checkpoint: trailing bytes");
  if (!frame.sealed())
    fail("corrupted checkpoint: checksum mismatch in the section table");
  return sections;
}

const Section& find_section(const std::vector<Section>& sections, const std::string& name,
                            const std::string& path) {
  for (const Section& s : sections) {
    if (s.name == name)
      return s;
  }
  throw InputError(path, 0, 0, "checkpoint has no section '" + name + "'");
}

}  // namespace dqntrader::io
