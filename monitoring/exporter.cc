#include "monitoring/exporter.h"

#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <utility>

#include "core/logging.h"

namespace tessel::monitoring {

std::string ExposureWarning(const std::string& bind, int32_t port_base) {
  if (bind.rfind("127.", 0) == 0 || bind == "::1") return "";
  const bool every = bind == "0.0.0.0" || bind == "::";
  return StrCat("metrics.bind = ", bind, ": every rank's exporter (ports ", port_base,
                " and up) answers anyone who can reach ", every ? "any address of its host" : bind,
                ", and serves the job's name, host names, step times, losses and memory use without a password; "
                "bind 127.0.0.1 and let a Prometheus on each host scrape it, unless this network is trusted");
}

Result<std::unique_ptr<Exporter>> Exporter::Start(const std::string& bind, int32_t port, Metrics& metrics) {
  // The handler shares ownership of the registry, so the last values stay scrapeable after `metrics` goes.
  std::shared_ptr<prometheus::Registry> registry = metrics.registry();
  auto handler = [registry](const HttpHead& head) {
    if (head.method != "GET" && head.method != "HEAD") {
      HttpResponse r;
      r.status = 405;
      r.body = StrCat("405 Method Not Allowed: ", head.method, " is not served; GET or HEAD /metrics\n");
      r.headers.emplace_back("Allow", "GET, HEAD");
      return r;
    }
    HttpResponse r;
    if (head.path == "/metrics") {
      r.content_type = "text/plain; version=0.0.4; charset=utf-8";
      r.body = prometheus::TextSerializer().Serialize(registry->Collect());
    } else if (head.path == "/") {
      r.body = "Tessel metrics exporter: GET /metrics (Prometheus text format 0.0.4)\n";
    } else {
      r.status = 404;
      r.body = "404 Not Found: this exporter serves /metrics only\n";
    }
    return r;
  };
  auto server = HttpServer::Start(bind, port, std::move(handler));
  if (!server.ok()) return UsageError(StrCat("metrics exporter ", server.status().message()));
  return std::unique_ptr<Exporter>(new Exporter(bind, std::move(server).value()));
}

Exporter::Exporter(std::string bind, std::unique_ptr<HttpServer> server)
    : bind_(std::move(bind)), server_(std::move(server)) {}

Exporter::~Exporter() = default;

std::string Exporter::url() const { return StrCat("http://", HostPort(bind_, port()), "/metrics"); }

}  // namespace tessel::monitoring
