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

void MetricsLog::write_plot() const {
  if (!write_) return;
  const std::string svg = loss_svg(train_, val_);
  write_file_atomic(run_dir_ + "/loss.svg", svg.data(), svg.size());
}

std::string loss_svg(const std::vector<std::pair<double, double>>& train,
                     const std::vector<std::pair<double, double>>& val) {
  const double W = 720, H = 420, L = 60, R = 20, T = 30, B = 50;
  double x0 = 0, x1 = 1, y0 = INFINITY, y1 = -INFINITY;
  for (const auto* s : {&train, &val})
    for (auto [x, y] : *s) {
      if (!std::isfinite(y)) continue;
      x1 = std::max(x1, x);
      y0 = std::min(y0, y);
      y1 = std::max(y1, y);
    }
  if (!std::isfinite(y0)) y0 = 0, y1 = 1;
  if (y1 - y0 < 1e-9) y1 = y0 + 1;
  auto px = [&](double x) { return L + (x - x0) / (x1 - x0) * (W - L - R); };
  auto py = [&](double y) { return H - B - (y - y0) / (y1 - y0) * (H - T - B); };
  std::ostringstream o;
  o << fmt::format(R"svg(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="sans-serif" font-size="12">)svg", W, H)
    << fmt::format(R"svg(<rect width="{}" height="{}" fill="white"/>)svg", W, H);
  for (int i = 0; i <= 5; ++i) {  // grid and axis labels
    double y = y0 + (y1 - y0) * i / 5, x = x0 + (x1 - x0) * i / 5;
    o << fmt::format(R"svg(<line x1="{}" y1="{:.1f}" x2="{}" y2="{:.1f}" stroke="#ddd"/>)svg", L, py(y), W - R, py(y))
      << fmt::format(R"svg(<text x="{}" y="{:.1f}" text-anchor="end">{:.3g}</text>)svg", L - 5, py(y) + 4, y)
      << fmt::format(R"svg(<text x="{:.1f}" y="{}" text-anchor="middle">{:.0f}</text>)svg", px(x), H - B + 18, x);
  }
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
  o << fmt::format(R"svg(<text x="{}" y="20" fill="#1f77b4">train loss</text>)svg", L + 10)
    << fmt::format(R"svg(<text x="{}" y="20" fill="#d62728">validation loss</text>)svg", L + 110) << "</svg>\n";
  return o.str();
}

}  // namespace ggtrain::train
