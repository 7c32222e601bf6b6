#pragma once
// An SVG line chart of series against step, with round tick values (1, 2
// or 5 times a power of ten, the axes from tick to tick) and a legend: the
// loss plot of a run and the metrics of `eval --run` over its checkpoints.
#include <string>
#include <utility>
#include <vector>

namespace ggtrain {

struct ChartSeries {
  std::string name;  // the legend's text
  std::string color;  // an SVG colour, e.g. "#1f77b4"
  std::vector<std::pair<double, double>> points;  // (step, value); non-finite values are left out
  bool dots = false;  // each point also as a dot (a series of one point has no line)
};

std::string line_chart_svg(const std::vector<ChartSeries>& series, const std::string& y_label,
                           const std::string& title);

}  // namespace ggtrain
