#include "monitoring/exporter.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <CivetServer.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <utility>
#include <vector>

#include "core/logging.h"

namespace tessel::monitoring {
namespace {

// "ADDR:PORT", with IPv6 addresses in brackets: the form civetweb's listening_ports and URLs both want.
std::string HostPort(const std::string& bind, int32_t port) {
  if (bind.find(':') != std::string::npos) return StrCat("[", bind, "]:", port);
  return StrCat(bind, ":", port);
}

// The address family of a numeric address, or AF_UNSPEC when `bind` is not one.
int AddressFamily(const std::string& bind) {
  in6_addr buffer{};
  if (inet_pton(AF_INET, bind.c_str(), &buffer) == 1) return AF_INET;
  if (inet_pton(AF_INET6, bind.c_str(), &buffer) == 1) return AF_INET6;
  return AF_UNSPEC;
}

// civetweb reports a failed bind only as "null context when constructing CivetServer". To name the cause,
// bind a socket the same way (SO_REUSEADDR, as civetweb does) and report its errno. Returns "" when this bind
// succeeds, e.g. because the port was freed in between.
std::string ProbeBindError(int family, const std::string& bind, int32_t port) {
  int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::strerror(errno);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  int rc;
  if (family == AF_INET) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, bind.c_str(), &addr.sin_addr);
    rc = ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  } else {
    sockaddr_in6 addr{};
    addr.sin6_family = AF_INET6;
    addr.sin6_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET6, bind.c_str(), &addr.sin6_addr);
    rc = ::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  }
  std::string cause = rc == 0 ? "" : std::strerror(errno);
  ::close(fd);
  return cause;
}

}  // namespace

// Answers GET /metrics with the registry's families in the text format. Runs on the server's threads;
// Registry::Collect is thread-safe.
class Exporter::Handler : public CivetHandler {
 public:
  explicit Handler(std::shared_ptr<prometheus::Registry> registry) : registry_(std::move(registry)) {}

  bool handleGet(CivetServer* /*server*/, mg_connection* conn) override {
    const std::string body = prometheus::TextSerializer().Serialize(registry_->Collect());
    mg_printf(conn,
              "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
              "Content-Length: %zu\r\nConnection: close\r\n\r\n",
              body.size());
    mg_write(conn, body.data(), body.size());
    return true;
  }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
};

Result<std::unique_ptr<Exporter>> Exporter::Start(const std::string& bind, int32_t port, Metrics& metrics) {
  const std::string where = HostPort(bind, port);
  const int family = AddressFamily(bind);
  if (family == AF_UNSPEC) {
    return UsageError(
        StrCat("metrics exporter cannot listen on ", where, ": '", bind, "' is not a numeric IPv4 or IPv6 address"));
  }
  if (port < 0 || port > 65535) {
    return UsageError(StrCat("metrics exporter cannot listen on ", where, ": port must be in 0..65535"));
  }

  auto handler = std::make_unique<Handler>(metrics.registry());
  std::unique_ptr<CivetServer> server;
  try {
    // civetweb's options as prometheus-cpp's Exposer sets them: 2 threads answer the scrapes.
    server = std::make_unique<CivetServer>(std::vector<std::string>{"listening_ports", where, "num_threads", "2"});
  } catch (const std::exception& e) {
    std::string cause = ProbeBindError(family, bind, port);
    if (cause.empty() && family == AF_INET6) {
      cause = "the HTTP server (civetweb) refused an IPv6 address; Debian's civetweb is built without IPv6, "
              "so use an IPv4 address such as 127.0.0.1 or 0.0.0.0";
    }
    if (cause.empty()) cause = e.what();
    return UsageError(StrCat("metrics exporter cannot listen on ", where, ": ", cause));
  } catch (...) {
    return UsageError(StrCat("metrics exporter cannot listen on ", where, ": unknown error"));
  }

  std::vector<int> ports = server->getListeningPorts();
  if (ports.empty()) {
    return UsageError(StrCat("metrics exporter cannot listen on ", where, ": server reports no listening port"));
  }
  server->addHandler("/metrics", handler.get());
  return std::unique_ptr<Exporter>(new Exporter(bind, ports.front(), std::move(handler), std::move(server)));
}

Exporter::Exporter(std::string bind, int32_t port, std::unique_ptr<Handler> handler, std::unique_ptr<CivetServer> server)
    : bind_(std::move(bind)), port_(port), handler_(std::move(handler)), server_(std::move(server)) {}

Exporter::~Exporter() {
  server_.reset();  // joins the server's threads: no scrape is in the handler after this
}

std::string Exporter::url() const { return StrCat("http://", HostPort(bind_, port_), "/metrics"); }

}  // namespace tessel::monitoring
