// Timestamps, the CSV reader (good files and every kind of bad one), the binary cache, the
// checksum and the synthetic generator.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "bad_inputs.hpp"
#include "dqntrader/core/error.hpp"
#include "dqntrader/core/hash.hpp"
#include "dqntrader/data/bar_cache.hpp"
#include "dqntrader/data/csv_reader.hpp"
#include "dqntrader/data/synthetic.hpp"
#include "dqntrader/data/timestamp.hpp"
#include "dqntrader/data/validate.hpp"
#include "test_support.hpp"

namespace dqntrader {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    m_path = fs::temp_directory_path() / ("dqntrader-test-" + std::to_string(testing::test_seed()));
    fs::create_directories(m_path);
  }
  ~TempDir() { fs::remove_all(m_path); }
  std::string file(const std::string& name, const std::string& content) const {
    const std::string path = (m_path / name).string();
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }
  std::string path(const std::string& name) const { return (m_path / name).string(); }

 private:
  fs::path m_path;
};

// --- timestamps -----------------------------------------------------------------------------

TEST(Timestamp, Iso8601AgainstKnownInstants) {
  EXPECT_EQ(data::parse_iso8601_ms("1970-01-01").value(), 0);
  EXPECT_EQ(data::parse_iso8601_ms("2000-01-03T00:00:00Z").value(), 946857600000LL);
  EXPECT_EQ(data::parse_iso8601_ms("2024-02-29 13:45:30.250").value(), 1709214330250LL);
  EXPECT_EQ(data::parse_iso8601_ms("2024-02-29T15:45:30.250+02:00").value(), 1709214330250LL);
  EXPECT_EQ(data::parse_iso8601_ms("1969-12-31T23:59:59Z").value(), -1000);
  EXPECT_FALSE(data::parse_iso8601_ms("2023-02-29"));  // not a leap year
  EXPECT_FALSE(data::parse_iso8601_ms("2024-13-01"));
  EXPECT_FALSE(data::parse_iso8601_ms("2024-01-01T25:00"));
  EXPECT_FALSE(data::parse_iso8601_ms("2024-01-01 garbage"));
  EXPECT_FALSE(data::parse_iso8601_ms("yesterday"));
}

TEST(Timestamp, FormatInvertsParse) {
  std::mt19937_64 rng(testing::test_seed());
  std::uniform_int_distribution<long long> instant(-2000000000000LL, 4000000000000LL);
  for (int i = 0; i < 2000; ++i) {
    const long long ms = instant(rng);
    const std::string text = data::format_iso8601_ms(ms);
    ASSERT_EQ(data::parse_iso8601_ms(text).value(), ms) << text;
  }
}

// --- good CSV files -----------------------------------------------------------------------------

TEST(CsvReader, ReadsRequiredOptionalAndSelectedColumns) {
  TempDir dir;
  const std::string path = dir.file("good.csv",
                                    "\xEF\xBB\xBF"
                                    "timestamp,open,high,low,close,volume,ofi,f_a,f_b,note\r\n"
                                    "2024-01-02T00:00:00Z,10,11,9,10.5,100,0.5,1,2,3\r\n"
                                    "\r\n"
                                    "2024-01-03T00:00:00Z, 10.5 ,12,10,\"11\",200,-0.25,4,5,6\r\n");
  data::BarSelection selection;
  selection.prefixes = {"f_"};
  const data::Bars bars = data::read_bars_csv(path, selection);
  ASSERT_EQ(bars.size(), 2u);
  EXPECT_EQ(bars.timestamp_ms[1] - bars.timestamp_ms[0], 86400000);
  EXPECT_EQ(bars.open[1], 10.5);
  EXPECT_EQ(bars.close[1], 11.0);
  EXPECT_EQ(bars.volume[1], 200.0);
  EXPECT_EQ(bars.ofi[1], -0.25);
  ASSERT_EQ(bars.extra.size(), 2u);
  EXPECT_EQ(bars.extra[0].name, "f_a");
  EXPECT_EQ(bars.extra[1].values[1], 5.0);
}

