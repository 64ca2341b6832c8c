// Serves one rank's Metrics on http://BIND:PORT/metrics (Prometheus text format) with prometheus-cpp's
// Exposer. Each rank runs its own Exporter on port_base + rank; "port 0 means disabled" is the caller's
// rule, here port 0 asks the kernel for a free port (tests use that), and port() reports it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"
#include "monitoring/metrics.h"

namespace prometheus {
class Exposer;
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
  Exporter(std::string bind, int32_t port, std::shared_ptr<prometheus::Registry> registry,
           std::unique_ptr<prometheus::Exposer> exposer);

  std::string bind_;
  int32_t port_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;  // destroyed first: stops serving before the registry goes
};

}  // namespace tessel::monitoring
