#include "dashboard/dashboard.h"

#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>

#include "dashboard/assets.h"
#include "dashboard/run_view.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace ggtrain::dashboard {

namespace {

nlohmann::json summary_json(const RunSummary& s) {
  nlohmann::json checkpoints = nlohmann::json::array();
  for (const Checkpoint& c : s.checkpoints)
    checkpoints.push_back({{"step", c.step}, {"bytes", c.bytes}, {"latest", c.latest}, {"best", c.best}});
  return {{"dir", s.dir},
          {"name", s.name},
          {"state", s.state},
          {"detail", s.detail},
          {"host", s.host},
          {"steps", s.steps},
          {"last_checkpoint", s.last_checkpoint},
          {"config_toml", s.config_toml},
          {"checkpoints", checkpoints}};
}

// JSON text that may sit inside a <script> element: "</" cannot end it.
std::string script_safe(std::string json) {
  for (size_t at = json.find("</"); at != std::string::npos; at = json.find("</", at + 3)) json.replace(at, 2, "<\\/");
  return json;
}

std::string dump(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

Response json_response(const nlohmann::json& j) { return {200, "application/json; charset=utf-8", dump(j)}; }

// A decimal query value in [0, limit); -1 when it is absent or not one.
int64_t index_in(const std::map<std::string, std::string>& q, const char* key, int64_t limit) {
  const auto it = q.find(key);
  if (it == q.end() || it->second.empty() || it->second.size() > 18) return -1;
  for (const char c : it->second)
    if (c < '0' || c > '9') return -1;
  const int64_t v = std::stoll(it->second);
  return v < limit ? v : -1;
}

// At most `max` records from byte `from` on, as a JSON array.
std::string records_array(const std::string& dir, int64_t from, int64_t max, int64_t* next, int64_t* skipped) {
  std::string out = "[";
  bool first = true;
  for (const std::string& r : read_records(dir, from, max, next, skipped)) {
    if (!first) out += ",";
    out += r;
    first = false;
  }
  return out + "]";
}

std::string now_text() {
  const std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S %Z", std::localtime(&t));
  return buf;
}

}  // namespace

std::string dashboard_page(const std::string& embedded_data_script) {
  std::string page(kDashboardHtml);
  auto put = [&](std::string_view mark, std::string_view text) {
    const size_t at = page.find(mark);
    if (at == std::string::npos) fail("dashboard: the page has no {}", mark);
    page.replace(at, mark.size(), text);
  };
  // The data first: the script's text could hold the other marks.
  put("/*GGTRAIN_DATA*/", embedded_data_script);
  put("/*GGTRAIN_STYLE*/", kDashboardCss);
  put("/*GGTRAIN_SCRIPT*/", kDashboardJs);
  return page;
}

Dashboard::Dashboard(std::vector<std::string> run_dirs) : dirs_(std::move(run_dirs)) {
  for (const std::string& d : dirs_) check_run_folder(d);
}

Response Dashboard::handle(const Request& r) const {
  if (r.path == "/" || r.path == "/index.html") return {200, "text/html; charset=utf-8", dashboard_page("")};
  if (r.path == "/api/runs") {
    nlohmann::json runs = nlohmann::json::array();
    for (const std::string& d : dirs_) runs.push_back(summary_json(read_run_summary(d)));
    return json_response({{"runs", runs}});
  }
  if (r.path == "/api/records") {
    const int64_t run = index_in(r.query, "run", int64_t(dirs_.size()));
    const int64_t from = index_in(r.query, "from", INT64_MAX);
    if (run < 0 || from < 0) return {400, "text/plain; charset=utf-8", "records: give run=INDEX&from=OFFSET\n"};
    int64_t next = from, skipped = 0;
    const std::string records = records_array(dirs_[size_t(run)], from, kMaxRecordsPerAnswer, &next, &skipped);
    return {200, "application/json; charset=utf-8",
            "{\"records\":" + records + ",\"next\":" + std::to_string(next) +
                ",\"skipped\":" + std::to_string(skipped) + "}"};
  }
  return {404, "text/plain; charset=utf-8", "not found\n"};
}

std::string report_html(const std::vector<std::string>& run_dirs) {
  nlohmann::json runs = nlohmann::json::array();
  std::string records = "[";
  for (size_t i = 0; i < run_dirs.size(); ++i) {
    check_run_folder(run_dirs[i]);
    runs.push_back(summary_json(read_run_summary(run_dirs[i])));
    int64_t next = 0, skipped = 0;
    // Every record: the report is the whole run.
    records += (i ? "," : "") + records_array(run_dirs[i], 0, INT64_MAX, &next, &skipped);
  }
  records += "]";
  const std::string data = "window.GGTRAIN_DATA = {\"written\": " + dump(now_text()) +
                           ", \"runs\": " + script_safe(dump(runs)) + ", \"records\": " + script_safe(records) + "};";
  return dashboard_page(data);
}

void write_run_report(const std::string& run_dir) {
  const std::string html = report_html({run_dir});
  write_file_atomic(run_dir + "/report.html", html.data(), html.size());
}

}  // namespace ggtrain::dashboard
