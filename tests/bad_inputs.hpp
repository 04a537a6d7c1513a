// The corpus of malformed bar files: every case the loader must reject, with where and
// what its message must say. Shared by the loader's tests and the command's.
#pragma once

#include <string>
#include <vector>

namespace dqntrader::testing {

struct BadCase {
  const char* name;
  std::string content;
  int line, column;
  const char* message;  // a phrase the message must contain
};

inline std::vector<BadCase> bad_csv_corpus() {
  const std::string header = "timestamp,open,high,low,close\n";
  const std::string row1 = "2024-01-02,10,11,9,10\n";
  const std::string panel = "timestamp,symbol,open,high,low,close\n";
  const std::string long_number(100000, '7');
  return {
      BadCase{"empty", "", 1, 1, "empty file"},
      BadCase{"only_blank_lines", "\n\n  \n", 1, 1, "empty file"},
      BadCase{"header_only", header, 2, 1, "no data rows"},
      BadCase{"missing_close", "timestamp,open,high,low\n2024-01-02,1,1,1\n", 1, 1,
              "missing required column 'close'"},
      BadCase{"duplicated_column", "timestamp,open,high,low,close,open\n", 1, 31,
              "duplicated column 'open'"},
      BadCase{"ragged_short", header + row1 + "2024-01-03,10,11,9\n", 3, 19, "row has 4 fields"},
      BadCase{"ragged_long", header + row1 + "2024-01-03,10,11,9,10,7\n", 3, 23,
              "row has 6 fields"},
      BadCase{"unparsable_number", header + "2024-01-02,10,11,9,1O.5\n", 2, 20,
              "cannot parse '1O.5'"},
      BadCase{"empty_value", header + "2024-01-02,10,,9,10\n", 2, 15,
              "empty value in column 'high'"},
      BadCase{"nan", header + "2024-01-02,nan,11,9,10\n", 2, 12, "NaN in column 'open'"},
      BadCase{"infinity", header + "2024-01-02,10,inf,9,10\n", 2, 15,
              "infinite value in column 'high'"},
      BadCase{"overflows_float", header + "2024-01-02,10,1e39,9,10\n", 2, 15, "overflows float"},
      BadCase{"overflows_double", header + "2024-01-02,10,1e400,9,10\n", 2, 15, "out of range"},
      BadCase{"zero_price", header + "2024-01-02,10,11,0,10\n", 2, 18,
              "low price 0 is not positive"},
      BadCase{"negative_price", header + "2024-01-02,-1,11,9,10\n", 2, 12,
              "open price -1 is not positive"},
      BadCase{"high_below_low", header + "2024-01-02,10,9,11,10\n", 2, 15,
              "high 9 is below low 11"},
      BadCase{"open_outside", header + "2024-01-02,12,11,9,10\n", 2, 12, "open 12 lies outside"},
      BadCase{"close_outside", header + "2024-01-02,10,11,9,8\n", 2, 20, "close 8 lies outside"},
      BadCase{"duplicate_timestamp", header + row1 + row1, 3, 1, "duplicated timestamp"},
      BadCase{"decreasing_timestamp", header + row1 + "2024-01-01,10,11,9,10\n", 3, 1,
              "earlier than the previous"},
      BadCase{"bad_timestamp", header + "2024-01-32,10,11,9,10\n", 2, 1, "cannot parse timestamp"},
      BadCase{"after_year_9999", header + "999999999999999,10,11,9,10\n", 2, 1,
              "outside the years 0000 to 9999"},
      BadCase{"after_year_9999_by_its_zone", header + "9999-12-31T23:00:00-02:00,10,11,9,10\n", 2,
              1, "outside the years 0000 to 9999"},
      BadCase{"mixed_timestamps", header + row1 + "1704240000,10,11,9,10\n", 3, 1, "mixes forms"},
      BadCase{"binary_garbage",
              std::string("\x7f"
                          "ELF\x02\x01\x01\0\0\0",
                          10),
              1, 5, "binary data"},
      BadCase{"nul_in_row", header + std::string("2024-01-02,10,11,9,1\0", 21) + "0\n", 2, 21,
              "binary data"},
      BadCase{"bom_then_duplicate",
              "\xEF\xBB\xBF"
              "timestamp,open,open\n",
              1, 16, "duplicated column 'open'"},
      // Byte-order marks, CRLF line ends and very long lines are accepted in a good file;
      // in a bad one the problem is still found and located.
      BadCase{"bom_then_nan", "\xEF\xBB\xBF" + header + "2024-01-02,10,nan,9,10\n", 2, 15,
              "NaN in column 'high'"},
      BadCase{"crlf_ragged",
              "timestamp,open,high,low,close\r\n2024-01-02,10,11,9,10\r\n2024-01-03,10,11\r\n", 3,
              17, "row has 3 fields"},
      BadCase{"very_long_line", header + "2024-01-02,10,11,9," + long_number + "\n", 2, 20,
              "out of range"},
      // Files of several instruments (a symbol column): read without choosing one, each row
      // is the one instrument's, and a problem names the row's symbol.
      BadCase{"several_symbols_none_chosen",
              panel + "2024-01-02,AAA,10,11,9,10\n2024-01-02,BBB,10,11,9,10\n", 3, 12,
              "several instruments ('AAA' from line 2, 'BBB' here)"},
      BadCase{"empty_symbol", panel + "2024-01-02,,10,11,9,10\n", 2, 12, "empty symbol"},
      BadCase{"duplicate_timestamp_and_symbol",
              panel + "2024-01-02,AAA,10,11,9,10\n2024-01-03,AAA,10,11,9,10\n"
                      "2024-01-03,AAA,10,11,9,10\n",
              4, 1, "symbol 'AAA': duplicated timestamp"},
      BadCase{"symbol_out_of_order",
              panel + "2024-01-03,AAA,10,11,9,10\n2024-01-02,AAA,10,11,9,10\n", 3, 1,
              "symbol 'AAA': timestamp '2024-01-02' is earlier"},
      BadCase{"symbol_row_bad_price", panel + "2024-01-02,AAA,10,11,9,-1\n", 2, 24,
              "symbol 'AAA': "}};
}

}  // namespace dqntrader::testing
