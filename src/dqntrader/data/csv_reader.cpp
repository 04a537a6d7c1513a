#include "dqntrader/data/csv_reader.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <sstream>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "dqntrader/core/error.hpp"
#include "dqntrader/data/timestamp.hpp"
#include "dqntrader/data/validate.hpp"
#include "dqntrader/io/atomic_file.hpp"
#include "dqntrader/io/input_file.hpp"

namespace dqntrader::data {

namespace {

struct Field {
  std::string_view text;
  std::size_t column;  // 1-based byte column in its line
};

std::string_view trim(std::string_view text, std::size_t& column) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) {
    text.remove_prefix(1);
    ++column;
  }
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t'))
    text.remove_suffix(1);
  if (text.size() >= 2 && text.front() == '"' && text.back() == '"') {
    text = text.substr(1, text.size() - 2);
    ++column;
  }
  return text;
}

void split(std::string_view line, std::vector<Field>& fields) {
  fields.clear();
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = line.find(',', start);
    const std::size_t end = comma == std::string_view::npos ? line.size() : comma;
    std::size_t column = start + 1;
    const std::string_view text = trim(line.substr(start, end - start), column);
    fields.push_back(Field{text, column});
    if (comma == std::string_view::npos)
      break;
    start = comma + 1;
  }
}

// Rejects binary content (a control character other than tab and carriage return) before
// trying to make sense of text as rows; line numbers count from first_line.
void check_text(std::string_view text, const std::string& source, std::size_t first_line) {
  std::size_t line = first_line, column = 1;
  for (char c : text) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u == '\n') {
      ++line;
      column = 1;
      continue;
    }
    if (u < 0x20 && u != '\t' && u != '\r') {
      std::ostringstream what;
      what << "binary data (byte 0x" << std::hex << static_cast<unsigned>(u)
           << "): not a CSV text file";
      throw InputError(source, line, column, what.str());
    }
    ++column;
  }
}

}  // namespace

class CsvBarParser::Impl {
 public:
  Impl(const std::string& source, const BarSelection& selection, bool every_symbol = false)
      : m_path(source), m_selection(selection), m_every(every_symbol && selection.symbol.empty()) {
    m_bars.source = source;
  }

