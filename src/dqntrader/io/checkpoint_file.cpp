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
                    const std::vector<SectionView>& sections) {
  // The headers and the small sections gathered back to back in `small`; the large sections
  // written from where they lie. The pieces in order: (whether in small, offset or data, size).
  constexpr std::size_t large = std::size_t{1} << 16;
  std::string small(magic, 8);
  put(small, format);
  put(small, static_cast<std::uint32_t>(sections.size()));
  struct Piece {
    const char* data;  // a large section's; nullptr: small[offset, offset + size)
    std::size_t offset, size;
  };
  std::vector<Piece> pieces{{nullptr, 0, small.size()}};
  auto add_small = [&](std::size_t from) {
    if (pieces.back().data == nullptr)
      pieces.back().size += small.size() - from;
    else
      pieces.push_back({nullptr, from, small.size() - from});
  };
  for (const SectionView& s : sections) {
    std::size_t from = small.size();
    put(small, static_cast<std::uint16_t>(s.name.size()));
    small += s.name;
    put(small, static_cast<std::uint64_t>(s.bytes.size()));
    put(small, hash64(s.bytes.data(), s.bytes.size()));
    if (s.bytes.size() < large) {
      small += s.bytes;
      add_small(from);
    } else {
      add_small(from);
      pieces.push_back({s.bytes.data(), 0, s.bytes.size()});
    }
  }
  // The trailer: the checksum of every byte before it.
  Hasher64 sealed;
  std::vector<std::string_view> views;
  for (const Piece& p : pieces) {
    views.emplace_back(p.data != nullptr ? p.data : small.data() + p.offset, p.size);
    sealed.update(views.back().data(), views.back().size());
  }
  std::string trailer;
  put(trailer, sealed.digest());
  views.emplace_back(trailer);
  AtomicFile file(path);
  file.write(views);
  file.commit();
}

void write_sections(const std::string& path, std::uint32_t format,
                    const std::vector<Section>& sections) {
  std::vector<SectionView> views;
  for (const Section& s : sections)
    views.push_back({s.name, s.bytes});
  write_sections(path, format, views);
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
