#pragma once
// A small HTTP/1.1 server for the dashboard: GET and HEAD only, one
// request per connection, request heads up to 8 KiB, a bounded number of
// connections at once, slow clients timed out. It serves what its handler
// returns and nothing else: no path is ever opened from a URL.
#include <atomic>
#include <functional>
#include <map>
#include <string>

namespace ggtrain::dashboard {

struct Request {
  std::string method;  // GET or HEAD
  std::string path;  // percent-decoded, without the query
  std::map<std::string, std::string> query;  // percent-decoded
};

struct Response {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

using Handler = std::function<Response(const Request&)>;

// Parses a request head ("GET /x?a=1 HTTP/1.1\r\n..."); false (and *status
// set: 400, 405, 414) when it is not one this server answers.
bool parse_request_head(const std::string& head, Request* r, int* status);

class HttpServer {
 public:
  // Binds host:port (port 0: any free one). Error naming the address when
  // it is in use or cannot be bound.
  HttpServer(const std::string& host, int port, Handler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }
  // Accepts until stop() (from another thread or a signal handler's flag).
  void serve();
  void stop() { stopping_ = true; }

 private:
  void answer(int fd);
  int listen_fd_ = -1;
  int port_ = 0;
  Handler handler_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> open_{0};
};

}  // namespace ggtrain::dashboard