  bool line(std::string_view line) {
    ++m_line;
    if (m_line == 1 && line.size() >= 3 && std::memcmp(line.data(), "\xEF\xBB\xBF", 3) == 0)
      line.remove_prefix(3);  // UTF-8 byte-order mark (invisible: columns count after it)
    check_text(line, m_path, m_line);
    if (!line.empty() && line.back() == '\r')
      line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos)
      return false;
    split(line, m_fields);
    if (!m_header_seen) {
      header(m_fields, m_line);
      m_header_seen = true;
      return false;
    }
    return row(m_fields, m_line, line.size());
  }

  void finish() const {
    if (!m_header_seen)
      fail(1, 1, "empty file: expected a header row naming the columns");
    if (m_bars.size() == 0 && m_symbol && !m_selection.symbol.empty()) {
      fail(
          m_line + 1, 1,
          "no rows of symbol '" + m_selection.symbol + "' (the file holds " + seen_symbols() + ")");
    }
    if ((panel() ? m_instruments.size() : m_bars.size()) == 0)
      fail(m_line + 1, 1, "no data rows after the header");
  }

  // A row's problem names its instrument when the file holds a symbol column.
  [[noreturn]] void fail(std::size_t line, std::size_t column, const std::string& what) const {
    throw InputError(m_path, line, column,
                     m_row_symbol.empty() ? what : "symbol '" + m_row_symbol + "': " + what);
  }

  // The symbols seen (the first few), for messages.
  std::string seen_symbols() const {
    std::string text;
    for (std::size_t i = 0; i < m_seen.size() && i < 8; ++i)
      text += (i > 0 ? ", '" : "'") + m_seen[i] + "'";
    if (m_seen.size() > 8)
      text += " and " + std::to_string(m_seen.size() - 8) + " more";
    return text.empty() ? "none" : text;
  }

  // Whether the row's instrument is read: the chosen symbol's rows alone; every instrument's
  // when the parser reads them all (m_row_index says which); without either, every row must be
  // of the first row's symbol.
  bool keeps(const Field& symbol, std::size_t line) {
    const std::string_view text = symbol.text;
    if (text.empty())
      fail(line, symbol.column, "empty symbol");
    const auto [at, added] = m_seen_index.emplace(std::string(text), m_seen.size());
    if (added) {
      m_seen.emplace_back(text);
      if (m_every) {
        Bars instrument;
        instrument.source = m_path + "[" + std::string(text) + "]";  // what messages name
        for (const NamedColumn& column : m_bars.extra)
          instrument.extra.push_back(NamedColumn{column.name, {}});
        m_instruments.push_back(std::move(instrument));
      }
    }
    if (m_every) {
      m_row_index = at->second;
      return true;
    }
    if (!m_selection.symbol.empty())
      return text == m_selection.symbol;
    if (m_seen.size() > 1) {
      fail(line, symbol.column,
           "the file holds several instruments ('" + m_seen.front() + "' from line " +
               std::to_string(m_first_symbol_line) + ", '" + std::string(text) +
               "' here): choose one with " + field("symbol"));
    }
    if (m_first_symbol_line == 0) {
      m_first_symbol_line = line;
      m_bars.source = m_path + "[" + std::string(text) + "]";  // what later messages name
    }
    return true;
  }

  // Whether every symbol's rows are read on their own: asked for, and the file has the column.
  bool panel() const { return m_every && m_symbol.has_value(); }
  // An instrument's bars: of a panel, each symbol's; else the one instrument's.
  Bars& instrument(std::size_t i) { return panel() ? m_instruments.at(i) : m_bars; }

  void header(const std::vector<Field>& fields, std::size_t line) {
    m_names.clear();
    for (const Field& f : fields) {
      const std::string name(f.text);
      if (name.empty())
        fail(line, f.column, "empty column name in the header");
      for (const std::string& seen : m_names) {
        if (seen == name)
          fail(line, f.column, "duplicated column '" + name + "'");
      }
      m_names.push_back(name);
    }
    auto find = [&](const char* name) -> std::optional<std::size_t> {
      for (std::size_t i = 0; i < m_names.size(); ++i) {
        if (m_names[i] == name)
          return i;
      }
      return std::nullopt;
    };
    for (const char* required : {"timestamp", "open", "high", "low", "close"}) {
      if (!find(required)) {
        std::string found;
        for (const std::string& n : m_names)
          found += (found.empty() ? "" : ", ") + n;
        fail(line, 1,
             std::string("missing required column '") + required + "' (the header has: " + found +
                 ")");
      }
    }
    m_timestamp = *find("timestamp");
    m_open = *find("open");
    m_high = *find("high");
    m_low = *find("low");
    m_close = *find("close");
    m_volume = find("volume");
    m_ofi = find("ofi");
    m_symbol = find("symbol");
    for (const std::string& wanted : m_selection.names) {
      if (!find(wanted.c_str())) {
        fail(line, 1, "selected feature column '" + wanted + "' is not in the header");
      }
    }
    for (std::size_t i = 0; i < m_names.size(); ++i) {
      const std::string& n = m_names[i];
      const bool known = n == "timestamp" || n == "open" || n == "high" || n == "low" ||
                         n == "close" || n == "volume" || n == "ofi" || n == "symbol";
      if (!known && m_selection.selects(n)) {
        if (!valid_utf8(n))
          fail(line, fields[i].column, "column name is not UTF-8 text: " + printable(n));
        m_extra_index.push_back(i);
        m_bars.extra.push_back(NamedColumn{n, {}});
      }
    }
    m_bars.source = m_path;
    if (m_symbol && !m_selection.symbol.empty())
      m_bars.source = m_path + "[" + m_selection.symbol + "]";  // what later messages name
  }

  double number(const Field& f, std::size_t line, std::size_t column_index) const {
    const std::string& name = m_names[column_index];
    if (f.text.empty())
      fail(line, f.column, "empty value in column '" + name + "'");
    double value = 0.0;
    const char* first = f.text.data();
    const char* last = first + f.text.size();
    if (*first == '+')
      ++first;  // from_chars takes no leading '+'
    const auto result = std::from_chars(first, last, value);
    if (result.ec == std::errc::result_out_of_range) {
      fail(line, f.column,
           "number '" + std::string(f.text) + "' in column '" + name + "' is out of range");
    }
    if (result.ec != std::errc() || result.ptr != last) {
      fail(line, f.column,
           "cannot parse '" + std::string(f.text) + "' as a number in column '" + name + "'");
    }
    if (std::isnan(value))
      fail(line, f.column, "NaN in column '" + name + "'");
    if (std::isinf(value))
      fail(line, f.column, "infinite value in column '" + name + "'");
    if (std::fabs(value) > std::numeric_limits<float>::max()) {
      fail(line, f.column,
           "number '" + std::string(f.text) + "' in column '" + name +
               "' overflows float (largest magnitude about 3.4e38)");
    }
    return value;
  }

  std::int64_t timestamp(const Field& f, std::size_t line) {
    const std::string_view text = f.text;
    if (text.empty())
      fail(line, f.column, "empty timestamp");
    const bool integer = text.find_first_not_of("0123456789") == std::string_view::npos;
    TimestampForm form;
    std::int64_t ms = 0;
    if (integer) {
      std::int64_t value = 0;
      const auto result = std::from_chars(text.data(), text.data() + text.size(), value);
      if (result.ec != std::errc())
        fail(line, f.column, "timestamp '" + std::string(text) + "' is out of range");
      form = epoch_form(value);
      if (m_form && *m_form != TimestampForm::iso8601)
        form = *m_form;  // the first row decides the unit
      const std::optional<std::int64_t> converted = epoch_ms(value, form);
      if (!converted)
        fail(line, f.column, "timestamp '" + std::string(text) + "' is out of range");
      ms = *converted;
    } else {
      const auto parsed = parse_iso8601_ms(text);
      if (!parsed) {
        fail(line, f.column,
             "cannot parse timestamp '" + std::string(text) +
                 "' (expected epoch seconds, epoch milliseconds or ISO-8601 "
                 "such as 2024-01-31T14:30:00Z)");
      }
      form = TimestampForm::iso8601;
      ms = *parsed;
    }
    if (!representable(ms)) {
      fail(line, f.column,
           "timestamp '" + std::string(text) + "' lies outside the years 0000 to 9999 (" +
               (form == TimestampForm::epoch_milliseconds ? "read as epoch milliseconds"
                : form == TimestampForm::epoch_seconds    ? "read as epoch seconds"
                                                          : "with its zone") +
               ")");
    }
    if (!m_form) {
      m_form = form;
    } else if ((*m_form == TimestampForm::iso8601) != (form == TimestampForm::iso8601)) {
      fail(line, f.column,
           "timestamp '" + std::string(text) + "' mixes forms: earlier rows use " +
               (*m_form == TimestampForm::iso8601 ? "ISO-8601" : "epoch numbers"));
    }
    return ms;
  }

  bool row(const std::vector<Field>& fields, std::size_t line, std::size_t line_length) {
    if (fields.size() != m_names.size()) {
      std::ostringstream what;
      what << "row has " << fields.size() << " fields, the header has " << m_names.size();
      const std::size_t column =
          fields.size() > m_names.size() ? fields[m_names.size()].column : line_length + 1;
      fail(line, column, what.str());
    }
    if (m_symbol) {
      if (!keeps(fields[*m_symbol], line))
        return false;
      m_row_symbol = fields[*m_symbol].text;
    }
    Bars& bars = instrument(m_row_index);  // the instrument the row adds to
    const std::int64_t ms = timestamp(fields[m_timestamp], line);
    if (!bars.timestamp_ms.empty() && ms <= bars.timestamp_ms.back()) {
      fail(line, fields[m_timestamp].column,
           ms == bars.timestamp_ms.back()
               ? "duplicated timestamp '" + std::string(fields[m_timestamp].text) + "'"
               : "timestamp '" + std::string(fields[m_timestamp].text) +
                     "' is earlier than the previous row's: timestamps must increase");
    }
    const double open = number(fields[m_open], line, m_open);
    const double high = number(fields[m_high], line, m_high);
    const double low = number(fields[m_low], line, m_low);
    const double close = number(fields[m_close], line, m_close);
    const BarCheck check = check_bar(open, high, low, close);
    if (check.problem != BarProblem::none) {
      const std::size_t index = check.column == BarColumn::open   ? m_open
                                : check.column == BarColumn::high ? m_high
                                : check.column == BarColumn::low  ? m_low
                                                                  : m_close;
      fail(line, fields[index].column, describe(check));
    }
    bars.timestamp_ms.push_back(ms);
    bars.open.push_back(open);
    bars.high.push_back(high);
    bars.low.push_back(low);
    bars.close.push_back(close);
    if (m_volume) {
      const double volume = number(fields[*m_volume], line, *m_volume);
      if (volume < 0.0)
        fail(line, fields[*m_volume].column, "negative volume");
      bars.volume.push_back(volume);
    }
    if (m_ofi)
      bars.ofi.push_back(number(fields[*m_ofi], line, *m_ofi));
    for (std::size_t e = 0; e < m_extra_index.size(); ++e) {
      bars.extra[e].values.push_back(number(fields[m_extra_index[e]], line, m_extra_index[e]));
    }
    m_row_symbol.clear();
    return true;
  }

  std::string m_path;
  BarSelection m_selection;
  std::size_t m_line = 0;
  bool m_header_seen = false;
  std::vector<Field> m_fields;
  std::vector<std::string> m_names;
  std::size_t m_timestamp = 0, m_open = 0, m_high = 0, m_low = 0, m_close = 0;
  std::optional<std::size_t> m_volume, m_ofi, m_symbol;
  std::vector<std::string> m_seen;  // the symbols seen, in their first rows' order
  std::unordered_map<std::string, std::size_t> m_seen_index;  // the same, to look a row's up
  std::size_t m_first_symbol_line = 0;
  std::string m_row_symbol;  // the symbol of the row being read (for messages)
  std::vector<std::size_t> m_extra_index;
  std::optional<TimestampForm> m_form;
  Bars m_bars;
  // Every instrument's bars, in m_seen's order, when the parser reads them all (m_every) from a
  // file with a symbol column; m_bars then holds only the header's columns.
  bool m_every = false;
  std::vector<Bars> m_instruments;
  std::size_t m_row_index = 0;
};

