#include "train/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "util/atomic_file.h"
#include "util/error.h"

namespace ggtrain::train {

MetricsLog::MetricsLog(std::string run_dir, int64_t resume_step, bool write)
    : run_dir_(std::move(run_dir)), write_(write) {
  if (!write_) return;
  const std::string path = run_dir_ + "/metrics.jsonl";
  std::string kept;
  if (resume_step >= 0) {
    std::ifstream in(path);
    // Lines that are not a record with an integer step (a torn or edited
    // line) are dropped; NaN/Inf losses were written as null and are kept
    // in the file but not plotted.
    for (std::string line; std::getline(in, line);) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.is_object() || !j.contains("step") || !j["step"].is_number_integer() ||
          j["step"].get<int64_t>() > resume_step)
        continue;
      kept += line + "\n";
      const double step = j["step"].get<double>();
      if (j.contains("loss") && j["loss"].is_number()) train_.emplace_back(step, j["loss"].get<double>());
      if (j.contains("val_loss") && j["val_loss"].is_number())
        val_.emplace_back(step, j["val_loss"].get<double>());
    }
    write_file_atomic(path, kept.data(), kept.size());
  }
  out_.open(path, resume_step >= 0 ? std::ios::app : std::ios::trunc);
  if (!out_) fail("{}: cannot open for writing", path);
}

void MetricsLog::append(const nlohmann::json& record) {
  if (!write_) return;
  out_ << record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
  out_.flush();
  if (!out_) fail("{}/metrics.jsonl: cannot append a record (disk full?)", run_dir_);
}

void MetricsLog::log_step(const nlohmann::json& r) {
  append(r);
  const double loss = r.at("loss").is_number() ? r.at("loss").get<double>() : NAN;
  train_.emplace_back(r.at("step").get<double>(), loss);
}

void MetricsLog::log_eval(const nlohmann::json& r) {
  append(r);
  val_.emplace_back(r.at("step").get<double>(), r.at("val_loss").get<double>());
}

void MetricsLog::log_record(const nlohmann::json& r) { append(r); }

void MetricsLog::write_plot() const {
  if (!write_) return;
  const std::string svg = loss_svg(train_, val_, run_dir_ + ": training and validation loss");
  write_file_atomic(run_dir_ + "/loss.svg", svg.data(), svg.size());
}

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

std::string loss_svg(const std::vector<std::pair<double, double>>& train,
                     const std::vector<std::pair<double, double>>& val, const std::string& title) {
  const double W = 720, H = 420, L = 60, R = 20, T = 40, B = 50;
  double x0 = 0, x1 = 1, y0 = INFINITY, y1 = -INFINITY;
  for (const auto* s : {&train, &val})
    for (auto [x, y] : *s) {
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
  o << fmt::format(R"svg(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="sans-serif" font-size="12">)svg", W, H)
    << fmt::format(R"svg(<rect width="{}" height="{}" fill="white"/>)svg", W, H)
    << fmt::format(R"svg(<text x="{}" y="18" font-size="14" font-weight="bold" text-anchor="middle">{}</text>)svg",
                   W / 2, xml_text(title));
  for (double y : yt)
    o << fmt::format(R"svg(<line x1="{}" y1="{:.1f}" x2="{}" y2="{:.1f}" stroke="#ddd"/>)svg", L, py(y), W - R, py(y))
      << fmt::format(R"svg(<text x="{}" y="{:.1f}" text-anchor="end">{:g}</text>)svg", L - 5, py(y) + 4, y);
  for (double x : xt)
    o << fmt::format(R"svg(<text x="{:.1f}" y="{}" text-anchor="middle">{:g}</text>)svg", px(x), H - B + 18, x);
  o << fmt::format(R"svg(<text x="{}" y="{}" text-anchor="middle">step</text>)svg", (L + W - R) / 2, H - 12)
    << fmt::format(R"svg(<text x="15" y="{}" transform="rotate(-90 15 {})" text-anchor="middle">loss</text>)svg", H / 2, H / 2);
  auto polyline = [&](const std::vector<std::pair<double, double>>& s, const char* color) {
    if (s.empty()) return;
    o << R"svg(<polyline fill="none" stroke-width="1.5" stroke=")svg" << color << R"svg(" points=")svg";
    for (auto [x, y] : s)
      if (std::isfinite(y)) o << fmt::format("{:.1f},{:.1f} ", px(x), py(y));
    o << R"svg("/>)svg";
  };
  polyline(train, "#1f77b4");
  polyline(val, "#d62728");
  // Each validation loss also as a dot: a run with one evaluation has no line to draw.
  for (auto [x, y] : val)
    if (std::isfinite(y))
      o << fmt::format(R"svg(<circle cx="{:.1f}" cy="{:.1f}" r="4" fill="#d62728"/>)svg", px(x), py(y));
  o << fmt::format(R"svg(<text x="{}" y="{}" fill="#1f77b4">train loss</text>)svg", L + 10, T - 6)
    << fmt::format(R"svg(<text x="{}" y="{}" fill="#d62728">validation loss</text>)svg", L + 110, T - 6) << "</svg>\n";
  return o.str();
}

}  // namespace ggtrain::train