TEST(CsvReader, EpochSecondsAndMilliseconds) {
  TempDir dir;
  const auto s = data::read_bars_csv(
      dir.file("s.csv", "timestamp,open,high,low,close\n1700000000,1,1,1,1\n1700000060,1,1,1,1\n"));
  EXPECT_EQ(s.timestamp_ms[1], 1700000060000LL);
  const auto ms = data::read_bars_csv(dir.file(
      "ms.csv", "timestamp,open,high,low,close\n1700000000000,1,1,1,1\n1700000000500,1,1,1,1\n"));
  EXPECT_EQ(ms.timestamp_ms[1], 1700000000500LL);
}

TEST(CsvReader, WriteThenReadGivesTheSameBars) {
  TempDir dir;
  data::SynthConfig config;
  config.bars = 300;
  config.seed = testing::test_seed();
  const data::Bars bars = data::generate_bars(config);
  data::write_bars_csv(dir.path("round.csv"), bars);
  const data::Bars back = data::read_bars_csv(dir.path("round.csv"));
  ASSERT_EQ(back.size(), bars.size());
  for (std::size_t i = 0; i < bars.size(); ++i) {
    ASSERT_EQ(back.close[i], bars.close[i]);  // 17 significant digits round-trip exactly
    ASSERT_EQ(back.ofi[i], bars.ofi[i]);
    ASSERT_EQ(back.timestamp_ms[i], bars.timestamp_ms[i]);
  }
}

// --- files of several instruments -----------------------------------------------------------

// A long file of two instruments on calendars of their own (BBB misses a day, AAA has one BBB
// lacks), rows interleaved by time: each symbol reads back its own rows alone, in order.
TEST(CsvReader, ReadsTheChosenInstrumentOfAFileOfSeveral) {
  TempDir dir;
  const std::string path = dir.file("panel.csv",
                                    "timestamp,open,high,low,close,symbol,ofi\n"
                                    "2024-01-02,10,11,9,10.5,AAA,0.1\n"
                                    "2024-01-02,20,21,19,20.5,BBB,0.2\n"
                                    "2024-01-03,10,11,9,10.25,AAA,0.3\n"
                                    "2024-01-04,10,11,9,10.75,AAA,0.4\n"
                                    "2024-01-04,20,21,19,20.25,BBB,0.5\n"
                                    "2024-01-05,20,21,19,20.75,BBB,0.6\n");
  data::BarSelection aaa;
  aaa.symbol = "AAA";
  const data::Bars a = data::read_bars_csv(path, aaa);
  EXPECT_EQ(a.close, (std::vector<double>{10.5, 10.25, 10.75}));
  EXPECT_EQ(a.ofi, (std::vector<double>{0.1, 0.3, 0.4}));
  EXPECT_TRUE(a.extra.empty()) << "the symbol column is not a feature";
  EXPECT_EQ(a.source, path + "[AAA]");  // what later messages name
  data::BarSelection bbb;
  bbb.symbol = "BBB";
  const data::Bars b = data::read_bars_csv(path, bbb);
  EXPECT_EQ(b.close, (std::vector<double>{20.5, 20.25, 20.75}));
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b.timestamp_ms[1] - b.timestamp_ms[0], 2 * 86400000);  // the day BBB lacks
  // A symbol the file does not hold names those it does.
  data::BarSelection other;
  other.symbol = "CCC";
  try {
    data::read_bars_csv(path, other);
    FAIL() << "read a symbol the file does not hold";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no rows of symbol 'CCC' (the file holds 'AAA', 'BBB')"),
              std::string::npos)
        << e.what();
  }
  // A file without a symbol column is its one instrument, whichever symbol is asked for.
  const std::string one = dir.file("one.csv",
                                   "timestamp,open,high,low,close\n"
                                   "2024-01-02,10,11,9,10.5\n");
  EXPECT_EQ(data::read_bars_csv(one, other).close, (std::vector<double>{10.5}));
  // A symbol that could not be one.
  for (const char* bad : {"A B", "A,B", "\"A\"", "A\tB"})
    EXPECT_THROW(data::check_symbol("symbol", bad), InputError) << bad;
  EXPECT_NO_THROW(data::check_symbol("symbol", "BRK.B"));
}

