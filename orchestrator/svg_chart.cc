// Line charts as inline SVG (svg_chart.h). Numbers reach the markup through Num (coordinates), FormatTick
// (axis labels) and FormatValue, so that no "nan", "inf" or "1e+12" reaches a reader.
#include "orchestrator/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <limits>

#include "core/logging.h"

namespace tessel::orchestrator {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string Printf(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// SI prefixes from 1e-15 to 1e18, for exponents that are multiples of 3.
const char* SiPrefix(int exp3) {
  static constexpr const char* kPrefixes[] = {"f", "p", "n", "\u00b5", "m", "", "k", "M", "G", "T", "P", "E"};
  return kPrefixes[exp3 / 3 + 5];
}

// The exponent (a multiple of 3) to show `magnitude` with, or 0 to show it plainly: plain from 0.001 up to
// 9999, an SI prefix outside that (kilo and up, micro and down).
int SiExponent(double magnitude) {
  if (!(magnitude > 0) || !std::isfinite(magnitude) || (magnitude >= 1e-3 && magnitude < 1e4)) return 0;
  int e = static_cast<int>(std::floor(std::log10(magnitude) / 3)) * 3;
  if (e == -3) e = -6;  // 0.0005 reads better as 500µ than 0.5m
  return std::clamp(e, -15, 18);
}

// A tick label: as many decimals as the tick step needs, so that neighbouring labels differ.
std::string FormatTick(double v, double step, double magnitude) {
  if (v == 0) return "0";
  const int e = SiExponent(magnitude);
  const double scale = std::pow(10.0, e);
  const int decimals = std::clamp(static_cast<int>(std::ceil(-std::log10(step / scale) - 1e-9)), 0, 12);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v / scale);
  return std::string(buf) + SiPrefix(e);
}

struct Axis {
  double lo = 0, hi = 1, step = 0.5;
  std::vector<double> ticks;
};

// 1, 2 or 5 times a power of ten, the first at least `raw`.
double NiceStep(double raw) {
  if (!(raw > 0) || !std::isfinite(raw)) return 1;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * mag >= raw * (1 - 1e-12)) return m * mag;
  }
  return 10 * mag;
}

enum class AxisValues { kReal, kIntegers };

// About five ticks covering [min, max], at multiples of a nice step.
Axis MakeAxis(double min, double max, AxisValues values) {
  const bool integers = values == AxisValues::kIntegers;
  Axis a;
  if (!std::isfinite(min) || !std::isfinite(max) || min > max) {
    min = 0;
    max = 1;
  }
  if (!std::isfinite(max - min)) {  // from near -DBL_MAX to near DBL_MAX: no room for ticks beyond
    min = std::max(min, -1e307);
    max = std::min(max, 1e307);
  }
  if (min == max) {  // one value: put it in the middle, or at the foot of [0, 1] when it is 0
    if (integers) {
      min -= 1;
      max += 1;
    } else if (min == 0) {
      max = 1;
    } else {
      const double pad = std::fabs(min) * 0.5;
      min -= pad;
      max += pad;
    }
  }
  a.step = NiceStep((max - min) / 5);
  if (integers) a.step = std::max(1.0, std::round(a.step));
  a.lo = std::floor(min / a.step) * a.step;
  a.hi = std::ceil(max / a.step) * a.step;
  if (!std::isfinite(a.lo) || !std::isfinite(a.hi) || a.hi <= a.lo) {
    a.lo = min;
    a.hi = max > min ? max : min + 1;
    a.step = a.hi - a.lo;
  }
  const double n = std::round((a.hi - a.lo) / a.step);
  for (int i = 0; i <= std::min(n, 20.0); ++i) {
    double t = a.lo + i * a.step;
    if (std::fabs(t) < a.step * 1e-9) t = 0;
    a.ticks.push_back(t);
  }
  return a;
}

// Keeps a long series drawable: beyond `max_points`, each bucket of points is drawn as its lowest and
// highest value, so spikes stay visible.
std::vector<Point> Thin(const std::vector<Point>& points, size_t max_points) {
  if (points.size() <= max_points) return points;
  const size_t bucket = (points.size() + max_points / 2 - 1) / (max_points / 2);
  std::vector<Point> out;
  for (size_t b = 0; b < points.size(); b += bucket) {
    const size_t end = std::min(points.size(), b + bucket);
    size_t lo = end, hi = end;
    for (size_t i = b; i < end; ++i) {
      if (!std::isfinite(points[i].y)) continue;
      if (lo == end || points[i].y < points[lo].y) lo = i;
      if (hi == end || points[i].y > points[hi].y) hi = i;
    }
    if (lo == end) {
      out.push_back({points[b].x, kNaN});
    } else {
      out.push_back(points[std::min(lo, hi)]);
      if (lo != hi) out.push_back(points[std::max(lo, hi)]);
    }
  }
  return out;
}

