#include "monitoring/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <thread>

#include "core/file_descriptor.h"
#include "core/logging.h"

namespace tessel::monitoring {
namespace {

using Clock = std::chrono::steady_clock;

// After the response is written, the rest of what the client sent is read and dropped for this long (or
// until it closes), so that closing with unread bytes does not reset the connection before the client has
// read the answer.
constexpr double kLingerSeconds = 1.0;
constexpr size_t kLingerBytes = 1 << 16;

bool IsTokenChar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::strchr("!#$%&'*+-.^_`|~", c) != nullptr && c != '\0';
}

std::string_view StatusText(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Unknown";
  }
}

HttpResponse ErrorResponse(int status, std::string_view detail) {
  HttpResponse r;
  r.status = status;
  r.body = StrCat(status, " ", StatusText(status), ": ", detail, "\n");
  return r;
}

// The end of the head: the offset just past the first empty line, or npos. Lines end in LF, with or
// without CR.
size_t HeadEnd(std::string_view bytes, size_t from) {
  for (size_t nl = bytes.find('\n', from); nl != std::string_view::npos; nl = bytes.find('\n', nl + 1)) {
    const size_t next = nl + 1;
    if (next < bytes.size() && bytes[next] == '\n') return next + 1;
    if (next + 1 < bytes.size() && bytes[next] == '\r' && bytes[next + 1] == '\n') return next + 2;
  }
  return std::string_view::npos;
}

std::string_view TrimCr(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

Result<int> ListenSocket(const std::string& bind, int32_t port) {
  sockaddr_storage storage{};
  socklen_t length = 0;
  int family = AF_INET;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&storage);
  if (inet_pton(AF_INET, bind.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    length = sizeof(sockaddr_in);
  } else if (inet_pton(AF_INET6, bind.c_str(), &v6->sin6_addr) == 1) {
    family = AF_INET6;
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    length = sizeof(sockaddr_in6);
  } else {
    return UsageError(StrCat("'", bind, "' is not a numeric IPv4 or IPv6 address"));
  }
  FileDescriptor fd(::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return UsageError(std::strerror(errno));
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (family == AF_INET6) ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&storage), length) != 0) {
    return UsageError(std::strerror(errno));
  }
  if (::listen(fd.get(), 64) != 0) return UsageError(std::strerror(errno));
  return fd.Release();
}

int32_t BoundPort(int fd) {
  sockaddr_storage storage{};
  socklen_t length = sizeof(storage);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&storage), &length) != 0) return -1;
  if (storage.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&storage)->sin_port);
}

}  // namespace

std::string HostPort(const std::string& bind, int32_t port) {
  if (bind.find(':') != std::string::npos) return StrCat("[", bind, "]:", port);
  return StrCat(bind, ":", port);
}

std::optional<HttpHead> ParseHttpHead(std::string_view bytes) {
  size_t start = 0;  // leading empty lines
  while (start < bytes.size() && (bytes[start] == '\r' || bytes[start] == '\n')) ++start;
  const size_t line_end = bytes.find('\n', start);
  if (line_end == std::string_view::npos) return std::nullopt;
  const size_t end = HeadEnd(bytes, line_end);
  if (end == std::string_view::npos) {
    // The request line alone followed directly by the blank line is handled by HeadEnd; here the head
    // is still arriving.
    return std::nullopt;
  }
  HttpHead head;
  const std::string_view line = TrimCr(bytes.substr(start, line_end - start));
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == 0 || sp1 == std::string_view::npos || sp2 == std::string_view::npos || sp2 == sp1 + 1 ||
      line.find(' ', sp2 + 1) != std::string_view::npos) {
    head.status = 400;
    return head;
  }
  const std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  for (char c : method) {
    if (!IsTokenChar(c)) {
      head.status = 400;
      return head;
    }
  }
  for (char c : target) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) {
      head.status = 400;
      return head;
    }
  }
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || version[6] != '.' || version[5] < '0' ||
      version[5] > '9' || version[7] < '0' || version[7] > '9') {
    head.status = 400;
    return head;
  }
  if (version[5] != '1') {
    head.status = 505;
    return head;
  }
  // absolute-form: drop "scheme://authority".
  if (const size_t scheme = target.find("://"); target.empty() || target[0] != '/') {
    if (target == "*") {
      target = "*";
    } else if (scheme == std::string_view::npos || scheme == 0) {
      head.status = 400;
      return head;
    } else {
      const size_t slash = target.find('/', scheme + 3);
      target = slash == std::string_view::npos ? std::string_view("/") : target.substr(slash);
    }
  }
  // Each header line must be NAME: VALUE (no validation of values: nothing here reads them).
  for (size_t pos = line_end + 1; pos < end;) {
    const size_t nl = bytes.find('\n', pos);
    const std::string_view header = TrimCr(bytes.substr(pos, nl - pos));
    pos = nl + 1;
    if (header.empty()) break;
    const size_t colon = header.find(':');
    if (colon == 0 || colon == std::string_view::npos || header[0] == ' ' || header[0] == '\t') {
      head.status = 400;
      return head;
    }
    for (char c : header.substr(0, colon)) {
      if (!IsTokenChar(c)) {
        head.status = 400;
        return head;
      }
    }
  }
  head.method = std::string(method);
  head.path = std::string(target.substr(0, target.find('?')));
  return head;
}

