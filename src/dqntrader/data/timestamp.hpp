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

/// Days since 1970-01-01 of a proleptic Gregorian date.
std::int64_t days_from_civil(std::int64_t year, unsigned month, unsigned day);

}  // namespace dqntrader::data
