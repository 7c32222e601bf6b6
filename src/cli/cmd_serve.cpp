#include <fmt/core.h>
#include <signal.h>

#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "dashboard/dashboard.h"
#include "dashboard/http_server.h"
#include "util/atomic_file.h"

namespace ggtrain::cli {

namespace {

dashboard::HttpServer* g_server = nullptr;

void stop_serving(int) {
  if (g_server) g_server->stop();
}

}  // namespace

Runner add_serve_command(CLI::App& app) {
  struct Opts {
    std::vector<std::string> runs;
    std::string host = "127.0.0.1";
    int port = 8321;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd =
      app.add_subcommand("serve", "A live dashboard of run folders in the browser: loss, learning rate, gradient norm, "
                                  "tokens/s, evaluations, samples, checkpoints, configs (read-only, offline)");
  cmd->add_option("run_dirs", o->runs, "Run folders (RUN_DIR of `ggtrain train --run-dir`), overlaid")->required();
  cmd->add_option("--host", o->host, "Address to listen on (default 127.0.0.1: this machine only)");
  cmd->add_option("--port", o->port, "Port (default 8321; 0: any free one)")->check(CLI::Range(0, 65535));
  return [cmd, o]() -> int {
    if (!cmd->parsed()) return -1;
    const dashboard::Dashboard board(o->runs);
    dashboard::HttpServer server(o->host, o->port, [&board](const dashboard::Request& r) { return board.handle(r); });
    g_server = &server;
    struct sigaction sa {};
    sa.sa_handler = stop_serving;
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    const bool loopback = o->host == "127.0.0.1" || o->host == "::1" || o->host == "localhost";
    fmt::print("dashboard of {} run{}: http://{}:{}/ (Ctrl-C stops it){}\n", o->runs.size(),
               o->runs.size() == 1 ? "" : "s", o->host.find(':') != std::string::npos ? "[" + o->host + "]" : o->host,
               server.port(),
               loopback ? "" : "\nwarning: not a loopback address: anyone who can reach it sees these runs");
    std::fflush(stdout);
    server.serve();
    g_server = nullptr;
    return 0;
  };
}

Runner add_report_command(CLI::App& app) {
  struct Opts {
    std::vector<std::string> runs;
    std::string out;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd =
      app.add_subcommand("report", "Write the dashboard of run folders as one self-contained HTML file (every run also "
                                   "writes RUN_DIR/report.html when it ends)");
  cmd->add_option("run_dirs", o->runs, "Run folders, overlaid")->required();
  cmd->add_option("-o,--output", o->out, "The HTML file (default: RUN_DIR/report.html of the first run)");
  return [cmd, o]() -> int {
    if (!cmd->parsed()) return -1;
    const std::string out = o->out.empty() ? o->runs[0] + "/report.html" : o->out;
    const std::string html = dashboard::report_html(o->runs);
    write_file_atomic(out, html.data(), html.size());
    fmt::print("wrote {} ({} run{})\n", out, o->runs.size(), o->runs.size() == 1 ? "" : "s");
    return 0;
  };
}

}  // namespace ggtrain::cli
