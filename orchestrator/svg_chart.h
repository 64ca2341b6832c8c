// Line charts as inline SVG, for the pages `tessel report` writes (orchestrator/report.h): a ChartSpec
// in (series of points by x, titles), one self-contained <svg> element out, with its axes (1-2-5 ticks,
// labelled with SI prefixes rather than exponents), grid, series and a legend wrapped under the plot. The
// SVG refers to nothing outside itself and carries no style of its own: the page's stylesheet styles the
// classes it uses (chart, chart-title, grid, axis, tick, axis-title, no-data, legend, series).
//
// Also here, because the chart needs them and the page shares them: Escape for any text written into
// the markup, FormatValue for numbers, and the palette that gives a rank the same colour in every chart.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::orchestrator {

struct Point {
  double x = 0, y = 0;  // y NaN or infinite: a gap
};

enum class Stroke { kSolid, kDashed, kDots };

// Every member has an initializer, so that a designated initializer may leave any of them out.
struct Series {
  std::string label = "";
  std::string color = "";  // any SVG colour; written as it is, so not from user input
  double width = 1.75;
  Stroke stroke = Stroke::kSolid;
  std::vector<Point> points = {};  // by x
};

enum class YRange { kData, kFromZero };

struct ChartSpec {
  std::string id = "", title = "", x_title = "", y_title = "";  // id: the svg's data-chart attribute
  YRange y_range = YRange::kFromZero;
  std::vector<Series> series = {};
};

// Readable on white; red is kept for stragglers.
inline constexpr const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b",
                                           "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
inline constexpr const char* kStragglerColor = "#d62728";

// The colour of the index-th rank (or series), the same in every chart; a straggler is red instead.
// Returns a string literal (static storage; the caller owns nothing). Any thread.
const char* RankColor(size_t index);

// The <svg> element of `spec`, newline-terminated (the caller owns the string). The x axis counts
// integers (steps), so each point's x must be finite. The y axis spans the finite y values, and 0 too
// when y_range is kFromZero; a NaN or infinite y is a gap that breaks the line. A series of more than
// 2000 points is thinned to each bucket's lowest and highest value, so spikes stay visible. Series are
// drawn in order (the last on top). Every label and title passes through Escape.
// Thread safety: any thread; it reads `spec` and nothing else.
// Failure: none. A chart with no finite point is drawn on default axes with "no data" across the plot;
// tick labels never show "nan", "inf" or an exponent.
std::string RenderChart(const ChartSpec& spec);

// `s` escaped for HTML and SVG text and attribute values. "://" is written as ":&#47;&#47;" (it reads
// the same), so that not even an error message makes the page contain something that looks like a URL.
// Returns a new string (the caller owns it). Any thread. Failure: none.
std::string Escape(std::string_view s);

// A value for a table or a header: whole numbers from 100 up to a million ("1234" ms reads better than
// "1.23k"), else three significant digits with an SI prefix (f to E) when large or tiny. Never an
// exponent: NaN is written as an em dash, an infinity as "∞" or "-∞". Returns a new string (the caller
// owns it). Any thread. Failure: none.
std::string FormatValue(double v);

}  // namespace tessel::orchestrator
