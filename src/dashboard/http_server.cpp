#include "dashboard/http_server.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "util/error.h"

namespace ggtrain::dashboard {

namespace {

constexpr size_t kMaxHead = 8192;
constexpr int kMaxOpen = 64;  // connections answered at once; more wait in the backlog
constexpr int kTimeoutMs = 5000;

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// %XX decoded ('+' kept: paths and our queries never use it for a space);
// false on a malformed escape or a decoded NUL.
bool percent_decode(std::string_view in, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out->push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size()) return false;
    const int hi = hex_value(in[i + 1]), lo = hex_value(in[i + 2]);
    if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) return false;
    out->push_back(char(hi * 16 + lo));
    i += 2;
  }
  return true;
}

const char* reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 414: return "URI Too Long";
    case 431: return "Request Header Fields Too Large";
    case 503: return "Service Unavailable";
    default: return "Error";
  }
}

void send_all(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return;  // the client went away
    sent += size_t(n);
  }
}

void send_response(int fd, const Response& r, bool head_only) {
  // The page names no other origin; the policy makes the browser refuse one.
  std::string out = fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-store\r\n"
      "Content-Security-Policy: default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' "
      "'unsafe-inline'; img-src 'self' data:\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n",
      r.status, reason(r.status), r.content_type, r.body.size());
  if (!head_only) out += r.body;
  send_all(fd, out);
}

// The request head, up to the blank line; empty with *status set when it
// is too long or does not come in time.
std::string read_head(int fd, int* status) {
  std::string head;
  char buf[2048];
  while (head.find("\r\n\r\n") == std::string::npos && head.find("\n\n") == std::string::npos) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, kTimeoutMs) <= 0) {
      *status = 408;
      return "";
    }
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      *status = 400;
      return "";
    }
    head.append(buf, size_t(n));
    if (head.size() > kMaxHead) {
      *status = 431;
      return "";
    }
  }
  return head;
}

// After an error answer to a request not read to its end: closing with
// unread bytes would reset the connection and could lose the answer, so
// the rest is read (up to 4 MiB, or 1 s) after the answer is sent.
void drain(int fd) {
  ::shutdown(fd, SHUT_WR);
  char buf[4096];
  size_t total = 0;
  for (pollfd p{fd, POLLIN, 0}; total < (4u << 20) && ::poll(&p, 1, 1000) > 0;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    total += size_t(n);
  }
}

}  // namespace

bool parse_request_head(const std::string& head, Request* r, int* status) {
  *status = 400;
  const size_t eol = head.find_first_of("\r\n");
  const std::string line = head.substr(0, eol);
  const size_t sp1 = line.find(' '), sp2 = line.rfind(' ');
  if (sp1 == std::string::npos || sp2 == sp1 || line.compare(sp2 + 1, 5, "HTTP/") != 0) return false;
  r->method = line.substr(0, sp1);
  const std::string target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  if (r->method != "GET" && r->method != "HEAD") {
    *status = 405;
    return false;
  }
  if (target.size() > 2048) {
    *status = 414;
    return false;
  }
  if (target.empty() || target[0] != '/') return false;
  const size_t q = target.find('?');
  if (!percent_decode(target.substr(0, q), &r->path)) return false;
  r->query.clear();
  if (q != std::string::npos) {
    std::string_view rest(target);
    rest.remove_prefix(q + 1);
    while (!rest.empty()) {
      const size_t amp = rest.find('&');
      const std::string_view pair = rest.substr(0, amp);
      const size_t eq = pair.find('=');
      std::string k, v;
      if (!percent_decode(pair.substr(0, eq), &k) ||
          !percent_decode(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1), &v))
        return false;
      r->query[k] = v;
      if (amp == std::string_view::npos) break;
      rest.remove_prefix(amp + 1);
    }
  }
  *status = 200;
  return true;
}

HttpServer::HttpServer(const std::string& host, int port, Handler handler) : handler_(std::move(handler)) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | AI_PASSIVE;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0)
    fail("serve: --host {}: {}", host, gai_strerror(rc));
  listen_fd_ = ::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  const bool bound = listen_fd_ >= 0 && ::bind(listen_fd_, found->ai_addr, found->ai_addrlen) == 0;
  const int err = errno;
  ::freeaddrinfo(found);
  if (!bound || ::listen(listen_fd_, 128) != 0) {
    if (listen_fd_ >= 0) ::close(listen_fd_);
    if (err == EADDRINUSE)
      fail("serve: port {} on {} is in use (another ggtrain serve?); give another with --port", port, host);
    fail("serve: cannot listen on {} port {}: {}", host, port, std::strerror(err));
  }
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port
                                           : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

HttpServer::~HttpServer() {
  stop();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  while (open_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

void HttpServer::serve() {
  while (!stopping_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    if (open_ >= kMaxOpen) {
      send_response(fd, {503, "text/plain; charset=utf-8", "busy: too many connections\n"}, false);
      ::close(fd);
      continue;
    }
    ++open_;
    std::thread([this, fd] {
      try {
        answer(fd);
      } catch (const std::exception&) {
        // One bad exchange ends only its own connection.
      }
      ::close(fd);
      --open_;
    }).detach();
  }
}

void HttpServer::answer(int fd) {
  int status = 200;
  const std::string head = read_head(fd, &status);
  Request req;
  if (head.empty() || !parse_request_head(head, &req, &status)) {
    send_response(fd, {status, "text/plain; charset=utf-8", std::string(reason(status)) + "\n"}, false);
    if (status != 408) drain(fd);
    return;
  }
  Response r;
  try {
    r = handler_(req);
  } catch (const std::exception& e) {
    r = {500, "text/plain; charset=utf-8", std::string(e.what()) + "\n"};
  }
  send_response(fd, r, req.method == "HEAD");
}

}  // namespace ggtrain::dashboard
