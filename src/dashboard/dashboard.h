#pragma once
// The dashboard page over run folders: served live by `ggtrain serve`
// (the page polls /api/runs and /api/records) or written whole, data
// embedded, by `ggtrain report` and at the end of every run (report.html).
// The page's HTML, CSS and script are compiled into the binary.
#include <string>
#include <vector>

#include "dashboard/http_server.h"

namespace ggtrain::dashboard {

// The most records one /api/records answer holds (the page asks again).
constexpr int64_t kMaxRecordsPerAnswer = 20000;

class Dashboard {
 public:
  // Error naming the first folder that is not a run folder.
  explicit Dashboard(std::vector<std::string> run_dirs);

  // GET /                         the page
  // GET /api/runs                 {"runs": [summary...]}
  // GET /api/records?run=I&from=B {"records": [...], "next": B', "skipped": n}
  // Anything else: 404. No URL names a file: the run folders are known
  // by their index only.
  Response handle(const Request& r) const;

 private:
  std::vector<std::string> dirs_;
};

// The page with the runs' data in it, self-contained (report.html).
std::string report_html(const std::vector<std::string>& run_dirs);

// Writes RUN/report.html (atomically) for one run.
void write_run_report(const std::string& run_dir);

// The page itself (live: no data embedded).
std::string dashboard_page(const std::string& embedded_data_script);

}  // namespace ggtrain::dashboard