std::string FormatHttpResponse(const HttpResponse& response, bool head_only) {
  std::string out = StrCat("HTTP/1.1 ", response.status, " ", StatusText(response.status),
                           "\r\nContent-Type: ", response.content_type, "\r\nContent-Length: ", response.body.size(),
                           "\r\nConnection: close\r\n");
  for (const auto& [name, value] : response.headers) out += StrCat(name, ": ", value, "\r\n");
  out += "\r\n";
  if (!head_only) out += response.body;
  return out;
}

struct HttpServer::Loop {
  enum class Phase { kReading, kWriting, kLingering };
  struct Connection {
    FileDescriptor fd;
    Phase phase = Phase::kReading;
    std::string in;
    std::string out;
    size_t written = 0;
    size_t drained = 0;
    Clock::time_point deadline;
  };

  HttpLimits limits;
  FileDescriptor listener;
  FileDescriptor wake_read, wake_write;
  Handler handler;
  std::vector<Connection> connections;
  Clock::time_point accept_pause_until{};
  std::atomic<int64_t> answered{0}, dropped{0};
  std::thread thread;

  void Run() {
    std::vector<pollfd> fds;
    for (;;) {
      fds.clear();
      const Clock::time_point now = Clock::now();
      fds.push_back({wake_read.get(), POLLIN, 0});
      // Out of descriptors (EMFILE): the pending connection stays queued, so the listener is left out of
      // the poll for a moment instead of waking it at once, again and again.
      fds.push_back({listener.get(), static_cast<int16_t>(now >= accept_pause_until ? POLLIN : 0), 0});
      int timeout_ms = now >= accept_pause_until ? -1 : 100;
      for (const Connection& c : connections) {
        fds.push_back({c.fd.get(), static_cast<int16_t>(c.phase == Phase::kWriting ? POLLOUT : POLLIN), 0});
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(c.deadline - now).count();
        const int ms = left < 0 ? 0 : static_cast<int>(left + 1);
        timeout_ms = timeout_ms < 0 ? ms : std::min(timeout_ms, ms);
      }
      const int n = ::poll(fds.data(), fds.size(), timeout_ms);
      if (n < 0 && errno != EINTR) return;  // cannot happen with valid descriptors; stop serving, never crash
      if (n > 0 && (fds[0].revents & POLLIN) != 0) return;  // the destructor asked us to stop
      // Nothing a client sends may end the job: a failure here (memory for a response, say) drops the
      // connections in hand and serving goes on.
      try {
        // Connections first (their pollfds follow the two fixed ones, in order), then new ones.
        for (size_t i = 0; i < connections.size(); ++i) {
          Serve(connections[i], n > 0 ? fds[i + 2].revents : 0);
        }
        std::erase_if(connections, [](const Connection& c) { return c.fd.get() < 0; });
        if (n > 0 && (fds[1].revents & POLLIN) != 0) Accept();
      } catch (...) {
        dropped.fetch_add(static_cast<int64_t>(connections.size()));
        connections.clear();
      }
    }
  }

