// Serves one rank's Metrics on http://BIND:PORT/metrics (Prometheus text format 0.0.4) with civetweb, the
// HTTP server prometheus-cpp's Exposer uses. Not the Exposer itself: it adds metrics of its own
// (exposer_scrapes_total, ...) that carry neither the tessel_ prefix nor the rank's labels, and a rank
// serves exactly the catalog of monitoring/METRICS.md. Each rank runs its own Exporter on port_base + rank; "port 0 means disabled" is the caller's
// rule, here port 0 asks the kernel for a free port (tests use that), and port() reports it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"
#include "monitoring/metrics.h"

class CivetServer;

namespace prometheus {
class Registry;
}  // namespace prometheus

namespace tessel::monitoring {

class Exporter {
 public:
  // Starts serving `metrics` on bind:port. `bind` is a numeric IPv4 or IPv6 address ("127.0.0.1", "0.0.0.0",
  // "::1"); host names are refused. The Exporter shares ownership of the registry, so the last values stay
  // scrapeable even after `metrics` is destroyed.
  //
  // Ownership: the caller owns the returned Exporter; destroying it stops the server and joins its threads,
  // which takes up to about 2 s (civetweb's shutdown poll).
  // Threads: Start may be called from any thread. The server answers scrapes on threads of its own.
  // Failure: never throws. A malformed address, a port outside 0..65535 or a failed bind (port in use,
  // address not on this host, permission denied) returns a kUsage Status naming bind:port and the cause.
  static Result<std::unique_ptr<Exporter>> Start(const std::string& bind, int32_t port, Metrics& metrics);

  ~Exporter();
  Exporter(const Exporter&) = delete;
  Exporter& operator=(const Exporter&) = delete;

  // The port actually listened on (the kernel's choice when Start got port 0).
  int32_t port() const { return port_; }
  const std::string& bind() const { return bind_; }
  // "http://BIND:PORT/metrics", with IPv6 addresses in brackets.
  std::string url() const;

 private:
  class Handler;
  Exporter(std::string bind, int32_t port, std::unique_ptr<Handler> handler, std::unique_ptr<CivetServer> server);

  std::string bind_;
  int32_t port_;
  std::unique_ptr<Handler> handler_;     // owns a share of the registry it serves
  std::unique_ptr<CivetServer> server_;  // destroyed first: stops serving before the handler goes
};

}  // namespace tessel::monitoring
