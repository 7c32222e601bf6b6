// dashboard/: a run folder's state and records as a watcher reads them
// (run_view), and the server of `ggtrain serve` against hostile requests
// (http_server, dashboard): nothing outside the run folders is served, no
// request crashes it, and a folder that disappears reads as missing.
// tests/compat/dashboard_check.sh drives the page itself in Chromium.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "dashboard/dashboard.h"
#include "dashboard/http_server.h"
#include "dashboard/run_view.h"
#include "support/files.h"
#include "support/run_helpers.h"
#include "support/temp_dir.h"
#include "train/run_status.h"

using namespace ggtrain;
using namespace ggtrain::dashboard;
using test_support::error_of;
using test_support::TempDir;
namespace fs = std::filesystem;

namespace {

// A finished tiny run: 20 steps, evaluations and samples every 10.
std::string finished_run(TempDir& tmp, const std::string& name = "run") {
  test_support::write_synthetic_corpus(tmp / "corpus.txt", 600);
  train::RunConfig c = test_support::tiny_run_config(tmp / "corpus.txt", 20);
  c.train.eval_every = 10;
  c.train.sample_every = 10;
  c.checkpoint.every = 10;
  test_support::run_quiet(tmp / name, c, false);
  return tmp / name;
}

int64_t count_lines_with(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  int64_t n = 0;
  for (std::string line; std::getline(in, line);) n += line.find(what) != std::string::npos;
  return n;
}

// One exchange: `raw` sent, everything the server answers until it closes.
std::string send_raw(int port, const std::string& raw) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return "";
  }
  size_t sent = 0;
  while (sent < raw.size()) {
    const ssize_t n = ::send(fd, raw.data() + sent, raw.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += size_t(n);
  }
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, size_t(n));
  ::close(fd);
  return out;
}

std::string get(int port, const std::string& target) {
  return send_raw(port, "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
}

int status_of(const std::string& response) { return response.size() > 12 ? std::atoi(response.c_str() + 9) : 0; }

std::string body_of(const std::string& response) {
  const size_t at = response.find("\r\n\r\n");
  return at == std::string::npos ? "" : response.substr(at + 4);
}

// A dashboard server on a free loopback port, serving on a thread.
class Served {
 public:
  explicit Served(std::vector<std::string> runs)
      : board_(std::move(runs)), server_("127.0.0.1", 0, [this](const Request& r) { return board_.handle(r); }) {
    thread_ = std::thread([this] { server_.serve(); });
  }
  ~Served() {
    server_.stop();
    thread_.join();
  }
  int port() const { return server_.port(); }

 private:
  Dashboard board_;
  HttpServer server_;
  std::thread thread_;
};

}  // namespace

