#include "dqntrader/data/bar_cache.hpp"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "dqntrader/core/error.hpp"
#include "dqntrader/core/hash.hpp"
#include "dqntrader/data/csv_reader.hpp"
#include "dqntrader/data/validate.hpp"
#include "dqntrader/io/atomic_file.hpp"
#include "dqntrader/io/framed_file.hpp"
#include "dqntrader/io/input_file.hpp"

namespace dqntrader::data {

namespace {

constexpr char magic[8] = {'D', 'Q', 'N', 'B', 'A', 'R', 'S', '\0'};
constexpr std::uint32_t version = 1;
enum Kind : std::uint8_t { int64_kind = 0, float64_kind = 1 };

struct ColumnRef {
  std::string name;
  Kind kind;
  const void* data;
};

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

}  // namespace

bool is_bar_cache_path(const std::string& path) {
  const std::string extension = ".dqnbars";
  return path.size() >= extension.size() &&
         path.compare(path.size() - extension.size(), extension.size(), extension) == 0;
}

void write_bar_cache(const std::string& path, const Bars& bars) {
  std::vector<ColumnRef> columns = {{"timestamp_ms", int64_kind, bars.timestamp_ms.data()},
                                    {"open", float64_kind, bars.open.data()},
                                    {"high", float64_kind, bars.high.data()},
                                    {"low", float64_kind, bars.low.data()},
                                    {"close", float64_kind, bars.close.data()}};
  if (bars.has_volume())
    columns.push_back({"volume", float64_kind, bars.volume.data()});
  if (bars.has_ofi())
    columns.push_back({"ofi", float64_kind, bars.ofi.data()});
  for (const NamedColumn& c : bars.extra)
    columns.push_back({c.name, float64_kind, c.values.data()});

  std::string header(magic, 8);
  io::put(header, version);
  io::put(header, static_cast<std::uint32_t>(columns.size()));
  io::put(header, static_cast<std::uint64_t>(bars.size()));
  for (const ColumnRef& c : columns) {
    io::put(header, static_cast<std::uint16_t>(c.name.size()));
    header += c.name;
    io::put(header, static_cast<std::uint8_t>(c.kind));
  }
  header.resize((header.size() + 7) / 8 * 8, '\0');

  Hasher64 hasher;
  io::AtomicFile file(path);
  file.write(header.data(), header.size());
  hasher.update(header.data(), header.size());
  const std::size_t column_bytes = bars.size() * 8;
  for (const ColumnRef& c : columns) {
    file.write(c.data, column_bytes);
    hasher.update(c.data, column_bytes);
  }
  const std::uint64_t checksum = hasher.digest();
  file.write(&checksum, sizeof checksum);
  file.commit();
}

Bars read_bar_cache(const std::string& path, const BarSelection& selection) {
  auto fail = [&](const std::string& what) -> void { throw InputError(path, 0, 0, what); };
  io::check_input_file(path);
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  if (!file)
    fail(std::string("cannot open: ") + std::strerror(errno));
  if (std::fseek(file.get(), 0, SEEK_END) != 0)
    fail("cannot seek");
  const long size_long = std::ftell(file.get());
  if (size_long < 0)
    fail("cannot tell the file size");
  const std::uint64_t file_size = static_cast<std::uint64_t>(size_long);
  std::rewind(file.get());

  Hasher64 hasher;
  std::uint64_t consumed = 0;
  auto read = [&](void* into, std::size_t bytes, const char* what) {
    if (consumed + bytes > file_size || std::fread(into, 1, bytes, file.get()) != bytes) {
      fail(std::string("truncated bar cache: the file ends inside ") + what);
    }
    hasher.update(into, bytes);
    consumed += bytes;
  };

  char got_magic[8];
  read(got_magic, 8, "the header");
  if (std::memcmp(got_magic, magic, 8) != 0)
    fail("not a dqntrader bar cache (bad magic bytes)");
  std::uint32_t got_version = 0, column_count = 0;
  std::uint64_t bar_count = 0;
  read(&got_version, 4, "the header");
  if (got_version != version) {
    fail("bar cache version " + std::to_string(got_version) +
         " is not supported (this build reads " + std::to_string(version) + ")");
  }
  read(&column_count, 4, "the header");
  read(&bar_count, 8, "the header");
  if (column_count < 5 || column_count > 4096)
    fail("corrupted bar cache: implausible column count");
  struct Column {
    std::string name;
    std::uint8_t kind;
  };
  std::vector<Column> columns(column_count);
  std::uint64_t header_bytes = 24;
  for (Column& c : columns) {
    std::uint16_t length = 0;
    read(&length, 2, "the column table");
    c.name.resize(length);
    read(c.name.data(), length, "the column table");
    read(&c.kind, 1, "the column table");
    header_bytes += 3 + length;
  }
  const std::uint64_t padding = (8 - header_bytes % 8) % 8;
  unsigned char pad[8];
  read(pad, padding, "the header padding");
  header_bytes += padding;
  if (bar_count > (file_size / 8) ||
      (file_size - header_bytes - 8) / 8 / column_count < bar_count) {
    fail("truncated bar cache: the header announces " + std::to_string(bar_count) +
         " bars, the file is too short for them");
  }
  const std::uint64_t expected = header_bytes + column_count * bar_count * 8 + 8;
  if (file_size != expected) {
    fail("bar cache size " + std::to_string(file_size) + " bytes differs from the " +
         std::to_string(expected) + " its header announces (truncated or appended to)");
  }
  const char* required[] = {"timestamp_ms", "open", "high", "low", "close"};
  for (int i = 0; i < 5; ++i) {
    if (columns[i].name != required[i] || columns[i].kind != (i == 0 ? int64_kind : float64_kind)) {
      fail(std::string("corrupted bar cache: column ") + std::to_string(i) + " should be '" +
           required[i] + "'");
    }
  }

  Bars bars;
  bars.source = path;
  const std::size_t n = static_cast<std::size_t>(bar_count);
  std::vector<double> skipped;
  for (std::size_t i = 0; i < columns.size(); ++i) {
    const std::string& name = columns[i].name;
    if (i == 0) {
      bars.timestamp_ms.resize(n);
      read(bars.timestamp_ms.data(), n * 8, "the data");
      continue;
    }
    if (columns[i].kind != float64_kind)
      fail("corrupted bar cache: column '" + name + "' has a bad kind");
    std::vector<double>* target = nullptr;
    if (name == "open")
      target = &bars.open;
    else if (name == "high")
      target = &bars.high;
    else if (name == "low")
      target = &bars.low;
    else if (name == "close")
      target = &bars.close;
    else if (name == "volume")
      target = &bars.volume;
    else if (name == "ofi")
      target = &bars.ofi;
    else if (selection.selects(name)) {
      bars.extra.push_back(NamedColumn{name, {}});
      target = &bars.extra.back().values;
    } else {
      target = &skipped;  // read (the checksum covers it) and drop
    }
    target->resize(n);
    read(target->data(), n * 8, "the data");
  }
  std::uint64_t stored = 0;
  const std::uint64_t computed = hasher.digest();
  if (std::fread(&stored, 1, 8, file.get()) != 8)
    fail("truncated bar cache: no checksum");
  if (stored != computed)
    fail("corrupted bar cache: checksum mismatch");
  for (const std::string& wanted : selection.names) {
    bool found = false;
    for (const NamedColumn& c : bars.extra)
      found = found || c.name == wanted;
    if (!found)
      fail("selected feature column '" + wanted + "' is not in the cache");
  }
  check_bars(bars);
  return bars;
}

Bars load_bars(const std::string& path, const BarSelection& selection) {
  return is_bar_cache_path(path) ? read_bar_cache(path, selection) : read_bars_csv(path, selection);
}

Panel load_panel(const std::string& path, const BarSelection& selection) {
  if (!is_bar_cache_path(path))
    return read_panel_csv(path, selection);
  Panel panel;
  panel.symbols.emplace_back();
  panel.instruments.push_back(read_bar_cache(path, selection));
  return panel;
}

}  // namespace dqntrader::data
