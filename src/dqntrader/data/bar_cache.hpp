// The binary bar cache (.dqnbars): what a CSV holds, stored so that loading is one read
// per column and a checksum pass, with no parsing.
//
// Layout (little-endian):
//   "DQNBARS\0"            8 bytes magic
//   u32 version            1 (one instrument) or 2 (several)
//   u32 column count C
//   u64 bar count N        (of version 2, every instrument's together)
//   C x { u16 name length, name bytes, u8 kind (0 = int64, 1 = float64) }
//   version 2 only: u32 instrument count S, then S x { u16 symbol length, symbol bytes,
//                   u64 the instrument's bars }
//   zero padding to a multiple of 8 bytes
//   C x N x 8 bytes        the columns, one after another, in header order (of version 2, each
//                          column the instruments' bars in the table's order)
//   u64 checksum           XXH64 (seed 0) of every byte before it
// Columns: timestamp_ms (int64), open, high, low, close, then volume and ofi when present,
// then the extra feature columns, all float64. One instrument is written as version 1.
#pragma once

#include <string>

#include "dqntrader/data/bars.hpp"

namespace dqntrader::data {

/// Writes bars atomically (temporary file, fsync, rename); throws Error on failure.
void write_bar_cache(const std::string& path, const Bars& bars);
/// Writes a panel's instruments (version 2; a panel of one as version 1, its symbol dropped).
/// InputError for instruments whose columns differ.
void write_bar_cache(const std::string& path, const Panel& panel);

/// Reads and verifies a cache: magic, version, sizes against the file size, the checksum,
/// then the bar invariants (each instrument's, named "path[symbol]"). A truncated, corrupted
/// or foreign file throws InputError. Extra columns the selection does not select are
/// dropped; of several instruments, selection.symbol's alone are read when given (InputError
/// naming those held when none is it); a cache of one is it whatever the symbol says.
Panel read_panel_cache(const std::string& path, const BarSelection& selection = {});

/// The one instrument of a cache (read_panel_cache): InputError for several and none chosen.
Bars read_bar_cache(const std::string& path, const BarSelection& selection = {});

/// True when the path names a bar cache (by its ".dqnbars" extension).
bool is_bar_cache_path(const std::string& path);

/// Loads a CSV or a cache, chosen by the extension.
Bars load_bars(const std::string& path, const BarSelection& selection = {});

/// Loads every instrument of a CSV file (read_panel_csv) or of a cache (read_panel_cache).
Panel load_panel(const std::string& path, const BarSelection& selection = {});

/// Loads the instruments of several files as one panel, in the files' order: each file's own,
/// a file of one instrument without a symbol named by its file name's stem ("data/AAPL.csv":
/// AAPL). InputError naming both files for a symbol two files hold, and for instruments whose
/// columns differ (volume, ofi, the selected extra columns). One path is load_panel(path); of
/// several, selection.symbol chooses one instrument of them all (the symbols held named when
/// none is it).
Panel load_panel(const std::vector<std::string>& paths, const BarSelection& selection = {});

}  // namespace dqntrader::data