// The state comes from status.json; a running one whose process is gone
// failed; without status.json the checkpoints decide.
TEST(Dashboard, RunStateFromTheFolder) {
  TempDir tmp;
  const std::string run = finished_run(tmp);
  RunSummary s = read_run_summary(run);
  EXPECT_EQ(s.state, "finished");
  EXPECT_EQ(s.steps, 20);
  ASSERT_EQ(s.checkpoints.size(), 2u);
  EXPECT_TRUE(s.checkpoints[1].latest);
  EXPECT_GT(s.checkpoints[1].bytes, 1000);
  EXPECT_NE(s.config_toml.find("[train]"), std::string::npos);

  train::write_run_status(run, train::current_process_status(train::RunState::kRunning, 12, 20));
  EXPECT_EQ(read_run_summary(run).state, "running");  // this process is alive
  const pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);
  train::RunStatus dead = train::current_process_status(train::RunState::kRunning, 12, 20);
  dead.pid = child;
  train::write_run_status(run, dead);
  s = read_run_summary(run);
  EXPECT_EQ(s.state, "failed");
  EXPECT_NE(s.detail.find("ended without a word"), std::string::npos) << s.detail;
  dead.host = "another-host";  // its process cannot be looked at from here
  train::write_run_status(run, dead);
  EXPECT_EQ(read_run_summary(run).state, "running");

  // Preparing (tokenizing, building the model) is watched as running is.
  train::write_run_status(run, train::current_process_status(train::RunState::kPreparing, 0, 20));
  EXPECT_EQ(read_run_summary(run).state, "preparing");
  dead.state = train::RunState::kPreparing;
  dead.host = train::host_name();
  train::write_run_status(run, dead);
  EXPECT_EQ(read_run_summary(run).state, "failed");
  train::write_run_status(run, train::current_process_status(train::RunState::kStopped, 10, 20, "SIGTERM received"));
  s = read_run_summary(run);
  EXPECT_EQ(s.state, "stopped");
  EXPECT_EQ(s.detail, "SIGTERM received");
  test_support::spit(run + "/status.json", "{\"state\": \"runn");  // torn
  EXPECT_EQ(read_run_summary(run).state, "finished");  // step 20 of 20 is checkpointed

  fs::rename(run, tmp / "gone");
  EXPECT_EQ(read_run_summary(run).state, "missing");
  EXPECT_EQ(error_of([&] { check_run_folder(tmp / "corpus.txt"); }),
            tmp / "corpus.txt" + ": no such folder; give a run folder (ggtrain train --run-dir)");
  fs::create_directories(tmp / "empty");
  EXPECT_NE(error_of([&] { check_run_folder(tmp / "empty"); }).find("not a run folder"), std::string::npos);
}

// A run that fails before its first step (here: its tokenizer file is
// missing) leaves status.json failed with the reason, not "preparing"; a
// run refused because the folder is another run's leaves that run's
// status as it was.
TEST(Dashboard, RunFailingWhilePreparingSaysWhy) {
  TempDir tmp;
  test_support::write_synthetic_corpus(tmp / "corpus.txt", 600);
  train::RunConfig c = test_support::tiny_run_config(tmp / "corpus.txt", 4);
  c.data.tokenizer = tmp / "no-such.model";
  EXPECT_NE(error_of([&] { test_support::run_quiet(tmp / "run", c, false); }).find("no-such.model"), std::string::npos);
  const auto status = train::read_run_status(tmp / "run");
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(status->state, train::RunState::kFailed);
  EXPECT_NE(status->message.find("no-such.model"), std::string::npos) << status->message;
  EXPECT_EQ(read_run_summary(tmp / "run").state, "failed");

  const std::string done = finished_run(tmp, "done");
  const std::string before = test_support::slurp(done + "/status.json");
  EXPECT_NE(error_of([&] { test_support::run_quiet(done, c, false); }).find("already has checkpoints"),
            std::string::npos);
  EXPECT_EQ(test_support::slurp(done + "/status.json"), before);
}

// Records are read from an offset on; a last line still being written waits
// for its newline; a broken complete line is skipped and counted.
TEST(Dashboard, RecordsReadIncrementally) {
  TempDir tmp;
  const std::string run = finished_run(tmp);
  const std::string metrics = run + "/metrics.jsonl";
  int64_t next = 0, skipped = 0;
  const auto all = read_records(run, 0, 1000000, &next, &skipped);
  EXPECT_EQ(int64_t(all.size()), count_lines_with(metrics, "\"step\""));
  EXPECT_EQ(next, int64_t(fs::file_size(metrics)));
  EXPECT_EQ(count_lines_with(metrics, "\"sample\""), 2);  // the samples are records too
  {
    std::ofstream out(metrics, std::ios::app);
    out << "not json\n{\"step\": 21, \"lo";
  }
  int64_t after = 0;
  auto more = read_records(run, next, 1000000, &after, &skipped);
  EXPECT_TRUE(more.empty());
  EXPECT_EQ(skipped, 1);
  EXPECT_EQ(after, next + 9);  // past "not json\n", not into the torn line
  {
    std::ofstream out(metrics, std::ios::app);
    out << "ss\": 1.5}\n";
  }
  more = read_records(run, after, 1000000, &after, &skipped);
  ASSERT_EQ(more.size(), 1u);
  EXPECT_EQ(more[0], "{\"step\": 21, \"loss\": 1.5}");
  int64_t capped = 0;
  EXPECT_EQ(read_records(run, 0, 3, &capped, &skipped).size(), 3u);
  EXPECT_LT(capped, next);
}

