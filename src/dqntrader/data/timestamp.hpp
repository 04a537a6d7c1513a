// Timestamps as UTC milliseconds since the epoch, parsed from the forms bar files use.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dqntrader::data {

/// How a file writes its timestamps; one file uses one form throughout.
enum class TimestampForm { epoch_seconds, epoch_milliseconds, iso8601 };

/// Parses "YYYY-MM-DD", optionally followed by 'T' or ' ' and "HH:MM", ":SS", ".fraction"
/// (milliseconds are kept), and a zone "Z" or "+HH:MM"/"-HH:MM" (no zone means UTC).
/// Returns nothing when text is not such a date or names an impossible one.
std::optional<std::int64_t> parse_iso8601_ms(std::string_view text);

/// "YYYY-MM-DDTHH:MM:SS.mmmZ".
std::string format_iso8601_ms(std::int64_t ms);

/// The times a bar may have: 0000-01-01T00:00:00.000Z .. 9999-12-31T23:59:59.999Z, the years
/// format_iso8601_ms writes in four digits and parse_iso8601_ms reads back.
constexpr std::int64_t kEarliestMs = -62167219200000LL;
constexpr std::int64_t kLatestMs = 253402300799999LL;
inline bool representable(std::int64_t ms) {
  return ms >= kEarliestMs && ms <= kLatestMs;
}

/// An epoch number's unit, by the first of a file's (or a column's) values: below 1e11 (the
/// year 5138 in seconds) seconds, from 1e11 on milliseconds.
TimestampForm epoch_form(std::int64_t first);

/// value in form (epoch seconds or milliseconds) as milliseconds; nothing when it overflows.
std::optional<std::int64_t> epoch_ms(std::int64_t value, TimestampForm form);

/// Days since 1970-01-01 of a proleptic Gregorian date.
std::int64_t days_from_civil(std::int64_t year, unsigned month, unsigned day);

}  // namespace dqntrader::data
