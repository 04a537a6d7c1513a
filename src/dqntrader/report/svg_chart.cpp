#include "dqntrader/report/svg_chart.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <sstream>

#include "dqntrader/data/timestamp.hpp"

namespace dqntrader::report {

namespace {

// The drawing area inside every chart's viewBox.
constexpr double width = 760, height = 250;
constexpr double left = 70, right = 16, top = 26, bottom = 34;
constexpr double plot_width = width - left - right, plot_height = height - top - bottom;
constexpr std::size_t thin_buckets = 1000;

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", value);
  return text;
}

std::string tick_label(double value, const Axis& axis, double span) {
  char text[40];
  if (!axis.categories.empty()) {
    const auto i = static_cast<std::size_t>(std::llround(value));
    return i < axis.categories.size() ? axis.categories[i] : std::string();
  }
  if (axis.time) {
    const std::string iso = data::format_iso8601_ms(static_cast<std::int64_t>(value));
    // Whole days apart: the date; less: the date and the minute.
    return span >= 4 * 86400000.0 ? iso.substr(0, 10) : iso.substr(0, 10) + " " + iso.substr(11, 5);
  }
  if (axis.log)
    value = std::pow(10.0, value);
  if (value == 0)
    return "0";
  std::snprintf(text, sizeof text, "%.4g", value);
  return text;
}

struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  void add(double v) {
    if (std::isfinite(v)) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  }
  bool empty() const { return !(lo <= hi); }
  // A flat or empty range widened so that it maps onto the plot.
  void settle() {
    if (empty()) {
      lo = 0;
      hi = 1;
    } else if (lo == hi) {
      const double pad = lo == 0 ? 1 : std::fabs(lo) * 0.05;
      lo -= pad;
      hi += pad;
    }
  }
};

struct Scale {
  Range x, y;
  double px(double v) const { return left + (v - x.lo) / (x.hi - x.lo) * plot_width; }
  double py(double v) const { return top + (y.hi - v) / (y.hi - y.lo) * plot_height; }
};

std::vector<double> time_ticks(double lo, double hi, std::size_t count) {
  std::vector<double> ticks;
  for (std::size_t i = 0; i < count; ++i)
    ticks.push_back(lo + (hi - lo) * static_cast<double>(i) / static_cast<double>(count - 1));
  return ticks;
}

// Frame, grid, ticks and axis labels; opens the <figure> and the <svg>.
void open_chart(std::ostringstream& out, const std::string& id, const std::string& title,
                const Scale& s, const Axis& x_axis, const Axis& y_axis) {
  out << "<figure class=\"chart\" id=\"chart-" << escape_html(id) << "\">\n<figcaption>"
      << escape_html(title) << "</figcaption>\n<svg viewBox=\"0 0 " << width << " " << height
      << "\" role=\"img\" aria-label=\"" << escape_html(title) << "\">\n";
  out << "<rect class=\"plot-area\" x=\"" << left << "\" y=\"" << top << "\" width=\"" << plot_width
      << "\" height=\"" << plot_height << "\"/>\n";
  const double x_span = s.x.hi - s.x.lo;
  std::vector<double> xt;
  if (!x_axis.categories.empty()) {
    for (std::size_t i = 0; i < x_axis.categories.size(); ++i)
      xt.push_back(static_cast<double>(i));
  } else {
    xt = x_axis.time ? time_ticks(s.x.lo, s.x.hi, 5) : nice_ticks(s.x.lo, s.x.hi, 6);
  }
  for (double t : xt) {
    if (t < s.x.lo - 1e-9 * x_span || t > s.x.hi + 1e-9 * x_span)
      continue;
    const double px = s.px(t);
    const std::string x = number(px);
    // A label at the right edge ends there rather than running past the picture.
    const char* anchor = px > left + plot_width - 40 ? "end" : "middle";
    out << "<line class=\"grid\" x1=\"" << x << "\" y1=\"" << top << "\" x2=\"" << x << "\" y2=\""
        << top + plot_height << "\"/><text class=\"tick\" x=\"" << x << "\" y=\""
        << top + plot_height + 14 << "\" text-anchor=\"" << anchor << "\">"
        << escape_html(tick_label(t, x_axis, x_span)) << "</text>\n";
  }
  const double y_span = s.y.hi - s.y.lo;
  for (double t : nice_ticks(s.y.lo, s.y.hi, 5)) {
    if (t < s.y.lo - 1e-9 * y_span || t > s.y.hi + 1e-9 * y_span)
      continue;
    const std::string y = number(s.py(t));
    out << "<line class=\"grid\" x1=\"" << left << "\" y1=\"" << y << "\" x2=\""
        << left + plot_width << "\" y2=\"" << y << "\"/><text class=\"tick\" x=\"" << left - 6
        << "\" y=\"" << y << "\" dy=\"0.32em\" text-anchor=\"end\">"
        << escape_html(tick_label(t, y_axis, y_span)) << "</text>\n";
  }
  out << "<text class=\"axis-label\" x=\"" << left + plot_width / 2 << "\" y=\"" << height - 4
      << "\" text-anchor=\"middle\">" << escape_html(x_axis.label) << "</text>\n"
      << "<text class=\"axis-label\" transform=\"translate(14 " << top + plot_height / 2
      << ") rotate(-90)\" text-anchor=\"middle\">" << escape_html(y_axis.label) << "</text>\n";
}

