#include "util/line_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>

namespace ggtrain {

namespace {

// Axis ticks at round values (multiples of 1, 2 or 5 times a power of ten)
// from the last one at or below lo to the first one at or above hi, about
// `target` steps.
std::vector<double> nice_ticks(double lo, double hi, int target) {
  const double raw = (hi - lo) / target, power = std::pow(10.0, std::floor(std::log10(raw)));
  const double step = power * (raw / power < 1.5 ? 1 : raw / power < 3.5 ? 2 : raw / power < 7.5 ? 5 : 10);
  const int64_t first = int64_t(std::floor(lo / step + 1e-9)), last = int64_t(std::ceil(hi / step - 1e-9));
  std::vector<double> ticks;
  for (int64_t k = first; k <= last; ++k) ticks.push_back(double(k) * step);  // k * step: no drift from adding
  return ticks;
}

// Text inside an SVG element (a run folder may be named "a&b").
std::string xml_text(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '&') out += "&amp;";
    else if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else out += c;
  }
  return out;
}

}  // namespace

std::string line_chart_svg(const std::vector<ChartSeries>& series, const std::string& y_label,
                           const std::string& title) {
  const double W = 720, H = 420, L = 60, R = 20, T = 40, B = 50;
  double x0 = 0, x1 = 1, y0 = INFINITY, y1 = -INFINITY;
  for (const auto& s : series)
    for (auto [x, y] : s.points) {
      if (!std::isfinite(y)) continue;
      x1 = std::max(x1, x);
      y0 = std::min(y0, y);
      y1 = std::max(y1, y);
    }
  if (!std::isfinite(y0)) y0 = 0, y1 = 1;
  if (y1 - y0 < 1e-9) y0 -= 0.5, y1 += 0.5;
  const std::vector<double> yt = nice_ticks(y0, y1, 5), xt = nice_ticks(x0, x1, 6);
  y0 = yt.front(), y1 = yt.back(), x1 = xt.back();  // the axes run from tick to tick
  auto px = [&](double x) { return L + (x - x0) / (x1 - x0) * (W - L - R); };
  auto py = [&](double y) { return H - B - (y - y0) / (y1 - y0) * (H - T - B); };
  std::ostringstream o;
  o << fmt::format(
           R"svg(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="sans-serif" font-size="12">)svg",
           W, H)
    << fmt::format(R"svg(<rect width="{}" height="{}" fill="white"/>)svg", W, H)
    << fmt::format(R"svg(<text x="{}" y="18" font-size="14" font-weight="bold" text-anchor="middle">{}</text>)svg",
                   W / 2, xml_text(title));
  for (double y : yt)
    o << fmt::format(R"svg(<line x1="{}" y1="{:.1f}" x2="{}" y2="{:.1f}" stroke="#ddd"/>)svg", L, py(y), W - R, py(y))
      << fmt::format(R"svg(<text x="{}" y="{:.1f}" text-anchor="end">{:g}</text>)svg", L - 5, py(y) + 4, y);
  for (double x : xt)
    o << fmt::format(R"svg(<text x="{:.1f}" y="{}" text-anchor="middle">{:g}</text>)svg", px(x), H - B + 18, x);
  o << fmt::format(R"svg(<text x="{}" y="{}" text-anchor="middle">step</text>)svg", (L + W - R) / 2, H - 12)
    << fmt::format(R"svg(<text x="15" y="{}" transform="rotate(-90 15 {})" text-anchor="middle">{}</text>)svg", H / 2,
                   H / 2, xml_text(y_label));
  for (const auto& s : series) {
    if (s.points.empty()) continue;
    o << R"svg(<polyline fill="none" stroke-width="1.5" stroke=")svg" << s.color << R"svg(" points=")svg";
    for (auto [x, y] : s.points)
      if (std::isfinite(y)) o << fmt::format("{:.1f},{:.1f} ", px(x), py(y));
    o << R"svg("/>)svg";
  }
  for (const auto& s : series)
    if (s.dots)
      for (auto [x, y] : s.points)
        if (std::isfinite(y))
          o << fmt::format(R"svg(<circle cx="{:.1f}" cy="{:.1f}" r="4" fill="{}"/>)svg", px(x), py(y), s.color);
  for (size_t i = 0; i < series.size(); ++i)
    o << fmt::format(R"svg(<text x="{}" y="{}" fill="{}">{}</text>)svg", L + 10 + 100 * double(i), T - 6,
                     series[i].color, xml_text(series[i].name));
  o << "</svg>\n";
  return o.str();
}

}  // namespace ggtrain