// Read whole, the same file is a panel of both instruments in the order their symbols first
// appear, each exactly the bars the symbol reads alone; a file of one instrument, or a chosen
// symbol, is a panel of one.
TEST(CsvReader, ReadsEveryInstrumentOfAFileAsAPanel) {
  TempDir dir;
  const std::string path = dir.file("panel.csv",
                                    "timestamp,symbol,open,high,low,close,extra1\n"
                                    "2024-01-02,BBB,20,21,19,20.5,1\n"
                                    "2024-01-02,AAA,10,11,9,10.5,2\n"
                                    "2024-01-03,AAA,10,11,9,10.25,3\n"
                                    "2024-01-04,BBB,20,21,19,20.25,4\n");
  data::BarSelection columns;
  columns.names = {"extra1"};
  const data::Panel panel = data::read_panel_csv(path, columns);
  ASSERT_EQ(panel.symbols, (std::vector<std::string>{"BBB", "AAA"}));
  ASSERT_EQ(panel.size(), 2u);
  for (std::size_t i = 0; i < panel.size(); ++i) {
    data::BarSelection choice = columns;
    choice.symbol = panel.symbols[i];
    const data::Bars alone = data::read_bars_csv(path, choice);
    EXPECT_EQ(data::fingerprint(panel.instruments[i]), data::fingerprint(alone))
        << panel.symbols[i];
    EXPECT_EQ(panel.instruments[i].timestamp_ms, alone.timestamp_ms) << panel.symbols[i];
    EXPECT_EQ(panel.instruments[i].source, alone.source);
  }
  EXPECT_EQ(panel.instruments[1].extra.at(0).values, (std::vector<double>{2, 3}));
  data::BarSelection aaa;
  aaa.symbol = "AAA";
  const data::Panel chosen = data::read_panel_csv(path, aaa);
  EXPECT_EQ(chosen.symbols, (std::vector<std::string>{"AAA"}));
  EXPECT_EQ(chosen.instruments.at(0).close, (std::vector<double>{10.5, 10.25}));
  const std::string one = dir.file("one.csv",
                                   "timestamp,open,high,low,close\n"
                                   "2024-01-02,10,11,9,10.5\n");
  const data::Panel single = data::read_panel_csv(one);
  EXPECT_EQ(single.symbols, (std::vector<std::string>{""}));
  EXPECT_EQ(data::fingerprint(single.instruments.at(0)),
            data::fingerprint(data::read_bars_csv(one)));
}

// A synthetic universe: one instrument is the market itself; several are written to one file
// and each reads back exactly; they share a common factor (their returns correlate, where two
// independent markets' do not), and the ofi signal is planted in the first half alone, falling
// in strength.
TEST(Synthetic, AUniverseSharesAFactorAndPlantsTheSignalInItsFirstHalf) {
  const std::uint64_t seed = testing::test_seed();
  SCOPED_TRACE(testing::seed_note(seed));
  data::SynthConfig config;
  config.bars = 20000;
  config.seed = seed;
  const data::Bars market = data::generate_bars(config);
  const data::SynthPanel alone = data::synth_panel(config);
  ASSERT_EQ(alone.bars.size(), 1u);
  EXPECT_EQ(alone.bars.front().close, market.close);
  EXPECT_EQ(alone.bars.front().ofi, market.ofi);
  config.symbols = 6;
  const data::SynthPanel panel = data::synth_panel(config);
  ASSERT_EQ(panel.symbols, (std::vector<std::string>{"S01", "S02", "S03", "S04", "S05", "S06"}));
  auto log_returns = [](const data::Bars& b) {
    std::vector<double> r;
    for (std::size_t t = 1; t < b.size(); ++t)
      r.push_back(std::log(b.close[t] / b.close[t - 1]));
    return r;
  };
  auto correlation = [](const std::vector<double>& x, const std::vector<double>& y) {
    const std::size_t n = std::min(x.size(), y.size());
    double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
    for (std::size_t t = 0; t < n; ++t) {
      sx += x[t];
      sy += y[t];
      sxx += x[t] * x[t];
      syy += y[t] * y[t];
      sxy += x[t] * y[t];
    }
    const double cov = sxy / n - sx / n * sy / n;
    return cov / std::sqrt((sxx / n - sx / n * sx / n) * (syy / n - sy / n * sy / n));
  };
  // The signal: corr(ofi(t), r(t+1)) per instrument.
  std::vector<double> signal;
  for (const data::Bars& b : panel.bars) {
    std::vector<double> ofi(b.ofi.begin(), b.ofi.end() - 1);
    signal.push_back(correlation(ofi, log_returns(b)));
  }
  EXPECT_EQ(panel.ofi_signal, (std::vector<double>{0.3, 0.2, 0.1, 0.0, 0.0, 0.0}));
  EXPECT_GT(signal[0], 0.1);
  EXPECT_GT(signal[0], signal[2]);
  for (std::size_t i = 3; i < 6; ++i)
    EXPECT_LT(std::fabs(signal[i]), 0.04) << panel.symbols[i];
  // The factor: every pair's returns correlate; two independent markets' do not.
  for (std::size_t i = 0; i + 1 < panel.bars.size(); ++i) {
    EXPECT_GT(correlation(log_returns(panel.bars[i]), log_returns(panel.bars[i + 1])), 0.05)
        << panel.symbols[i];
  }
  data::SynthConfig other = config;
  other.symbols = 1;
  other.seed = seed + 1;
  EXPECT_LT(std::fabs(correlation(log_returns(market), log_returns(data::generate_bars(other)))),
            0.04);
  // Written as one file, each instrument reads back exactly.
  TempDir dir;
  const std::string path = dir.path("universe.csv");
  data::write_bars_csv(path, panel.bars, panel.symbols);
  for (std::size_t i = 0; i < panel.bars.size(); ++i) {
    data::BarSelection choice;
    choice.symbol = panel.symbols[i];
    const data::Bars back = data::read_bars_csv(path, choice);
    EXPECT_EQ(back.close, panel.bars[i].close) << panel.symbols[i];
    EXPECT_EQ(back.ofi, panel.bars[i].ofi) << panel.symbols[i];
    EXPECT_EQ(back.timestamp_ms, panel.bars[i].timestamp_ms) << panel.symbols[i];
  }
}

