#include "dqntrader/data/bar_cache.hpp"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
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
constexpr std::uint32_t version = 1;        // one instrument
constexpr std::uint32_t panel_version = 2;  // several: a table of their symbols and bars
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

namespace {

// The columns an instrument holds beyond the required ones, for comparing and messages.
std::string column_set(const Bars& bars) {
  std::string text = bars.has_volume() ? "volume" : "";
  if (bars.has_ofi())
    text += std::string(text.empty() ? "" : ", ") + "ofi";
  for (const NamedColumn& c : bars.extra)
    text += (text.empty() ? "" : ", ") + c.name;
  return text.empty() ? "none beyond the prices" : text;
}

// The columns of an instrument, in the cache's order.
std::vector<ColumnRef> columns_of(const Bars& bars) {
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
  return columns;
}

// Version 1 holds one instrument (symbols empty); version 2 several, each column holding
// every instrument's bars in turn.
void write_cache(const std::string& path, const std::vector<const Bars*>& instruments,
                 const std::vector<std::string>& symbols) {
  const Bars& first = *instruments.front();
  std::uint64_t total = 0;
  for (const Bars* bars : instruments) {
    if (column_set(*bars) != column_set(first)) {
      throw InputError(bars->source + ": its columns (" + column_set(*bars) +
                       ") differ from those of " + first.source + " (" + column_set(first) +
                       "): the instruments of a cache hold the same columns");
    }
    total += bars->size();
  }
  std::vector<std::vector<ColumnRef>> columns;  // each instrument's
  for (const Bars* bars : instruments)
    columns.push_back(columns_of(*bars));
  std::string header(magic, 8);
  io::put(header, symbols.empty() ? version : panel_version);
  io::put(header, static_cast<std::uint32_t>(columns.front().size()));
  io::put(header, total);
  for (const ColumnRef& c : columns.front()) {
    io::put(header, static_cast<std::uint16_t>(c.name.size()));
    header += c.name;
    io::put(header, static_cast<std::uint8_t>(c.kind));
  }
  if (!symbols.empty()) {
    io::put(header, static_cast<std::uint32_t>(symbols.size()));
    for (std::size_t s = 0; s < symbols.size(); ++s) {
      io::put(header, static_cast<std::uint16_t>(symbols[s].size()));
      header += symbols[s];
      io::put(header, static_cast<std::uint64_t>(instruments[s]->size()));
    }
  }
  header.resize((header.size() + 7) / 8 * 8, '\0');

  Hasher64 hasher;
  io::AtomicFile file(path);
  file.write(header.data(), header.size());
  hasher.update(header.data(), header.size());
  for (std::size_t c = 0; c < columns.front().size(); ++c) {
    for (std::size_t i = 0; i < instruments.size(); ++i) {
      const std::size_t bytes = instruments[i]->size() * 8;
      file.write(columns[i][c].data, bytes);
      hasher.update(columns[i][c].data, bytes);
    }
  }
  const std::uint64_t checksum = hasher.digest();
  file.write(&checksum, sizeof checksum);
  file.commit();
}

}  // namespace

void write_bar_cache(const std::string& path, const Bars& bars) {
  write_cache(path, {&bars}, {});
}

void write_bar_cache(const std::string& path, const Panel& panel) {
  if (panel.size() == 1) {
    write_cache(path, {&panel.instruments.front()}, {});
    return;
  }
  std::vector<const Bars*> instruments;
  for (const Bars& bars : panel.instruments)
    instruments.push_back(&bars);
  write_cache(path, instruments, panel.symbols);
}

