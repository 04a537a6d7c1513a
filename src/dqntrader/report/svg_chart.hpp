// Charts as inline SVG for the reports: line charts (one or more series, optional steps and
// gaps), scatter charts (series of points, on a numeric, log or categorical x axis) and
// histograms, each inside a <figure class="chart" id="chart-ID"> with a
// caption. The markup is plain SVG with CSS classes the report's style sheet colours; there
// is no script. Long series are thinned before drawing (thin()), so a million-bar window
// draws as a few thousand points with its extremes kept.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace dqntrader::report {

struct Axis {
  std::string label;
  bool time = false;  // values are UTC milliseconds; ticks print as dates
  bool log = false;   // a log10 axis; values <= 0 are left out
  // A categorical axis (x only): the values are indices into categories, one tick each.
  std::vector<std::string> categories = {};
};

struct Series {
  std::string name;                    // data-series attribute and legend label
  std::string colour;                  // CSS colour of the line
  std::vector<double> x = {}, y = {};  // equal lengths; a NaN y leaves a gap
  bool steps = false;                  // hold each value until the next x (positions)
  bool points = false;                 // a scatter: one circle.point per finite point, no line
};

struct LineChart {
  std::string id;     // figure id: "chart-" + id
  std::string title;  // caption
  Axis x, y;
  std::vector<Series> series;
  bool zero_line = false;  // draw y = 0 when it is in range
  bool legend = true;      // a key per series above the plot
};

struct Histogram {
  std::string id, title;
  Axis x;
  std::vector<double> values;   // non-finite values are left out
  std::vector<double> weights;  // how many each value counts (empty: one each)
  std::size_t bins = 40;
  std::string colour;
  std::string counted = "bars";  // what a bar's height counts (the y axis's label)
};

std::string render(const LineChart& chart);
std::string render(const Histogram& histogram);

/// The indices of the points to draw: all of them when there are at most 4 * buckets;
/// otherwise, per bucket of consecutive points, its first, smallest, largest and last
/// (finite) y, in order, and every NaN that starts a gap. The global extremes and both ends
/// are always kept.
std::vector<std::size_t> thin(const std::vector<double>& y, std::size_t buckets);

/// About count tick values covering [lo, hi], each 1, 2 or 5 times a power of ten apart.
std::vector<double> nice_ticks(double lo, double hi, std::size_t count);

/// Text with &, <, >, " and ' escaped for HTML.
std::string escape_html(const std::string& text);

}  // namespace dqntrader::report