// --- bad CSV files: every case names its file, line and column ------------------------------

class CsvRejects : public ::testing::TestWithParam<testing::BadCase> {
 protected:
  // read(path) refuses the case's file at its line and column, saying what.
  template <class Read>
  void expect_refused(const testing::BadCase& c, const std::string& path, Read&& read) {
    try {
      read(path);
      FAIL() << "accepted " << c.name;
    } catch (const InputError& e) {
      const std::string where =
          path + ":" + std::to_string(c.line) + ":" + std::to_string(c.column) + ": ";
      const std::string what = e.what();
      EXPECT_EQ(what.rfind(where, 0), 0u) << "message: " << what << "\nexpected prefix: " << where;
      EXPECT_NE(what.find(c.message), std::string::npos) << "message: " << what;
    }
  }
};

TEST_P(CsvRejects, WithFileLineAndColumn) {
  const testing::BadCase& c = GetParam();
  TempDir dir;
  const std::string path = dir.file(std::string(c.name) + ".csv", c.content);
  expect_refused(c, path, [](const std::string& p) { data::read_bars_csv(p); });
}

// Read as a panel, every bad file is refused at the same spot, but the file of several
// instruments, which a panel reads whole.
TEST_P(CsvRejects, AsAPanelToo) {
  const testing::BadCase& c = GetParam();
  TempDir dir;
  const std::string path = dir.file(std::string(c.name) + ".csv", c.content);
  if (std::string(c.name) == "several_symbols_none_chosen") {
    EXPECT_EQ(data::read_panel_csv(path).symbols, (std::vector<std::string>{"AAA", "BBB"}));
    return;
  }
  expect_refused(c, path, [](const std::string& p) { data::read_panel_csv(p); });
}

INSTANTIATE_TEST_SUITE_P(Corpus, CsvRejects, ::testing::ValuesIn(testing::bad_csv_corpus()),
                         [](const ::testing::TestParamInfo<testing::BadCase>& info) {
                           return std::string(info.param.name);
                         });

TEST(CsvReader, MissingFileIsAnInputError) {
  EXPECT_THROW(data::read_bars_csv("/nonexistent/dir/bars.csv"), InputError);
}

// --- the binary cache ----------------------------------------------------------------------------

