// A record of named numbers, as a checkpoint's section holds a struct: each field stored with
// its name, so that a struct that gains a field still reads the records written before (the
// field keeps the reader's default) and a record with a field its reader no longer has still
// reads (the field is skipped). A struct declares its fields once, as
//   template <class S, class F> void for_each_field(S& s, F&& f) { f("name", s.name); ... }
// (S const or not), and record() / read_record() write and read it through that.
//
// Layout: per field, u8 name length, the name, u8 kind ('i': int64, 'd': double), the 8 bytes
// of the value (little-endian; a double's bits), in the order of for_each_field.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "dqntrader/io/checkpoint_file.hpp"

namespace dqntrader::io {

/// Writes fields into a record.
class RecordWriter {
 public:
  void operator()(const std::string& name, std::int64_t value);
  void operator()(const std::string& name, double value);
  const std::string& bytes() const { return m_bytes; }

 private:
  std::string m_bytes;
};

/// Reads fields out of a record; InputError naming source and the section when it is
/// malformed, or holds a field of another kind than its reader's.
class RecordReader {
 public:
  RecordReader(const Section& section, const std::string& source);
  /// Sets value to the field called name; leaves it when the record has no such field.
  void operator()(const std::string& name, std::int64_t& value) const;
  void operator()(const std::string& name, double& value) const;

 private:
  const char* find(const std::string& name, char kind) const;
  const Section& m_section;
  std::string m_source;
};

/// The record of value, a struct with for_each_field (see above), as a section called name.
template <class T>
Section record(const std::string& name, const T& value) {
  RecordWriter w;
  for_each_field(value, w);
  return {name, w.bytes()};
}

/// The struct a section's record holds, its fields the record lacks at their defaults.
template <class T>
T read_record(const Section& section, const std::string& source) {
  T value{};
  const RecordReader r(section, source);
  for_each_field(value, r);
  return value;
}

}  // namespace dqntrader::io