Panel read_panel_cache(const std::string& path, const BarSelection& selection) {
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
  if (got_version != version && got_version != panel_version) {
    fail("bar cache version " + std::to_string(got_version) +
         " is not supported (this build reads " + std::to_string(version) + " and " +
         std::to_string(panel_version) + ")");
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
  // Version 2: the instruments, each a symbol and its bars, in the columns' order.
  std::vector<std::string> symbols;
  std::vector<std::uint64_t> counts;
  if (got_version == panel_version) {
    std::uint32_t instruments = 0;
    read(&instruments, 4, "the instrument table");
    header_bytes += 4;
    if (instruments == 0 || instruments > bar_count)
      fail("corrupted bar cache: implausible instrument count");
    std::uint64_t sum = 0;
    for (std::uint32_t i = 0; i < instruments; ++i) {
      std::uint16_t length = 0;
      read(&length, 2, "the instrument table");
      std::string symbol(length, '\0');
      read(symbol.data(), length, "the instrument table");
      std::uint64_t count = 0;
      read(&count, 8, "the instrument table");
      header_bytes += 10 + length;
      if (symbol.empty() || count == 0 || count > bar_count - sum)
        fail("corrupted bar cache: instrument " + std::to_string(i + 1) + " of its table");
      sum += count;
      symbols.push_back(std::move(symbol));
      counts.push_back(count);
    }
    if (sum != bar_count)
      fail("corrupted bar cache: its instruments' bars do not add up to its bars");
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
  Panel panel;
  if (symbols.empty()) {
    check_bars(bars);
    panel.symbols.emplace_back();
    panel.instruments.push_back(std::move(bars));
    return panel;
  }
  std::size_t at = 0;
  for (std::size_t i = 0; i < symbols.size(); ++i) {
    const std::size_t count = static_cast<std::size_t>(counts[i]);
    if (selection.symbol.empty() || selection.symbol == symbols[i]) {
      Bars one = bars_between(bars, at, at + count);
      one.source = path + "[" + symbols[i] + "]";  // what later messages name
      check_bars(one);
      panel.symbols.push_back(symbols[i]);
      panel.instruments.push_back(std::move(one));
    }
    at += count;
  }
  if (panel.instruments.empty()) {
    std::string held;
    for (std::size_t i = 0; i < symbols.size() && i < 8; ++i)
      held += (i > 0 ? ", '" : "'") + symbols[i] + "'";
    fail("no instrument '" + selection.symbol + "' (the cache holds " + held +
         (symbols.size() > 8 ? " and " + std::to_string(symbols.size() - 8) + " more" : "") + ")");
  }
  return panel;
}

Bars read_bar_cache(const std::string& path, const BarSelection& selection) {
  Panel panel = read_panel_cache(path, selection);
  if (panel.size() > 1) {
    throw InputError(path, 0, 0,
                     "the cache holds several instruments ('" + panel.symbols[0] + "', '" +
                         panel.symbols[1] + "', ...): choose one with " + field("symbol"));
  }
  return std::move(panel.instruments.front());
}

Bars load_bars(const std::string& path, const BarSelection& selection) {
  return is_bar_cache_path(path) ? read_bar_cache(path, selection) : read_bars_csv(path, selection);
}

Panel load_panel(const std::string& path, const BarSelection& selection) {
  return is_bar_cache_path(path) ? read_panel_cache(path, selection)
                                 : read_panel_csv(path, selection);
}

Panel load_panel(const std::vector<std::string>& paths, const BarSelection& selection) {
  if (paths.size() == 1)
    return load_panel(paths.front(), selection);
  BarSelection every = selection;
  every.symbol.clear();
  Panel panel;
  std::vector<std::string> files;  // the file each instrument came from
  for (const std::string& path : paths) {
    Panel file = load_panel(path, every);
    for (std::size_t s = 0; s < file.size(); ++s) {
      std::string& symbol = file.symbols[s];
      if (symbol.empty())
        symbol = std::filesystem::path(path).stem().string();
      for (std::size_t t = 0; t < panel.size(); ++t) {
        if (panel.symbols[t] == symbol) {
          throw InputError(path + ": symbol '" + symbol + "' is " + files[t] +
                           "'s too: an instrument comes from one file");
        }
      }
      if (!panel.instruments.empty() &&
          column_set(file.instruments[s]) != column_set(panel.instruments.front())) {
        throw InputError(file.instruments[s].source + ": its columns (" +
                         column_set(file.instruments[s]) + ") differ from those of " +
                         panel.instruments.front().source + " (" +
                         column_set(panel.instruments.front()) +
                         "): the instruments of a universe hold the same columns");
      }
      panel.symbols.push_back(symbol);
      panel.instruments.push_back(std::move(file.instruments[s]));
      files.push_back(path);
    }
  }
  if (selection.symbol.empty())
    return panel;
  for (std::size_t s = 0; s < panel.size(); ++s) {
    if (panel.symbols[s] == selection.symbol) {
      Panel one;
      one.symbols.push_back(panel.symbols[s]);
      one.instruments.push_back(std::move(panel.instruments[s]));
      return one;
    }
  }
  std::string held;
  for (const std::string& symbol : panel.symbols)
    held += (held.empty() ? "'" : ", '") + symbol + "'";
  throw InputError(field("symbol") + " " + selection.symbol + ": no instrument of the files (" +
                   held + ") is it");
}

}  // namespace dqntrader::data