  void Accept() {
    for (int i = 0; i < 16; ++i) {  // a burst at a time, so that connections in progress are not starved
      const int fd = ::accept4(listener.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          accept_pause_until = Clock::now() + std::chrono::milliseconds(100);
        }
        return;  // EAGAIN, or a connection reset before accept: nothing to do
      }
      Connection c;
      c.fd.Reset(fd);
      c.deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(limits.connection_seconds));
      if (static_cast<int>(connections.size()) >= limits.max_connections) {
        const std::string busy = FormatHttpResponse(ErrorResponse(503, "too many connections"), false);
        (void)::send(fd, busy.data(), busy.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        dropped.fetch_add(1);
        continue;  // c closes the descriptor
      }
      connections.push_back(std::move(c));
    }
  }

  void Answer(Connection& c, const HttpResponse& response, bool head_only) {
    c.out = FormatHttpResponse(response, head_only);
    c.written = 0;
    c.phase = Phase::kWriting;
    answered.fetch_add(1);
  }

  void Respond(Connection& c, const HttpHead& head) {
    if (head.status != 0) {
      Answer(c,
             ErrorResponse(head.status,
                           head.status == 505 ? "only HTTP/1.0 and HTTP/1.1 are served" : "malformed request"),
             false);
      return;
    }
    HttpResponse response;
    try {
      response = handler(head);
    } catch (const std::exception& e) {
      response = ErrorResponse(500, e.what());
    } catch (...) {
      response = ErrorResponse(500, "unknown error");
    }
    Answer(c, response, head.method == "HEAD");
  }

  void Serve(Connection& c, int16_t revents) {
    if (Clock::now() >= c.deadline) {
      if (c.phase == Phase::kReading && c.in.find_first_not_of("\r\n") != std::string::npos) {
        const std::string late =
            FormatHttpResponse(ErrorResponse(408, "the request head did not arrive in time"), false);
        (void)::send(c.fd.get(), late.data(), late.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      }
      if (c.phase != Phase::kLingering) dropped.fetch_add(1);
      c.fd.Reset(-1);
      return;
    }
    if (revents == 0) return;
    if (c.phase == Phase::kReading || c.phase == Phase::kLingering) {
      char buffer[4096];
      const ssize_t got = ::recv(c.fd.get(), buffer, sizeof buffer, MSG_DONTWAIT);
      if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) {
        c.fd.Reset(-1);  // the client closed (or reset): nothing to answer
        return;
      }
      if (got < 0) return;
      if (c.phase == Phase::kLingering) {
        c.drained += static_cast<size_t>(got);
        if (c.drained > kLingerBytes) c.fd.Reset(-1);
        return;
      }
      c.in.append(buffer, static_cast<size_t>(got));
      // Only the first max_head_bytes count: a longer head is 431 even when it arrived whole.
      const std::string_view within = std::string_view(c.in).substr(0, limits.max_head_bytes);
      if (std::optional<HttpHead> head = ParseHttpHead(within)) {
        Respond(c, *head);
      } else if (c.in.size() > limits.max_head_bytes) {
        Answer(c, ErrorResponse(431, StrCat("the request head is over ", limits.max_head_bytes, " bytes")), false);
      } else {
        return;
      }
      c.in.clear();
      c.in.shrink_to_fit();
    }
    if (c.phase == Phase::kWriting) {
      while (c.written < c.out.size()) {
        const ssize_t put =
            ::send(c.fd.get(), c.out.data() + c.written, c.out.size() - c.written, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (put < 0) {
          if (errno == EAGAIN || errno == EINTR) return;
          c.fd.Reset(-1);  // EPIPE, ECONNRESET: the client went away
          return;
        }
        c.written += static_cast<size_t>(put);
      }
      c.out.clear();
      c.out.shrink_to_fit();
      ::shutdown(c.fd.get(), SHUT_WR);
      c.phase = Phase::kLingering;
      const Clock::time_point linger_end =
          Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(kLingerSeconds));
      c.deadline = std::min(c.deadline, linger_end);
    }
  }
};

Result<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& bind, int32_t port, Handler handler,
                                                      HttpLimits limits) {
  const std::string where = HostPort(bind, port);
  if (port < 0 || port > 65535) return UsageError(StrCat("cannot listen on ", where, ": port must be in 0..65535"));
  Result<int> listening = ListenSocket(bind, port);
  if (!listening.ok()) return UsageError(StrCat("cannot listen on ", where, ": ", listening.status().message()));
  auto loop = std::make_unique<Loop>();
  loop->listener.Reset(*listening);
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    return UsageError(StrCat("cannot listen on ", where, ": pipe: ", std::strerror(errno)));
  }
  loop->wake_read.Reset(pipe_fds[0]);
  loop->wake_write.Reset(pipe_fds[1]);
  loop->handler = std::move(handler);
  loop->limits = limits;
  const int32_t bound = BoundPort(loop->listener.get());
  try {
    Loop* raw = loop.get();
    loop->thread = std::thread([raw] { raw->Run(); });
  } catch (const std::exception& e) {
    return UsageError(StrCat("cannot listen on ", where, ": cannot start the server thread: ", e.what()));
  }
  return std::unique_ptr<HttpServer>(new HttpServer(bound, std::move(loop)));
}

HttpServer::HttpServer(int32_t port, std::unique_ptr<Loop> loop) : port_(port), loop_(std::move(loop)) {}

HttpServer::~HttpServer() {
  const char stop = 1;
  while (::write(loop_->wake_write.get(), &stop, 1) < 0 && errno == EINTR) {
  }
  loop_->thread.join();
}

int64_t HttpServer::answered() const { return loop_->answered.load(); }
int64_t HttpServer::dropped() const { return loop_->dropped.load(); }

}  // namespace tessel::monitoring