TEST(Hash, MatchesXxHash64ReferenceValues) {
  EXPECT_EQ(hash64("", 0), 0xEF46DB3751D8E999ull);
  EXPECT_EQ(hash64("abc", 3), 0x44BC2CF5AD770999ull);
  // Incremental updates in odd pieces give the one-shot value.
  std::mt19937_64 rng(testing::test_seed());
  std::vector<unsigned char> bytes(1000);
  for (auto& b : bytes)
    b = static_cast<unsigned char>(rng());
  Hasher64 hasher;
  std::size_t at = 0;
  for (std::size_t piece : {1, 7, 31, 32, 33, 100, 296, 500}) {
    hasher.update(bytes.data() + at, piece);
    at += piece;
  }
  ASSERT_EQ(at, bytes.size());
  EXPECT_EQ(hasher.digest(), hash64(bytes.data(), bytes.size()));
}

TEST(BarCache, RoundTripsEveryColumn) {
  TempDir dir;
  data::SynthConfig config;
  config.bars = 1000;
  config.seed = testing::test_seed();
  data::Bars bars = data::generate_bars(config);
  bars.extra.push_back({"f_x", bars.volume});
  data::write_bar_cache(dir.path("b.dqnbars"), bars);
  data::BarSelection selection;
  selection.names = {"f_x"};
  const data::Bars back = data::read_bar_cache(dir.path("b.dqnbars"), selection);
  EXPECT_EQ(back.timestamp_ms, bars.timestamp_ms);
  EXPECT_EQ(back.open, bars.open);
  EXPECT_EQ(back.close, bars.close);
  EXPECT_EQ(back.volume, bars.volume);
  EXPECT_EQ(back.ofi, bars.ofi);
  ASSERT_EQ(back.extra.size(), 1u);
  EXPECT_EQ(back.extra[0].values, bars.volume);
  // Not selected: dropped.
  EXPECT_TRUE(data::read_bar_cache(dir.path("b.dqnbars")).extra.empty());
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void expect_cache_error(const std::string& path, const std::string& phrase,
                        const data::BarSelection& selection = {}) {
  try {
    data::read_bar_cache(path, selection);
    FAIL() << "accepted " << path;
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).rfind(path + ": ", 0), 0u) << e.what();
  }
}

TEST(BarCache, RejectsCorruptionTruncationAndForeignFiles) {
  TempDir dir;
  data::SynthConfig config;
  config.bars = 500;
  config.seed = testing::test_seed();
  data::write_bar_cache(dir.path("b.dqnbars"), data::generate_bars(config));
  const std::string good = read_all(dir.path("b.dqnbars"));
  std::mt19937_64 rng(config.seed);
  for (int trial = 0; trial < 20; ++trial) {
    std::string bad = good;
    const std::size_t at = 100 + rng() % (bad.size() - 108);  // somewhere in the data
    bad[at] = static_cast<char>(bad[at] ^ (1 << (rng() % 8)));
    expect_cache_error(dir.file("flipped.dqnbars", bad), "checksum mismatch");
  }
  expect_cache_error(dir.file("truncated.dqnbars", good.substr(0, good.size() - 1000)),
                     "truncated");
  expect_cache_error(dir.file("header_only.dqnbars", good.substr(0, 20)), "truncated");
  expect_cache_error(dir.file("appended.dqnbars", good + "x"), "appended");
  expect_cache_error(dir.file("foreign.dqnbars", "timestamp,open,high,low,close\n"), "bad magic");
}

