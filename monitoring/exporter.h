// Serves one rank's Metrics on http://BIND:PORT/metrics (Prometheus text format 0.0.4) through
// monitoring/http_server.h, which says why it is not civetweb. Not prometheus-cpp's Exposer: that adds metrics of
// its own (exposer_scrapes_total, ...) that carry neither the tessel_ prefix nor the rank's labels, and a rank
// serves exactly the catalog of monitoring/METRICS.md. GET or HEAD /metrics is 200, / a one-line pointer to
// /metrics, any other path 404, any other method 405; the server itself answers malformed requests (400),
// oversized heads (431), slow clients (408) and too many connections (503). Each rank runs its own
// Exporter on port_base + rank; "port 0 means disabled" is the caller's rule, here port 0 asks the kernel for
// a free port (tests use that), and port() reports it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"
#include "monitoring/http_server.h"
#include "monitoring/metrics.h"

namespace tessel::monitoring {

// The warning for a bind address that is not a loopback one (127.0.0.0/8, ::1): what it exposes, and to
// whom. "" for loopback. The coordinator logs it once for the job (every rank binds the same address).
std::string ExposureWarning(const std::string& bind, int32_t port_base);

class Exporter {
 public:
  // Starts serving `metrics` on bind:port. `bind` is a numeric IPv4 or IPv6 address ("127.0.0.1", "0.0.0.0",
  // "::1"); host names are refused. The Exporter shares ownership of the registry, so the last values stay
  // scrapeable even after `metrics` is destroyed.
  //
  // Ownership: the caller owns the returned Exporter; destroying it stops the server and joins its thread at
  // once.
  // Threads: Start may be called from any thread. The server answers scrapes on a thread of its own.
  // Failure: never throws. A malformed address, a port outside 0..65535 or a failed bind (port in use,
  // address not on this host, permission denied) returns a kUsage Status naming bind:port and the cause.
  static Result<std::unique_ptr<Exporter>> Start(const std::string& bind, int32_t port, Metrics& metrics);

  ~Exporter();
  Exporter(const Exporter&) = delete;
  Exporter& operator=(const Exporter&) = delete;

  // The port actually listened on (the kernel's choice when Start got port 0).
  int32_t port() const { return server_->port(); }
  const std::string& bind() const { return bind_; }
  // "http://BIND:PORT/metrics", with IPv6 addresses in brackets.
  std::string url() const;

 private:
  Exporter(std::string bind, std::unique_ptr<HttpServer> server);

  std::string bind_;
  std::unique_ptr<HttpServer> server_;  // its handler owns a share of the registry it serves
};

}  // namespace tessel::monitoring