CsvBarParser::CsvBarParser(const std::string& source, const BarSelection& selection,
                           bool every_symbol)
    : m_impl(std::make_unique<Impl>(source, selection, every_symbol)) {}

CsvBarParser::~CsvBarParser() = default;

bool CsvBarParser::line(std::string_view text) {
  return m_impl->line(text);
}

void CsvBarParser::finish() const {
  m_impl->finish();
}

std::size_t CsvBarParser::instruments() const {
  return m_impl->panel() ? m_impl->m_instruments.size() : 1;
}

const Bars& CsvBarParser::bars(std::size_t instrument) const {
  return m_impl->instrument(instrument);
}

const std::string& CsvBarParser::symbol(std::size_t instrument) const {
  static const std::string none;
  return m_impl->panel() ? m_impl->m_seen.at(instrument) : none;
}

std::size_t CsvBarParser::last_instrument() const {
  return m_impl->m_row_index;  // 0 but in a panel
}

void CsvBarParser::keep_last(std::size_t count, std::size_t instrument) {
  Bars& bars = m_impl->instrument(instrument);
  if (bars.size() <= count)
    return;
  bars = last_bars(bars, count);
}

std::size_t CsvBarParser::lines() const {
  return m_impl->m_line;
}

namespace {

// Feeds a file to a parser a line at a time, then finishes it.
void parse_file(const std::string& path, CsvBarParser::Impl& parser) {
  const std::string content = io::read_file(path);
  const std::string_view text = content;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    if (end == std::string_view::npos)
      end = text.size();
    parser.line(text.substr(at, end - at));
    at = end + 1;
  }
  parser.finish();
}

}  // namespace