// A universe's cache (version 2) holds each instrument as the CSV file does, on calendars of
// their own: read whole, by symbol, and not as one instrument unless chosen; a panel of one
// is the version 1 file byte for byte; a damaged one is refused as version 1 is.
TEST(BarCache, HoldsAUniverseAsItsCsvFileDoes) {
  TempDir dir;
  data::SynthConfig config;
  config.bars = 400;
  config.seed = testing::test_seed();
  config.symbols = 3;
  data::SynthPanel made = data::synth_panel(config);
  made.bars[1] = data::bars_between(made.bars[1], 50, 400);  // another calendar
  data::write_bars_csv(dir.path("u.csv"), made.bars, made.symbols);
  const data::Panel csv = data::read_panel_csv(dir.path("u.csv"));
  data::write_bar_cache(dir.path("u.dqnbars"), csv);
  const data::Panel cache = data::read_panel_cache(dir.path("u.dqnbars"));
  ASSERT_EQ(cache.symbols, csv.symbols);
  for (std::size_t i = 0; i < csv.size(); ++i) {
    EXPECT_EQ(data::fingerprint(cache.instruments[i]), data::fingerprint(csv.instruments[i]));
    EXPECT_EQ(cache.instruments[i].timestamp_ms, csv.instruments[i].timestamp_ms);
    EXPECT_EQ(cache.instruments[i].source, dir.path("u.dqnbars") + "[" + csv.symbols[i] + "]");
  }
  // S02 begins later: its symbol comes last.
  ASSERT_EQ(csv.symbols, (std::vector<std::string>{"S01", "S03", "S02"}));
  data::BarSelection s02;
  s02.symbol = "S02";
  EXPECT_EQ(data::read_bar_cache(dir.path("u.dqnbars"), s02).close, made.bars[1].close);
  s02.symbol = "S07";
  expect_cache_error(dir.path("u.dqnbars"),
                     "no instrument 'S07' (the cache holds 'S01', 'S03', 'S02')", s02);
  expect_cache_error(dir.path("u.dqnbars"), "holds several instruments ('S01', 'S03', ...)");
  // One instrument: version 1, as a cache of its bars.
  data::write_bar_cache(dir.path("one.dqnbars"), data::Panel{{"S01"}, {csv.instruments[0]}});
  data::write_bar_cache(dir.path("bars.dqnbars"), csv.instruments[0]);
  EXPECT_EQ(read_all(dir.path("one.dqnbars")), read_all(dir.path("bars.dqnbars")));
  const std::string good = read_all(dir.path("u.dqnbars"));
  std::mt19937_64 rng(config.seed);
  for (int trial = 0; trial < 10; ++trial) {
    std::string bad = good;
    const std::size_t at = 24 + rng() % (bad.size() - 32);  // the tables or the data
    bad[at] = static_cast<char>(bad[at] ^ (1 << (rng() % 8)));
    expect_cache_error(dir.file("flipped.dqnbars", bad), "");
  }
  expect_cache_error(dir.file("truncated.dqnbars", good.substr(0, good.size() - 100)), "truncated");
}

// --- synthetic data
// --------------------------------------------------------------------------------

TEST(Synthetic, SameSeedSameBarsAndEveryBarValid) {
  data::SynthConfig config;
  config.bars = 5000;
  config.seed = testing::test_seed();
  const data::Bars a = data::generate_bars(config), b = data::generate_bars(config);
  EXPECT_EQ(a.close, b.close);
  EXPECT_EQ(a.ofi, b.ofi);
  EXPECT_NO_THROW(data::check_bars(a));
  config.seed += 1;
  EXPECT_NE(data::generate_bars(config).close, a.close);
}

// The planted signal: ofi(t) correlates with the next bar's log return. With rho = 0.3
// the sample correlation over 20,000 bars has a standard error of about 0.007; jumps and
// regime-dependent volatility dilute it to roughly 0.2. It must be clearly there, and
// absent with rho = 0.
TEST(Synthetic, OfiPredictsTheNextReturn) {
  auto correlation = [](double rho, std::uint64_t seed) {
    data::SynthConfig config;
    config.bars = 20000;
    config.seed = seed;
    config.ofi_signal = rho;
    const data::Bars bars = data::generate_bars(config);
    double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
    const std::size_t n = bars.size() - 1;
    for (std::size_t t = 0; t < n; ++t) {
      const double x = bars.ofi[t], y = std::log(bars.close[t + 1] / bars.close[t]);
      sx += x;
      sy += y;
      sxx += x * x;
      syy += y * y;
      sxy += x * y;
    }
    const double cov = sxy / n - sx / n * sy / n;
    return cov / std::sqrt((sxx / n - sx / n * sx / n) * (syy / n - sy / n * sy / n));
  };
  const std::uint64_t seed = testing::test_seed();
  SCOPED_TRACE(testing::seed_note(seed));
  EXPECT_GT(correlation(0.3, seed), 0.1);
  EXPECT_LT(std::fabs(correlation(0.0, seed)), 0.04);
}

}  // namespace
}  // namespace dqntrader