void no_data(std::ostringstream& out) {
  out << "<text class=\"no-data\" x=\"" << left + plot_width / 2 << "\" y=\""
      << top + plot_height / 2 << "\" text-anchor=\"middle\">no data</text>\n";
}

}  // namespace

std::string escape_html(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::vector<double> nice_ticks(double lo, double hi, std::size_t count) {
  std::vector<double> ticks;
  if (!(lo < hi) || !std::isfinite(lo) || !std::isfinite(hi) || count < 2)
    return ticks;
  const double raw = (hi - lo) / static_cast<double>(count - 1);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  // The first of 1, 2, 5, 10 (times the magnitude) not below raw; the one before it when
  // that leaves fewer than two ticks in the range (it is below raw, so it leaves two).
  const double steps[] = {0.5, 1.0, 2.0, 5.0, 10.0};
  std::size_t pick = 1;
  while (steps[pick] * magnitude < raw)
    ++pick;
  for (;; --pick) {
    const double step = steps[pick] * magnitude;
    ticks.clear();
    for (double k = std::ceil(lo / step); k * step <= hi + step * 1e-9; k += 1.0)
      ticks.push_back(std::fabs(k) < 0.5 ? 0.0 : k * step);
    if (ticks.size() >= 2 || pick == 0)
      break;
  }
  return ticks;
}

std::vector<std::size_t> thin(const std::vector<double>& y, std::size_t buckets) {
  std::vector<std::size_t> kept;
  const std::size_t n = y.size();
  if (n <= 4 * buckets || buckets == 0) {
    for (std::size_t i = 0; i < n; ++i)
      kept.push_back(i);
    return kept;
  }
  // One run of finite values inside one bucket: keep its first, extremes and last.
  std::vector<std::size_t> run;
  auto flush = [&] {
    if (run.empty())
      return;
    std::size_t lo = run.front(), hi = run.front();
    for (std::size_t i : run) {
      if (y[i] < y[lo])
        lo = i;
      if (y[i] > y[hi])
        hi = i;
    }
    std::vector<std::size_t> picks = {run.front(), lo, hi, run.back()};
    std::sort(picks.begin(), picks.end());
    picks.erase(std::unique(picks.begin(), picks.end()), picks.end());
    kept.insert(kept.end(), picks.begin(), picks.end());
    run.clear();
  };
  for (std::size_t b = 0; b < buckets; ++b) {
    const std::size_t begin = n * b / buckets, end = n * (b + 1) / buckets;
    for (std::size_t i = begin; i < end; ++i) {
      if (std::isfinite(y[i])) {
        run.push_back(i);
      } else {
        flush();
        if (kept.empty() || std::isfinite(y[kept.back()]))
          kept.push_back(i);
      }
    }
    flush();
  }
  return kept;
}

std::string render(const LineChart& given) {
  LineChart chart = given;
  const auto log10_or_nan = [](double v) {
    return v > 0 ? std::log10(v) : std::numeric_limits<double>::quiet_NaN();
  };
  for (Series& series : chart.series) {
    if (chart.y.log) {
      for (double& y : series.y)
        y = log10_or_nan(y);
    }
    if (chart.x.log) {
      // A point whose x has no logarithm is left out, as a NaN y leaves it out.
      for (std::size_t i = 0; i < series.x.size(); ++i) {
        series.x[i] = log10_or_nan(series.x[i]);
        if (!std::isfinite(series.x[i]))
          series.y[i] = std::numeric_limits<double>::quiet_NaN();
      }
    }
  }
  Scale s;
  for (const Series& series : chart.series) {
    for (std::size_t i = 0; i < series.x.size(); ++i) {
      if (std::isfinite(series.y[i])) {
        s.x.add(series.x[i]);
        s.y.add(series.y[i]);
      }
    }
  }
  const bool empty = s.y.empty();
  if (!chart.x.categories.empty()) {
    s.x.lo = -0.5;
    s.x.hi = static_cast<double>(chart.x.categories.size()) - 0.5;
  } else if (std::any_of(chart.series.begin(), chart.series.end(),
                         [](const Series& series) { return series.points; })) {
    // Points keep clear of the frame.
    s.x.settle();
    const double pad = 0.04 * (s.x.hi - s.x.lo);
    s.x.lo -= pad;
    s.x.hi += pad;
  }
  s.x.settle();
  s.y.settle();
  std::ostringstream out;
  open_chart(out, chart.id, chart.title, s, chart.x, chart.y);
  if (empty) {
    no_data(out);
  } else {
    if (chart.zero_line && s.y.lo < 0 && s.y.hi > 0) {
      const std::string y = number(s.py(0));
      out << "<line class=\"zero\" x1=\"" << left << "\" y1=\"" << y << "\" x2=\""
          << left + plot_width << "\" y2=\"" << y << "\"/>\n";
    }
    for (const Series& series : chart.series) {
      if (series.points) {
        for (std::size_t i = 0; i < series.x.size(); ++i) {
          if (!std::isfinite(series.y[i]))
            continue;
          out << "<circle class=\"point\" data-series=\"" << escape_html(series.name) << "\" cx=\""
              << number(s.px(series.x[i])) << "\" cy=\"" << number(s.py(series.y[i]))
              << "\" r=\"4\" fill=\"" << escape_html(series.colour) << "\"/>\n";
        }
        continue;
      }
      const std::vector<std::size_t> points = thin(series.y, thin_buckets);
      std::string d;
      bool pen_down = false;
      double last_y = 0;
      for (std::size_t i : points) {
        if (!std::isfinite(series.y[i])) {
          pen_down = false;
          continue;
        }
        const std::string x = number(s.px(series.x[i])), y = number(s.py(series.y[i]));
        if (!pen_down) {
          d += (d.empty() ? "M" : " M") + x + " " + y;
        } else {
          if (series.steps)
            d += " L" + x + " " + number(last_y);
          d += " L" + x + " " + y;
        }
        pen_down = true;
        last_y = s.py(series.y[i]);
      }
      if (d.empty())
        continue;
      out << "<path class=\"series\" data-series=\"" << escape_html(series.name)
          << "\" fill=\"none\" stroke=\"" << escape_html(series.colour) << "\" d=\"" << d
          << "\"/>\n";
    }
    // Legend, top left above the plot.
    double x = left;
    for (const Series& series : chart.legend ? chart.series : std::vector<Series>{}) {
      out << "<rect class=\"key\" x=\"" << x << "\" y=\"8\" width=\"14\" height=\"4\" fill=\""
          << escape_html(series.colour) << "\"/><text class=\"legend\" x=\"" << x + 18
          << "\" y=\"14\">" << escape_html(series.name) << "</text>\n";
      x += 30 + 7.0 * static_cast<double>(series.name.size());
    }
  }
  out << "</svg>\n</figure>\n";
  return out.str();
}

std::string render(const Histogram& h) {
  Range values;
  std::size_t finite = 0;
  for (double v : h.values) {
    if (std::isfinite(v)) {
      values.add(v);
      ++finite;
    }
  }
  const bool empty = finite == 0;
  values.settle();
  const std::size_t bins = std::max<std::size_t>(h.bins, 1);
  std::vector<double> counts(bins, 0.0);
  const double bin_width = (values.hi - values.lo) / static_cast<double>(bins);
  for (std::size_t i = 0; i < h.values.size(); ++i) {
    const double v = h.values[i];
    if (!std::isfinite(v))
      continue;
    const auto b = static_cast<std::size_t>((v - values.lo) / bin_width);
    counts[std::min(b, bins - 1)] += h.weights.empty() ? 1.0 : h.weights[i];
  }
  Scale s;
  s.x = values;
  s.y.lo = 0;
  s.y.hi = std::max(1.0, *std::max_element(counts.begin(), counts.end()));
  std::ostringstream out;
  open_chart(out, h.id, h.title, s, h.x, Axis{h.counted, false});
  if (empty) {
    no_data(out);
  } else {
    for (std::size_t b = 0; b < bins; ++b) {
      const double x0 = s.px(values.lo + bin_width * static_cast<double>(b));
      const double x1 = s.px(values.lo + bin_width * static_cast<double>(b + 1));
      const double y = s.py(counts[b]);
      out << "<rect class=\"bar\" data-count=\"" << static_cast<std::uint64_t>(counts[b])
          << "\" x=\"" << number(x0) << "\" y=\"" << number(y) << "\" width=\""
          << number(std::max(x1 - x0 - 1, 0.5)) << "\" height=\"" << number(top + plot_height - y)
          << "\" fill=\"" << escape_html(h.colour) << "\"/>\n";
    }
    if (values.lo < 0 && values.hi > 0) {
      const std::string x = number(s.px(0));
      out << "<line class=\"zero\" x1=\"" << x << "\" y1=\"" << top << "\" x2=\"" << x << "\" y2=\""
          << top + plot_height << "\"/>\n";
    }
  }
  out << "</svg>\n</figure>\n";
  return out.str();
}

}  // namespace dqntrader::report