std::string Num(double v) { return Printf("%.1f", v); }

// The chart's geometry, in SVG user units.
constexpr double kWidth = 1100, kLeft = 84, kRight = 24, kTop = 44, kPlotHeight = 260;
constexpr double kLegendRow = 20, kCharWidth = 6.6;

}  // namespace

const char* RankColor(size_t index) { return kPalette[index % std::size(kPalette)]; }

std::string Escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
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
      case '/':
        out += (i > 0 && (s[i - 1] == ':' || s[i - 1] == '/')) ? "&#47;" : "/";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string FormatValue(double v) {
  if (std::isnan(v)) return "\u2014";
  if (std::isinf(v)) return v > 0 ? "\u221e" : "-\u221e";
  const double a = std::fabs(v);
  if (a < 1e-15) return "0";  // below the smallest prefix (femto)
  if (a >= 99.95 && a < 1e6) return Printf("%.0f", v);
  if (a >= 1e-3 && a < 99.95) return Printf("%.3g", v);
  int e = std::clamp(static_cast<int>(std::floor(std::log10(a) / 3)) * 3, -15, 18);
  double mantissa = v / std::pow(10.0, e);
  if (std::fabs(mantissa) >= 999.5 && e < 18) {  // %.3g would write 1e+03
    e += 3;
    mantissa /= 1000;
  }
  return Printf(std::fabs(mantissa) < 999.5 ? "%.3g" : "%.0f", mantissa) + SiPrefix(e);
}

