#include "dqntrader/io/record.hpp"

#include <cstring>

#include "dqntrader/core/error.hpp"

namespace dqntrader::io {

namespace {

void put(std::string& out, const std::string& name, char kind, const void* value) {
  if (name.empty() || name.size() > 255)
    throw Error("a record's field name is 1 to 255 bytes: '" + name + "'");
  out.push_back(static_cast<char>(name.size()));
  out += name;
  out.push_back(kind);
  out.append(static_cast<const char*>(value), 8);
}

}  // namespace

void RecordWriter::operator()(const std::string& name, std::int64_t value) {
  put(m_bytes, name, 'i', &value);
}

void RecordWriter::operator()(const std::string& name, double value) {
  put(m_bytes, name, 'd', &value);
}

RecordReader::RecordReader(const Section& section, const std::string& source)
    : m_section(section), m_source(source) {
  // Walks the record once: every field whole, of a known kind.
  const std::string& b = m_section.bytes;
  for (std::size_t at = 0; at < b.size();) {
    const std::size_t length = static_cast<unsigned char>(b[at]);
    if (length == 0 || b.size() - at < 1 + length + 1 + 8 ||
        (b[at + 1 + length] != 'i' && b[at + 1 + length] != 'd')) {
      throw InputError(m_source, 0, 0, "bad record in section '" + m_section.name + "'");
    }
    at += 1 + length + 1 + 8;
  }
}

const char* RecordReader::find(const std::string& name, char kind) const {
  const std::string& b = m_section.bytes;
  for (std::size_t at = 0; at < b.size();) {
    const std::size_t length = static_cast<unsigned char>(b[at]);
    if (b.compare(at + 1, length, name) == 0 && length == name.size()) {
      if (b[at + 1 + length] != kind) {
        throw InputError(m_source, 0, 0,
                         "section '" + m_section.name + "': field " + name + " is " +
                             (kind == 'i' ? "not a whole number" : "not a number"));
      }
      return b.data() + at + 1 + length + 1;
    }
    at += 1 + length + 1 + 8;
  }
  return nullptr;
}

void RecordReader::operator()(const std::string& name, std::int64_t& value) const {
  if (const char* p = find(name, 'i'))
    std::memcpy(&value, p, 8);
}

void RecordReader::operator()(const std::string& name, double& value) const {
  if (const char* p = find(name, 'd'))
    std::memcpy(&value, p, 8);
}

}  // namespace dqntrader::io