TEST(Dashboard, RequestHeadsParsed) {
  Request r;
  int status = 0;
  ASSERT_TRUE(parse_request_head("GET /api/records?run=1&from=20 HTTP/1.1\r\nHost: x\r\n\r\n", &r, &status));
  EXPECT_EQ(r.path, "/api/records");
  EXPECT_EQ(r.query.at("run"), "1");
  EXPECT_EQ(r.query.at("from"), "20");
  ASSERT_TRUE(parse_request_head("GET /%2e%2e/%2E%2E/etc/passwd HTTP/1.1\r\n\r\n", &r, &status));
  EXPECT_EQ(r.path, "/../../etc/passwd");  // decoded, then simply not a route
  EXPECT_FALSE(parse_request_head("GET /a%zz HTTP/1.1\r\n\r\n", &r, &status));
  EXPECT_EQ(status, 400);
  EXPECT_FALSE(parse_request_head("GET /a%00b HTTP/1.1\r\n\r\n", &r, &status));
  EXPECT_FALSE(parse_request_head("GET /a% HTTP/1.1\r\n\r\n", &r, &status));
  EXPECT_FALSE(parse_request_head("POST / HTTP/1.1\r\n\r\n", &r, &status));
  EXPECT_EQ(status, 405);
  EXPECT_FALSE(parse_request_head("GET /" + std::string(3000, 'a') + " HTTP/1.1\r\n\r\n", &r, &status));
  EXPECT_EQ(status, 414);
  EXPECT_FALSE(parse_request_head("GET relative HTTP/1.1\r\n\r\n", &r, &status));
  EXPECT_FALSE(parse_request_head("\x01\x02garbage", &r, &status));
  EXPECT_EQ(status, 400);
}

// Whatever is asked, only the page and the runs' data come back: no path
// out of the run folder (plain, encoded, through a symbolic link), no
// crash on huge or malformed requests or many clients at once.
TEST(Dashboard, ServerServesNothingOutsideTheRuns) {
  TempDir tmp;
  const std::string run = finished_run(tmp);
  test_support::spit(tmp / "secret.txt", "{\"step\": 1, \"secret\": \"do not serve\"}\n");
  Served s({run});
  EXPECT_EQ(status_of(get(s.port(), "/")), 200);
  EXPECT_NE(get(s.port(), "/").find("<title>ggtrain</title>"), std::string::npos);
  const auto runs = nlohmann::json::parse(body_of(get(s.port(), "/api/runs")));
  EXPECT_EQ(runs["runs"][0]["state"], "finished");
  const auto recs = nlohmann::json::parse(body_of(get(s.port(), "/api/records?run=0&from=0")));
  EXPECT_EQ(int64_t(recs["records"].size()), count_lines_with(run + "/metrics.jsonl", "\"step\""));
  for (const std::string target :
       {"/../secret.txt", "/%2e%2e/secret.txt", "/..%2fsecret.txt", "/api/../../secret.txt", "//etc/passwd",
        "/api/records/../../secret.txt", "/metrics.jsonl", "/config.toml", "/weights/latest"}) {
    const std::string answer = get(s.port(), target);
    EXPECT_EQ(status_of(answer), 404) << target;
    EXPECT_EQ(answer.find("do not serve"), std::string::npos) << target;
  }
  EXPECT_EQ(status_of(get(s.port(), "/api/records?run=1&from=0")), 400);
  EXPECT_EQ(status_of(get(s.port(), "/api/records?run=0&from=-5")), 400);
  EXPECT_EQ(status_of(get(s.port(), "/api/records?run=99999999999999999999&from=0")), 400);
  // A metrics file linked out of the folder is not read.
  fs::rename(run + "/metrics.jsonl", tmp / "metrics.jsonl");
  fs::create_symlink(tmp / "secret.txt", run + "/metrics.jsonl");
  EXPECT_EQ(get(s.port(), "/api/records?run=0&from=0").find("do not serve"), std::string::npos);
  fs::remove(run + "/config.toml");
  fs::create_symlink(tmp / "secret.txt", run + "/config.toml");
  EXPECT_EQ(get(s.port(), "/api/runs").find("do not serve"), std::string::npos);

  EXPECT_EQ(status_of(send_raw(s.port(), "GET / HTTP/1.1\r\nX: " + std::string(1 << 20, 'a') + "\r\n\r\n")), 431);
  EXPECT_EQ(status_of(send_raw(s.port(), std::string("\x16\x03\x01\x02\x00\r\n\r\n", 9))), 400);
  EXPECT_EQ(status_of(send_raw(s.port(), "DELETE / HTTP/1.1\r\n\r\n")), 405);
  // Many clients at once: each gets an answer (or "busy"), and the server
  // goes on serving.
  std::vector<std::thread> clients;
  std::atomic<int> answered{0};
  for (int i = 0; i < 150; ++i)
    clients.emplace_back([&] {
      const int st = status_of(get(s.port(), "/api/runs"));
      if (st == 200 || st == 503) ++answered;
    });
  for (auto& t : clients) t.join();
  EXPECT_EQ(answered, 150);
  EXPECT_EQ(status_of(get(s.port(), "/api/runs")), 200);
}

