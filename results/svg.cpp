#include "results/svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace mlpd {

namespace {

// Coordinates with one decimal: enough at screen resolution, and the page stays small.
std::string px(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// Tick positions over [lo, hi]: steps of 1, 2 or 5 times a power of ten, about `n` of them.
double nice_step(double lo, double hi, int n) {
  const double raw = (hi - lo) / n;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double f : {1.0, 2.0, 5.0})
    if (raw <= f * mag) return f * mag;
  return 10.0 * mag;
}

struct Range {
  double lo = 0.0, hi = 1.0;
  void widen_if_flat() {
    if (hi > lo) return;
    const double pad = lo == 0.0 ? 1.0 : std::abs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
};

// lo, lo + step, ... hi, counted rather than accumulated: a step below the precision of lo (hostile
// values near 1e17) must not loop forever. At most 50 ticks.
std::vector<double> ticks(const Range& r, double step) {
  std::vector<double> out;
  const double n = std::round((r.hi - r.lo) / step);
  if (!std::isfinite(n) || n < 0) return {r.lo, r.hi};
  for (int i = 0; i <= std::min(n, 50.0); ++i) out.push_back(r.lo + step * i);
  return out;
}

bool finite(const PlotPoint& p) { return std::isfinite(p.x) && std::isfinite(p.y); }

// Legend entry: a swatch (solid or dashed) and the escaped label.
std::string legend_entry(double x, double y, const char* colour, bool dashed, const std::string& label) {
  std::string s = "<line x1=\"" + px(x) + "\" y1=\"" + px(y - 4) + "\" x2=\"" + px(x + 22) + "\" y2=\"" + px(y - 4) +
                  "\" stroke=\"" + colour + "\" stroke-width=\"2\"" + (dashed ? " stroke-dasharray=\"6 4\"" : "") +
                  "/>";
  s += "<text x=\"" + px(x + 28) + "\" y=\"" + px(y) + "\">" + html_escape(label) + "</text>";
  return s;
}

}  // namespace

std::string html_escape(std::string_view text) {
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

const char* series_colour(size_t i) {
  static const char* kPalette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
                                   "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
  return kPalette[i % (sizeof kPalette / sizeof kPalette[0])];
}

std::string short_number(double v, int digits) {
  if (!std::isfinite(v)) return "-";
  if (std::abs(v) < 1e-12) v = 0.0;  // a tick computed as 1e-17 reads as 0
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

std::string svg_line_plot(const LinePlot& plot) {
  // Legend to the right of the plot area; the figure grows downwards when the legend is long.
  const double legend_w = 190.0, left = 64.0, top = 16.0, bottom = 48.0;
  const double plot_w = plot.width - left - legend_w - 16.0;
  const size_t entries = plot.series.size() + plot.rules.size();
  const double height = std::max<double>(plot.height, top + 18.0 * static_cast<double>(entries) + 16.0);
  const double plot_h = height - top - bottom;

  auto tx = [&](double x) { return plot.log2_x ? std::log2(x) : x; };
  Range xr{std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()};
  Range yr = xr;
  std::vector<double> xs;  // the x values present (log2 axes tick at these)
  for (const PlotSeries& s : plot.series)
    for (const PlotPoint& p : s.points) {
      if (!finite(p) || (plot.log2_x && p.x <= 0.0)) continue;
      xr.lo = std::min(xr.lo, tx(p.x));
      xr.hi = std::max(xr.hi, tx(p.x));
      yr.lo = std::min(yr.lo, p.y);
      yr.hi = std::max(yr.hi, p.y);
      xs.push_back(p.x);
    }
  for (const PlotRule& r : plot.rules)
    if (std::isfinite(r.y)) {
      yr.lo = std::min(yr.lo, r.y);
      yr.hi = std::max(yr.hi, r.y);
    }
  if (!std::isfinite(xr.lo)) xr = {0.0, 1.0};
  if (!std::isfinite(yr.lo)) yr = {0.0, 1.0};
  if (!plot.log2_x) xr.lo = std::min(xr.lo, 0.0);  // time axes start at the run's start
  xr.widen_if_flat();
  yr.widen_if_flat();
  const double ystep = nice_step(yr.lo, yr.hi, 5);
  yr.lo = std::floor(yr.lo / ystep) * ystep;
  yr.hi = std::ceil(yr.hi / ystep) * ystep;
  double xstep = 0.0;
  if (plot.log2_x) {
    const double pad = 0.25 * (xr.hi - xr.lo);
    xr.lo -= pad;
    xr.hi += pad;
  } else {
    xstep = nice_step(xr.lo, xr.hi, 6);
    xr.lo = std::floor(xr.lo / xstep) * xstep;
    xr.hi = std::ceil(xr.hi / xstep) * xstep;
  }
  auto X = [&](double x) { return left + (tx(x) - xr.lo) / (xr.hi - xr.lo) * plot_w; };
  auto Y = [&](double y) { return top + (yr.hi - y) / (yr.hi - yr.lo) * plot_h; };

  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"" + html_escape(plot.id) + "\" class=\"" +
                  html_escape(plot.css_class) + "\" width=\"" + std::to_string(plot.width) + "\" height=\"" +
                  px(height) + "\" viewBox=\"0 0 " + std::to_string(plot.width) + " " + px(height) +
                  "\" role=\"img\" font-family=\"sans-serif\" font-size=\"12\">";
  s += "<title>" + html_escape(plot.title) + "</title>";
  s += "<rect x=\"" + px(left) + "\" y=\"" + px(top) + "\" width=\"" + px(plot_w) + "\" height=\"" + px(plot_h) +
       "\" fill=\"#fff\" stroke=\"#888\"/>";
  // Grid and tick labels.
  for (double y : ticks(yr, ystep)) {
    s += "<line class=\"grid\" x1=\"" + px(left) + "\" x2=\"" + px(left + plot_w) + "\" y1=\"" + px(Y(y)) + "\" y2=\"" +
         px(Y(y)) + "\" stroke=\"#eee\"/>";
    s += "<text x=\"" + px(left - 6) + "\" y=\"" + px(Y(y) + 4) + "\" text-anchor=\"end\">" + short_number(y) +
         "</text>";
  }
  std::vector<double> xticks;
  if (plot.log2_x) {
    std::sort(xs.begin(), xs.end());
    xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
    xticks = xs;
  } else {
    xticks = ticks(xr, xstep);
  }
  for (double x : xticks) {
    s += "<line class=\"grid\" x1=\"" + px(X(x)) + "\" x2=\"" + px(X(x)) + "\" y1=\"" + px(top) + "\" y2=\"" +
         px(top + plot_h) + "\" stroke=\"#eee\"/>";
    s += "<text x=\"" + px(X(x)) + "\" y=\"" + px(top + plot_h + 16) + "\" text-anchor=\"middle\">" + short_number(x) +
         "</text>";
  }
  s += "<text x=\"" + px(left + plot_w / 2) + "\" y=\"" + px(height - 8) + "\" text-anchor=\"middle\">" +
       html_escape(plot.x_label) + "</text>";
  s += "<text transform=\"translate(14 " + px(top + plot_h / 2) + ") rotate(-90)\" text-anchor=\"middle\">" +
       html_escape(plot.y_label) + "</text>";

  double ly = top + 12.0;
  const double lx = left + plot_w + 14.0;
  for (const PlotRule& r : plot.rules) {
    if (!std::isfinite(r.y)) continue;
    s += "<line class=\"" + html_escape(r.css_class) + "\" x1=\"" + px(left) + "\" x2=\"" + px(left + plot_w) +
         "\" y1=\"" + px(Y(r.y)) + "\" y2=\"" + px(Y(r.y)) +
         "\" stroke=\"#333\" stroke-width=\"1.5\" stroke-dasharray=\"6 4\"/>";
    s += legend_entry(lx, ly, "#333", true, r.label);
    ly += 18.0;
  }
  for (size_t i = 0; i < plot.series.size(); ++i) {
    const PlotSeries& ser = plot.series[i];
    const char* colour = series_colour(i);
    std::string points, dots;
    for (const PlotPoint& p : ser.points) {
      if (!finite(p) || (plot.log2_x && p.x <= 0.0)) continue;
      points.append(points.empty() ? "" : " ").append(px(X(p.x))).append(",").append(px(Y(p.y)));
      dots += "<circle cx=\"" + px(X(p.x)) + "\" cy=\"" + px(Y(p.y)) + "\" r=\"3\" fill=\"" + colour + "\"/>";
    }
    s += "<polyline class=\"" + html_escape(ser.css_class) + "\" data-series=\"" + html_escape(ser.data_key) +
         "\" points=\"" + points + "\" fill=\"none\" stroke=\"" + colour + "\" stroke-width=\"2\"" +
         (ser.dashed ? " stroke-dasharray=\"6 4\"" : "") + "/>";
    s += dots;
    s += legend_entry(lx, ly, colour, ser.dashed, ser.label);
    ly += 18.0;
  }
  s += "</svg>";
  return s;
}

std::string svg_bar_chart(const BarChart& chart) {
  // Labels are right-aligned against the bars: room for the longest (about 7 px a character at
  // the page's font size), within half the chart.
  size_t longest = 0;
  for (const auto& b : chart.bars) longest = std::max(longest, b.label.size());
  const double label_w = std::clamp(7.0 * static_cast<double>(longest) + 16.0, 150.0, std::max(150.0, chart.width / 2.0));
  const double text_w = 150.0, row_h = 22.0, top = 6.0;
  const double bar_w = std::max(chart.width - label_w - text_w, 50.0);
  const double height = top * 2 + row_h * static_cast<double>(chart.bars.size());
  double max = chart.max;
  for (const Bar& b : chart.bars)
    if (std::isfinite(b.value)) max = std::max(max, b.value);
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"" + html_escape(chart.id) + "\" class=\"" +
                  html_escape(chart.css_class) + "\" width=\"" + std::to_string(chart.width) + "\" height=\"" +
                  px(height) + "\" viewBox=\"0 0 " + std::to_string(chart.width) + " " + px(height) +
                  "\" role=\"img\" font-family=\"sans-serif\" font-size=\"12\">";
  s += "<title>" + html_escape(chart.title) + "</title>";
  for (size_t i = 0; i < chart.bars.size(); ++i) {
    const Bar& b = chart.bars[i];
    const double y = top + row_h * static_cast<double>(i);
    const double w = (max > 0.0 && std::isfinite(b.value) && b.value > 0.0) ? b.value / max * bar_w : 0.0;
    s += "<text x=\"" + px(label_w - 8) + "\" y=\"" + px(y + 15) + "\" text-anchor=\"end\">" + html_escape(b.label) +
         "</text>";
    s += "<rect class=\"bar\" x=\"" + px(label_w) + "\" y=\"" + px(y + 3) + "\" width=\"" + px(w) + "\" height=\"" +
         px(row_h - 6) + "\" fill=\"" + series_colour(i) + "\"/>";
    s += "<text x=\"" + px(label_w + w + 6) + "\" y=\"" + px(y + 15) + "\">" + html_escape(b.text) + "</text>";
  }
  s += "</svg>";
  return s;
}

std::string svg_stacked_bars(const StackedBarChart& chart) {
  size_t longest = 0;
  for (const auto& b : chart.bars) longest = std::max(longest, b.label.size());
  const double label_w =
      std::clamp(7.0 * static_cast<double>(longest) + 16.0, 110.0, std::max(110.0, chart.width / 2.0));
  const double text_w = 150.0, row_h = 22.0, legend_h = 24.0, top = 6.0;
  const double bar_w = std::max(chart.width - label_w - text_w, 50.0);
  const double height = top * 2 + legend_h + row_h * static_cast<double>(chart.bars.size());
  auto part = [](double v) { return std::isfinite(v) && v > 0.0 ? v : 0.0; };
  double max = 0.0;
  for (const StackedBar& b : chart.bars) {
    double sum = 0.0;
    for (double v : b.parts) sum += part(v);
    if (std::isfinite(sum)) max = std::max(max, sum);
  }
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"" + html_escape(chart.id) + "\" class=\"" +
                  html_escape(chart.css_class) + "\" width=\"" + std::to_string(chart.width) + "\" height=\"" +
                  px(height) + "\" viewBox=\"0 0 " + std::to_string(chart.width) + " " + px(height) +
                  "\" role=\"img\" font-family=\"sans-serif\" font-size=\"12\">";
  s += "<title>" + html_escape(chart.title) + "</title>";
  // The legend: a swatch and a label per part, left to right (about 7 px a character).
  double lx = label_w;
  for (size_t i = 0; i < chart.part_labels.size(); ++i) {
    s += "<g class=\"legend\"><rect x=\"" + px(lx) + "\" y=\"" + px(top + 4) + "\" width=\"12\" height=\"12\" fill=\"" +
         series_colour(i) + "\"/><text x=\"" + px(lx + 16) + "\" y=\"" + px(top + 14) + "\">" +
         html_escape(chart.part_labels[i]) + "</text></g>";
    lx += 16.0 + 7.0 * static_cast<double>(chart.part_labels[i].size()) + 18.0;
  }
  for (size_t i = 0; i < chart.bars.size(); ++i) {
    const StackedBar& b = chart.bars[i];
    const double y = top + legend_h + row_h * static_cast<double>(i);
    s += "<g class=\"stacked-bar\"><text x=\"" + px(label_w - 8) + "\" y=\"" + px(y + 15) + "\" text-anchor=\"end\">" +
         html_escape(b.label) + "</text>";
    double x = label_w;
    for (size_t k = 0; k < b.parts.size(); ++k) {
      const double w = max > 0.0 ? part(b.parts[k]) / max * bar_w : 0.0;
      const std::string name = k < chart.part_labels.size() ? chart.part_labels[k] : "part " + std::to_string(k);
      s += "<rect class=\"segment\" data-part=\"" + std::to_string(k) + "\" x=\"" + px(x) + "\" y=\"" + px(y + 3) +
           "\" width=\"" + px(w) + "\" height=\"" + px(row_h - 6) + "\" fill=\"" + series_colour(k) + "\"><title>" +
           html_escape(name + ": " + short_number(b.parts[k])) + "</title></rect>";
      x += w;
    }
    s += "<text x=\"" + px(x + 6) + "\" y=\"" + px(y + 15) + "\">" + html_escape(b.text) + "</text></g>";
  }
  s += "</svg>";
  return s;
}

}  // namespace mlpd