Bars read_bars_csv(const std::string& path, const BarSelection& selection) {
  CsvBarParser::Impl parser(path, selection);
  parse_file(path, parser);
  return std::move(parser.m_bars);
}

Panel read_panel_csv(const std::string& path, const BarSelection& selection) {
  CsvBarParser::Impl parser(path, selection, true);
  parse_file(path, parser);
  Panel panel;
  if (parser.panel()) {
    panel.symbols = std::move(parser.m_seen);
    panel.instruments = std::move(parser.m_instruments);
  } else {
    // One instrument: the chosen symbol, the file's one, or none (no symbol column).
    panel.symbols.push_back(
        parser.m_symbol ? (selection.symbol.empty() ? parser.m_seen.front() : selection.symbol)
                        : std::string());
    panel.instruments.push_back(std::move(parser.m_bars));
  }
  return panel;
}

void write_bars_csv(const std::string& path, const Bars& bars) {
  write_bars_csv(path, {bars}, {});
}

void write_bars_csv(const std::string& path, const std::vector<Bars>& instruments,
                    const std::vector<std::string>& symbols) {
  if (instruments.empty() || (!symbols.empty() && symbols.size() != instruments.size()))
    throw Error("write_bars_csv: a symbol for each instrument, or one instrument without");
  const Bars& first = instruments.front();
  std::ostringstream out;
  out.precision(17);
  out << "timestamp" << (symbols.empty() ? "" : ",symbol") << ",open,high,low,close";
  if (first.has_volume())
    out << ",volume";
  if (first.has_ofi())
    out << ",ofi";
  for (const NamedColumn& c : first.extra)
    out << "," << c.name;
  out << "\n";
  // The instruments' rows merged in time order (at one time, in the instruments' order).
  std::vector<std::size_t> next(instruments.size(), 0);
  for (;;) {
    std::size_t s = instruments.size();
    for (std::size_t k = 0; k < instruments.size(); ++k) {
      if (next[k] < instruments[k].size() &&
          (s == instruments.size() ||
           instruments[k].timestamp_ms[next[k]] < instruments[s].timestamp_ms[next[s]]))
        s = k;
    }
    if (s == instruments.size())
      break;
    const Bars& bars = instruments[s];
    const std::size_t i = next[s]++;
    out << format_iso8601_ms(bars.timestamp_ms[i]);
    if (!symbols.empty())
      out << "," << symbols[s];
    out << "," << bars.open[i] << "," << bars.high[i] << "," << bars.low[i] << "," << bars.close[i];
    if (bars.has_volume())
      out << "," << bars.volume[i];
    if (bars.has_ofi())
      out << "," << bars.ofi[i];
    for (const NamedColumn& c : bars.extra)
      out << "," << c.values[i];
    out << "\n";
  }
  io::write_file_atomically(path, out.str());
}

}  // namespace dqntrader::data