std::string RenderChart(const ChartSpec& spec) {
  double x_min = INFINITY, x_max = -INFINITY, y_min = INFINITY, y_max = -INFINITY;
  for (const Series& s : spec.series) {
    for (const Point& p : s.points) {
      if (!std::isfinite(p.y) || !std::isfinite(p.x)) continue;
      x_min = std::min(x_min, p.x);
      x_max = std::max(x_max, p.x);
      y_min = std::min(y_min, p.y);
      y_max = std::max(y_max, p.y);
    }
  }
  const bool empty = !std::isfinite(y_min);
  if (!empty && spec.y_range == YRange::kFromZero) {
    y_min = std::min(y_min, 0.0);
    y_max = std::max(y_max, 0.0);
  }
  const Axis xa = MakeAxis(x_min, x_max, AxisValues::kIntegers);
  const Axis ya = MakeAxis(y_min, y_max, AxisValues::kReal);
  const double plot_w = kWidth - kLeft - kRight, bottom = kTop + kPlotHeight;
  auto px = [&](double x) { return kLeft + (x - xa.lo) / (xa.hi - xa.lo) * plot_w; };
  auto py = [&](double y) { return bottom - (y - ya.lo) / (ya.hi - ya.lo) * kPlotHeight; };

  // The legend, wrapped into rows under the x axis title.
  struct Entry {
    const Series* s;
    double x, y;
  };
  std::vector<Entry> legend;
  double lx = kLeft, ly = bottom + 66;
  for (const Series& s : spec.series) {
    const double w = 34 + kCharWidth * static_cast<double>(s.label.size()) + 20;
    if (lx + w > kWidth - kRight && lx > kLeft) {
      lx = kLeft;
      ly += kLegendRow;
    }
    legend.push_back({&s, lx, ly});
    lx += w;
  }
  const double height = (legend.empty() ? bottom + 50 : ly + 14);

  std::string svg =
      StrCat("<svg class=\"chart\" data-chart=\"", Escape(spec.id), "\" viewBox=\"0 0 ", Num(kWidth), " ", Num(height),
             "\" width=\"", Num(kWidth), "\" height=\"", Num(height), "\" role=\"img\" aria-label=\"",
             Escape(spec.title), "\">\n<title>", Escape(spec.title), "</title>\n");
  svg += StrCat("<text class=\"chart-title\" x=\"", Num(kLeft), "\" y=\"26\">", Escape(spec.title), "</text>\n");
  // Grid, axes, ticks.
  svg += "<g class=\"grid\">";
  for (double t : ya.ticks) {
    svg += StrCat("<line x1=\"", Num(kLeft), "\" x2=\"", Num(kLeft + plot_w), "\" y1=\"", Num(py(t)), "\" y2=\"",
                  Num(py(t)), "\"/>");
  }
  svg += "</g>\n<g class=\"axis\">";
  svg += StrCat("<line x1=\"", Num(kLeft), "\" x2=\"", Num(kLeft), "\" y1=\"", Num(kTop), "\" y2=\"", Num(bottom),
                "\"/><line x1=\"", Num(kLeft), "\" x2=\"", Num(kLeft + plot_w), "\" y1=\"", Num(bottom), "\" y2=\"",
                Num(bottom), "\"/>");
  const double y_mag = std::max(std::fabs(ya.lo), std::fabs(ya.hi));
  for (double t : ya.ticks) {
    svg += StrCat("<line x1=\"", Num(kLeft - 5), "\" x2=\"", Num(kLeft), "\" y1=\"", Num(py(t)), "\" y2=\"", Num(py(t)),
                  "\"/><text class=\"tick\" x=\"", Num(kLeft - 8), "\" y=\"", Num(py(t) + 4), "\" text-anchor=\"end\">",
                  Escape(FormatTick(t, ya.step, y_mag)), "</text>");
  }
  const double x_mag = std::max(std::fabs(xa.lo), std::fabs(xa.hi));
  for (double t : xa.ticks) {
    svg += StrCat("<line x1=\"", Num(px(t)), "\" x2=\"", Num(px(t)), "\" y1=\"", Num(bottom), "\" y2=\"",
                  Num(bottom + 5), "\"/><text class=\"tick\" x=\"", Num(px(t)), "\" y=\"", Num(bottom + 19),
                  "\" text-anchor=\"middle\">", Escape(FormatTick(t, xa.step, x_mag)), "</text>");
  }
  svg += "</g>\n";
  svg += StrCat("<text class=\"axis-title\" x=\"", Num(kLeft + plot_w / 2), "\" y=\"", Num(bottom + 42),
                "\" text-anchor=\"middle\">", Escape(spec.x_title), "</text>\n");
  svg += StrCat("<text class=\"axis-title\" transform=\"translate(18,", Num(kTop + kPlotHeight / 2),
                ") rotate(-90)\" text-anchor=\"middle\">", Escape(spec.y_title), "</text>\n");
  if (empty) {
    svg += StrCat("<text class=\"no-data\" x=\"", Num(kLeft + plot_w / 2), "\" y=\"", Num(kTop + kPlotHeight / 2),
                  "\" text-anchor=\"middle\">no data</text>\n");
  }

  // The series: a path broken at gaps; a point with no neighbour is drawn as a dot.
  for (const Series& s : spec.series) {
    const std::vector<Point> points = Thin(s.points, 2000);
    svg += StrCat("<g class=\"series\" data-series=\"", Escape(s.label), "\">");
    std::string d, dots;
    const double r = s.stroke == Stroke::kDots ? 3.5 : std::max(2.0, s.width);
    auto dot = [&](const Point& p) {
      dots += StrCat("<circle cx=\"", Num(px(p.x)), "\" cy=\"", Num(py(p.y)), "\" r=\"", Num(r), "\" fill=\"", s.color,
                     "\"/>");
    };
    for (size_t i = 0; i < points.size(); ++i) {
      const Point& p = points[i];
      if (!std::isfinite(p.y)) continue;
      if (s.stroke == Stroke::kDots) {
        dot(p);
        continue;
      }
      const bool joined_before = i > 0 && std::isfinite(points[i - 1].y);
      const bool joined_after = i + 1 < points.size() && std::isfinite(points[i + 1].y);
      if (!joined_before && !joined_after) dot(p);
      d += StrCat(joined_before ? "L" : "M", Num(px(p.x)), " ", Num(py(p.y)));
    }
    if (!d.empty()) {
      svg +=
          StrCat("<path d=\"", d, "\" fill=\"none\" stroke=\"", s.color, "\" stroke-width=\"", Num(s.width),
                 "\" stroke-linejoin=\"round\"", s.stroke == Stroke::kDashed ? " stroke-dasharray=\"6 4\"" : "", "/>");
    }
    svg += dots + "</g>\n";
  }

  svg += "<g class=\"legend\">";
  for (const Entry& e : legend) {
    const Series& s = *e.s;
    if (s.stroke == Stroke::kDots) {
      svg += StrCat("<circle cx=\"", Num(e.x + 14), "\" cy=\"", Num(e.y - 4), "\" r=\"3.5\" fill=\"", s.color, "\"/>");
    } else {
      svg += StrCat("<line x1=\"", Num(e.x), "\" x2=\"", Num(e.x + 28), "\" y1=\"", Num(e.y - 4), "\" y2=\"",
                    Num(e.y - 4), "\" stroke=\"", s.color, "\" stroke-width=\"", Num(s.width), "\"",
                    s.stroke == Stroke::kDashed ? " stroke-dasharray=\"6 4\"" : "", "/>");
    }
    svg += StrCat("<text x=\"", Num(e.x + 34), "\" y=\"", Num(e.y), "\">", Escape(s.label), "</text>");
  }
  svg += "</g>\n</svg>\n";
  return svg;
}

}  // namespace tessel::orchestrator
