#include "dqntrader/data/timestamp.hpp"

#include <cstdio>

namespace dqntrader::data {

std::int64_t days_from_civil(std::int64_t year, unsigned month, unsigned day) {
  // Howard Hinnant's algorithm: shift the year to start in March so leap days come last.
  year -= month <= 2;
  const std::int64_t era = (year >= 0 ? year : year - 399) / 400;
  const unsigned year_of_era = static_cast<unsigned>(year - era * 400);
  const unsigned day_of_year = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1;
  const unsigned day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
  return era * 146097 + static_cast<std::int64_t>(day_of_era) - 719468;
}

namespace {

bool digits(std::string_view text, std::size_t at, std::size_t count, unsigned& value) {
  if (at + count > text.size())
    return false;
  value = 0;
  for (std::size_t i = at; i < at + count; ++i) {
    if (text[i] < '0' || text[i] > '9')
      return false;
    value = value * 10 + static_cast<unsigned>(text[i] - '0');
  }
  return true;
}

bool leap(unsigned year) {
  return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
}

unsigned days_in_month(unsigned year, unsigned month) {
  static const unsigned days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return month == 2 && leap(year) ? 29 : days[month - 1];
}

}  // namespace

std::optional<std::int64_t> parse_iso8601_ms(std::string_view text) {
  unsigned year, month, day;
  if (!digits(text, 0, 4, year) || text.size() < 10 || text[4] != '-' ||
      !digits(text, 5, 2, month) || text[7] != '-' || !digits(text, 8, 2, day)) {
    return std::nullopt;
  }
  if (month < 1 || month > 12 || day < 1 || day > days_in_month(year, month))
    return std::nullopt;
  unsigned hour = 0, minute = 0, second = 0, millis = 0;
  std::size_t at = 10;
  if (at < text.size() && (text[at] == 'T' || text[at] == ' ')) {
    if (!digits(text, at + 1, 2, hour) || at + 3 >= text.size() || text[at + 3] != ':' ||
        !digits(text, at + 4, 2, minute)) {
      return std::nullopt;
    }
    at += 6;
    if (at < text.size() && text[at] == ':') {
      if (!digits(text, at + 1, 2, second))
        return std::nullopt;
      at += 3;
      if (at < text.size() && (text[at] == '.' || text[at] == ',')) {
        std::size_t end = at + 1;
        unsigned scale = 100;
        while (end < text.size() && text[end] >= '0' && text[end] <= '9') {
          millis += static_cast<unsigned>(text[end] - '0') * scale;
          scale /= 10;
          ++end;
        }
        if (end == at + 1)
          return std::nullopt;
        at = end;
      }
    }
    if (hour > 23 || minute > 59 || second > 60)
      return std::nullopt;  // 60: a leap second
  }
  std::int64_t offset_minutes = 0;
  if (at < text.size()) {
    if (text[at] == 'Z' && at + 1 == text.size()) {
      at += 1;
    } else if (text[at] == '+' || text[at] == '-') {
      unsigned oh, om;
      if (!digits(text, at + 1, 2, oh) || at + 3 >= text.size() || text[at + 3] != ':' ||
          !digits(text, at + 4, 2, om) || at + 6 != text.size() || oh > 23 || om > 59) {
        return std::nullopt;
      }
      offset_minutes = (text[at] == '+' ? 1 : -1) * static_cast<std::int64_t>(oh * 60 + om);
      at += 6;
    } else {
      return std::nullopt;
    }
  }
  if (at != text.size())
    return std::nullopt;
  const std::int64_t seconds = days_from_civil(year, month, day) * 86400 + hour * 3600 +
                               minute * 60 + second - offset_minutes * 60;
  return seconds * 1000 + millis;
}

TimestampForm epoch_form(std::int64_t first) {
  return first >= 100000000000LL ? TimestampForm::epoch_milliseconds : TimestampForm::epoch_seconds;
}

std::optional<std::int64_t> epoch_ms(std::int64_t value, TimestampForm form) {
  if (form != TimestampForm::epoch_seconds)
    return value;
  std::int64_t ms = 0;
  if (__builtin_mul_overflow(value, std::int64_t{1000}, &ms))
    return std::nullopt;
  return ms;
}

std::string format_iso8601_ms(std::int64_t ms) {
  std::int64_t seconds = ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000);
  const std::int64_t millis = ms - seconds * 1000;
  std::int64_t days = seconds >= 0 ? seconds / 86400 : -((-seconds + 86399) / 86400);
  const std::int64_t second_of_day = seconds - days * 86400;
  // Inverse of days_from_civil.
  days += 719468;
  const std::int64_t era = (days >= 0 ? days : days - 146096) / 146097;
  const unsigned day_of_era = static_cast<unsigned>(days - era * 146097);
  const unsigned year_of_era =
      (day_of_era - day_of_era / 1460 + day_of_era / 36524 - day_of_era / 146096) / 365;
  const unsigned day_of_year =
      day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
  const unsigned mp = (5 * day_of_year + 2) / 153;
  const unsigned day = day_of_year - (153 * mp + 2) / 5 + 1;
  const unsigned month = mp < 10 ? mp + 3 : mp - 9;
  const std::int64_t year = static_cast<std::int64_t>(year_of_era) + era * 400 + (month <= 2);
  char buffer[128];  // room for any 64-bit values, which GCC checks for
  std::snprintf(buffer, sizeof buffer, "%04lld-%02u-%02uT%02lld:%02lld:%02lld.%03lldZ",
                static_cast<long long>(year), month, day,
                static_cast<long long>(second_of_day / 3600),
                static_cast<long long>(second_of_day / 60 % 60),
                static_cast<long long>(second_of_day % 60), static_cast<long long>(millis));
  return buffer;
}

}  // namespace dqntrader::data
