// A small HTTP/1.x server for one rank's metrics: one thread, poll(2), bounded in every direction.
//
// Why not civetweb (which prometheus-cpp's Exposer uses): Debian's civetweb 1.15 runs its workers on a
// 100 KiB stack (CIVETWEB_THREAD_STACK_SIZE), and its own error path (mg_send_http_error, 8 KiB buffers
// several frames deep) overflows it: `curl http://RANK:PORT/` or a HEAD or POST killed the training job
// with SIGSEGV (issue 32). No handler can route around it, since malformed requests reach that path before
// any handler. This server answers every request itself, and nothing a client sends can make it allocate
// more than its limits or wait longer than its deadline:
// - a request head (request line and headers) is at most max_head_bytes, else 431; bodies are never read;
// - a connection lives at most connection_seconds from accept (slow clients get 408, or are closed);
// - at most max_connections are served at once; more are answered 503 and closed;
// - every response is "Connection: close"; writes never raise SIGPIPE.
//
// Thread safety: Start from any thread; the handler runs on the server's one thread, so it must be
// thread-safe against the rest of the program (Registry::Collect is). Destroying the server stops the
// thread at once (it wakes poll through a pipe) and closes every connection.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace tessel::monitoring {

// What one server allows; the defaults are the exporter's (tests shorten the deadline).
struct HttpLimits {
  size_t max_head_bytes = 8192;
  int max_connections = 32;
  double connection_seconds = 10.0;  // Prometheus's default scrape timeout
};

// A parsed request head. `status` is 0 for a well-formed head, else the HTTP status the server answers
// with by itself (400 malformed, 505 unsupported version); `path` is the request target without its query.
struct HttpHead {
  int status = 0;
  std::string method;
  std::string path;
};

// Parses the head at the start of `bytes`: leading blank lines are skipped (RFC 9112 2.2), the request
// line must be METHOD SP TARGET SP HTTP/1.x, the target origin-form ("/path?query") or absolute-form
// ("http://host/path"), and each header line must have a colon. Returns nullopt while no blank line ends
// the head yet. Never throws; `bytes` may be anything.
std::optional<HttpHead> ParseHttpHead(std::string_view bytes);

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers, e.g. {"Allow", "GET, HEAD"}
};

// The bytes on the wire: status line, Content-Type, Content-Length, Connection: close, the extra headers,
// then the body unless `head_only` (a HEAD request, which gets GET's Content-Length).
std::string FormatHttpResponse(const HttpResponse& response, bool head_only);

class HttpServer {
 public:
  // Called for every well-formed head, on the server's thread. An exception it throws becomes a 500.
  using Handler = std::function<HttpResponse(const HttpHead&)>;

  // Listens on a numeric IPv4 or IPv6 address (`bind`) and port (0: the kernel picks; port() tells).
  // Failure: a kUsage Status naming BIND:PORT and the cause (not numeric, out of range, bind's errno).
  // Ownership: the caller owns the server; the handler is moved in.
  static Result<std::unique_ptr<HttpServer>> Start(const std::string& bind, int32_t port, Handler handler,
                                                   HttpLimits limits = {});

  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int32_t port() const { return port_; }
  // Requests answered so far (any status), and connections refused with 503 or dropped at a deadline.
  int64_t answered() const;
  int64_t dropped() const;

 private:
  struct Loop;
  HttpServer(int32_t port, std::unique_ptr<Loop> loop);
  int32_t port_;
  std::unique_ptr<Loop> loop_;
};

// "ADDR:PORT", with IPv6 addresses in brackets.
std::string HostPort(const std::string& bind, int32_t port);

}  // namespace tessel::monitoring