// A run folder that disappears while served reads as missing; the others
// are still served.
TEST(Dashboard, FolderThatDisappearsReadsAsMissing) {
  TempDir tmp;
  const std::string a = finished_run(tmp, "a"), b = finished_run(tmp, "b");
  Served s({a, b});
  fs::remove_all(b);
  const auto runs = nlohmann::json::parse(body_of(get(s.port(), "/api/runs")));
  EXPECT_EQ(runs["runs"][0]["state"], "finished");
  EXPECT_EQ(runs["runs"][1]["state"], "missing");
  EXPECT_EQ(body_of(get(s.port(), "/api/records?run=1&from=0")), "{\"records\":[],\"next\":0,\"skipped\":0}");
  EXPECT_EQ(status_of(get(s.port(), "/api/records?run=0&from=0")), 200);
}

TEST(Dashboard, PortInUseIsNamed) {
  TempDir tmp;
  const std::string run = finished_run(tmp);
  Served s({run});
  const Dashboard board({run});
  EXPECT_EQ(error_of([&] { HttpServer("127.0.0.1", s.port(), [&](const Request& r) { return board.handle(r); }); }),
            fmt::format("serve: port {} on 127.0.0.1 is in use (another ggtrain serve?); give another with --port",
                        s.port()));
}

// The report holds every record, and no "</script>" in a record's text
// (a sample) can end its script early.
TEST(Dashboard, ReportEmbedsEveryRecordSafely) {
  TempDir tmp;
  const std::string run = finished_run(tmp);
  {
    std::ofstream out(run + "/metrics.jsonl", std::ios::app);
    out << "{\"step\": 20, \"sample\": \"</script><script>alert(1)</script>\"}\n";
  }
  const std::string html = report_html({run});
  EXPECT_EQ(html.find("</script><script>alert"), std::string::npos);
  EXPECT_NE(html.find("<\\/script><script>alert"), std::string::npos);
  EXPECT_NE(html.find("window.GGTRAIN_DATA"), std::string::npos);
  EXPECT_EQ(html.find("/*GGTRAIN_"), std::string::npos);  // every mark filled
  // No address outside the page: nothing to fetch from elsewhere.
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/2000/svg"));
  EXPECT_EQ(html.find("https://"), std::string::npos);
}
