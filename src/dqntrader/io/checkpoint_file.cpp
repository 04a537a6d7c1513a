#include "dqntrader/io/checkpoint_file.hpp"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>

#include "dqntrader/core/error.hpp"
#include "dqntrader/core/hash.hpp"
#include "dqntrader/io/atomic_file.hpp"
#include "dqntrader/io/input_file.hpp"

namespace dqntrader::io {

namespace {

constexpr char magic[8] = {'D', 'Q', 'N', 'C', 'K', 'P', 'T', '\0'};
constexpr std::uint32_t version = 1;

template <class T>
void put(std::string& out, const T& value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

}  // namespace

void write_sections(const std::string& path, const std::vector<Section>& sections) {
  std::string out(magic, 8);
  put(out, version);
  put(out, static_cast<std::uint32_t>(sections.size()));
  for (const Section& s : sections) {
    put(out, static_cast<std::uint16_t>(s.name.size()));
    out += s.name;
    put(out, static_cast<std::uint64_t>(s.bytes.size()));
    put(out, hash64(s.bytes.data(), s.bytes.size()));
    out += s.bytes;
  }
  put(out, hash64(out.data(), out.size()));
  write_file_atomically(path, out);
}

std::vector<Section> read_sections(const std::string& path) {
  auto fail = [&](const std::string& what) -> void { throw InputError(path, 0, 0, what); };
  const std::string bytes = read_file(path);
  if (bytes.size() < 24 || std::memcmp(bytes.data(), magic, 8) != 0)
    fail("not a dqntrader checkpoint");
  std::uint64_t stored = 0;
  std::memcpy(&stored, bytes.data() + bytes.size() - 8, 8);
  std::size_t at = 8;
  const std::size_t end = bytes.size() - 8;
  auto take = [&](void* into, std::size_t n, const char* what) {
    if (n > end - at)
      fail(std::string("truncated checkpoint: the file ends inside ") + what);
    std::memcpy(into, bytes.data() + at, n);
    at += n;
  };
  std::uint32_t got_version = 0, count = 0;
  take(&got_version, 4, "the header");
  if (got_version != version)
    fail("checkpoint version " + std::to_string(got_version) + " is not supported");
  take(&count, 4, "the header");
  std::vector<Section> sections;
  for (std::uint32_t i = 0; i < count; ++i) {
    std::uint16_t length = 0;
    take(&length, 2, "a section header");
    Section s;
    s.name.resize(length);
    take(s.name.data(), length, "a section header");
    std::uint64_t size = 0, checksum = 0;
    take(&size, 8, "a section header");
    take(&checksum, 8, "a section header");
    if (size > end - at)
      fail("truncated checkpoint: section '" + s.name + "' is cut short");
    s.bytes.assign(bytes.data() + at, size);
    at += size;
    if (hash64(s.bytes.data(), s.bytes.size()) != checksum) {
      fail("corrupted checkpoint: checksum mismatch in section '" + s.name + "'");
    }
    sections.push_back(std::move(s));
  }
  if (at != end)
    fail("corrupted checkpoint: trailing bytes");
  if (hash64(bytes.data(), end) != stored)
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
