// Markup for the report page: HTML escaping and the figures it draws, as inline SVG strings
// (a line plot, a horizontal bar chart and a stacked horizontal bar chart). Drawn here rather than by a JS library so the page is
// one file that opens without network access and renders the same in any browser.
//
// Every text given here (titles, labels, legend entries) may come from a log: it is escaped here.
// Coordinates are SVG user units (pixels at 100% zoom). Non-finite points are left out.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace mlpd {

// & < > " ' as entities: safe in element content and in quoted attribute values.
std::string html_escape(std::string_view text);

// Colour i of a palette of ten that stay apart on white (Tableau 10); wraps around.
const char* series_colour(size_t i);

// A number for an axis or a table: up to `digits` significant digits, no trailing zeros.
std::string short_number(double v, int digits = 4);

struct PlotPoint {
  double x = 0.0, y = 0.0;
};

struct PlotSeries {
  std::string label;      // legend entry
  std::string css_class;  // its polyline's class ("run-curve")
  std::string data_key;   // written as data-series="..." on its polyline (a run index)
  std::vector<PlotPoint> points;
  bool dashed = false;
};

// A dashed horizontal line across the plot (a quality target), with a legend entry.
struct PlotRule {
  double y = 0.0;
  std::string label;
  std::string css_class = "target";
};

struct LinePlot {
  std::string id, css_class;  // of the <svg>
  std::string title;          // its <title> (read by screen readers and as a tooltip)
  std::string x_label, y_label;
  bool log2_x = false;  // rank counts: ticks at the x values present, spaced by log2
  std::vector<PlotSeries> series;
  std::vector<PlotRule> rules;
  int width = 860, height = 340;
};
// One <polyline> per series (with a circle per point, so a one-point series shows), one dashed
// <line> per rule, axes with ticks, and a legend to the right.
std::string svg_line_plot(const LinePlot& plot);

struct Bar {
  std::string label;  // left of the bar
  double value = 0.0;
  std::string text;  // right of the bar: the value as the reader should see it
};

struct BarChart {
  std::string id, css_class, title;
  std::vector<Bar> bars;
  double max = 0.0;  // the full bar's value (0: the largest value)
  int width = 720;
};
// One <rect class="bar"> per bar, in the order given.
std::string svg_bar_chart(const BarChart& chart);

// Bars split into parts (a step's compute, comm, ...): part i of every bar has colour i.
struct StackedBar {
  std::string label;          // left of the bar
  std::vector<double> parts;  // by part; negative or non-finite parts are drawn as 0
  std::string text;           // right of the bar
};

struct StackedBarChart {
  std::string id, css_class, title;
  std::vector<std::string> part_labels;  // the legend, above the bars
  std::vector<StackedBar> bars;
  int width = 720;
};
// A legend row, then per bar one <g class="stacked-bar"> holding one <rect class="segment"
// data-part="i"> per part, each with a <title> (its label and value) for a tooltip. The longest
// bar's sum spans the full width.
std::string svg_stacked_bars(const StackedBarChart& chart);

}  // namespace mlpd
