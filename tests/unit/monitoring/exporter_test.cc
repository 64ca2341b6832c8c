// Two ranks' exporters in one process, scraped over real HTTP with a raw-socket client.
#include "monitoring/exporter.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "tests/unit/monitoring/loopback_client.h"

namespace tessel::monitoring {
namespace {

// The response to GET http://127.0.0.1:port/path, or an error string (never throws).
struct HttpResponse {
  int status = 0;
  std::string body;
  std::string error;
};

HttpResponse HttpGet(int32_t port, const std::string& path) {
  HttpResponse response;
  const std::string raw =
      loopback::Exchange(port, "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  const size_t header_end = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.", 0) != 0 || header_end == std::string::npos) return {0, "", "no or a malformed response"};
  response.status = std::atoi(raw.c_str() + raw.find(' ') + 1);
  const std::string headers = raw.substr(0, header_end);
  response.body = raw.substr(header_end + 4);
  if (headers.find("chunked") != std::string::npos) response.error = "chunked body not supported by this client";
  return response;
}

// One sample line of the text exposition format: name{label="value",...} value
struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

std::vector<Sample> ParseExposition(const std::string& body) {
  std::vector<Sample> samples;
  std::istringstream in(body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    Sample sample;
    size_t i = line.find_first_of("{ ");
    sample.name = line.substr(0, i);
    if (i != std::string::npos && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        const size_t eq = line.find('=', i);
        const std::string key = line.substr(i, eq - i);
        std::string value;
        size_t j = eq + 2;  // past ="
        for (; j < line.size() && line[j] != '"'; ++j) {
          if (line[j] == '\\') ++j;
          value += line[j];
        }
        sample.labels[key] = value;
        i = j + 1;
        if (i < line.size() && line[i] == ',') ++i;
      }
      ++i;
    }
    sample.value = std::strtod(line.c_str() + i, nullptr);
    samples.push_back(std::move(sample));
  }
  return samples;
}

std::optional<Sample> Find(const std::vector<Sample>& samples, const std::string& name,
                           const std::map<std::string, std::string>& labels) {
  for (const Sample& sample : samples) {
    if (sample.name != name) continue;
    bool match = true;
    for (const auto& [key, value] : labels) {
      auto it = sample.labels.find(key);
      match = match && it != sample.labels.end() && it->second == value;
    }
    if (match) return sample;
  }
  return std::nullopt;
}

TEST(Exporter, TwoRanksServeTheirOwnMetrics) {
  Metrics rank0({"scrape", 0, std::string(kRoleCoordinator)}, "9.8.7");
  Metrics rank1({"scrape", 1, std::string(kRoleWorker)}, "9.8.7");
  auto exporter0 = Exporter::Start("127.0.0.1", 0, rank0);
  ASSERT_TRUE(exporter0.ok()) << exporter0.status().ToString();
  auto exporter1 = Exporter::Start("127.0.0.1", 0, rank1);
  ASSERT_TRUE(exporter1.ok()) << exporter1.status().ToString();
  ASSERT_GT((*exporter0)->port(), 0);
  ASSERT_GT((*exporter1)->port(), 0);
  ASSERT_NE((*exporter0)->port(), (*exporter1)->port());
  EXPECT_EQ((*exporter0)->url(), "http://127.0.0.1:" + std::to_string((*exporter0)->port()) + "/metrics");

  rank0.ObserveStep(0.5);
  rank0.Set("tessel_loss", 2.25);
  rank0.Set("tessel_workers_alive", 1);
  rank1.ObserveStep(0.02);
  rank1.ObserveStep(0.03);
  rank1.Set("tessel_loss", 0.125);

  struct Expect {
    int32_t port;
    std::string rank;
    std::string role;
    double loss;
    double steps;
  };
  for (const Expect& e : {Expect{(*exporter0)->port(), "0", "coordinator", 2.25, 1},
                          Expect{(*exporter1)->port(), "1", "worker", 0.125, 2}}) {
    SCOPED_TRACE("rank " + e.rank);
    const HttpResponse response = HttpGet(e.port, "/metrics");
    ASSERT_TRUE(response.error.empty()) << response.error;
    ASSERT_EQ(response.status, 200);
    const std::vector<Sample> samples = ParseExposition(response.body);
    const std::map<std::string, std::string> labels{{"job", "scrape"}, {"rank", e.rank}, {"role", e.role}};

    auto build = Find(samples, "tessel_build_info", {{"rank", e.rank}, {"version", "9.8.7"}});
    ASSERT_TRUE(build) << response.body;
    EXPECT_EQ(build->value, 1.0);
    auto loss = Find(samples, "tessel_loss", labels);
    ASSERT_TRUE(loss) << response.body;
    EXPECT_EQ(loss->value, e.loss);
    auto count = Find(samples, "tessel_step_duration_seconds_count", labels);
    ASSERT_TRUE(count) << response.body;
    EXPECT_EQ(count->value, e.steps);
    auto inf_bucket = Find(samples, "tessel_step_duration_seconds_bucket", {{"rank", e.rank}, {"le", "+Inf"}});
    ASSERT_TRUE(inf_bucket) << response.body;
    EXPECT_EQ(inf_bucket->value, e.steps);
    // No rank serves another rank's series.
    for (const Sample& sample : samples) {
      if (sample.name.rfind("tessel_", 0) == 0) {
        EXPECT_EQ(sample.labels.at("rank"), e.rank) << sample.name;
      }
    }
  }
  EXPECT_TRUE(
      Find(ParseExposition(HttpGet((*exporter0)->port(), "/metrics").body), "tessel_workers_alive", {{"rank", "0"}}));
  EXPECT_FALSE(Find(ParseExposition(HttpGet((*exporter1)->port(), "/metrics").body), "tessel_workers_alive", {}));
}

TEST(Exporter, ValuesStayScrapeableAfterMetricsIsDestroyed) {
  auto metrics = std::make_unique<Metrics>(RankLabels{"last", 0, std::string(kRoleEmbedded)}, "0.1.0");
  auto exporter = Exporter::Start("127.0.0.1", 0, *metrics);
  ASSERT_TRUE(exporter.ok()) << exporter.status().ToString();
  metrics->Set("tessel_loss", 0.5);
  metrics.reset();
  const HttpResponse response = HttpGet((*exporter)->port(), "/metrics");
  ASSERT_EQ(response.status, 200) << response.error;
  auto loss = Find(ParseExposition(response.body), "tessel_loss", {{"rank", "0"}});
  ASSERT_TRUE(loss) << response.body;
  EXPECT_EQ(loss->value, 0.5);
}

// A plain listening socket that holds a port for the duration of a test.
class HeldPort {
 public:
  HeldPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 && ::listen(fd_, 1) == 0 &&
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      port_ = ntohs(addr.sin_port);
    }
  }
  ~HeldPort() {
    if (fd_ >= 0) ::close(fd_);
  }
  int32_t port() const { return port_; }

 private:
  int fd_ = -1;
  int32_t port_ = 0;
};

TEST(Exporter, PortInUseIsAUsageErrorNamingThePort) {
  HeldPort held;
  ASSERT_GT(held.port(), 0);
  Metrics metrics({"busy", 0, std::string(kRoleWorker)}, "0.1.0");
  auto exporter = Exporter::Start("127.0.0.1", held.port(), metrics);
  ASSERT_FALSE(exporter.ok());
  EXPECT_EQ(exporter.status().code(), Code::kUsage);
  const std::string& message = exporter.status().message();
  EXPECT_NE(message.find("127.0.0.1:" + std::to_string(held.port())), std::string::npos) << message;
  EXPECT_NE(message.find("Address already in use"), std::string::npos) << message;
}

TEST(Exporter, SecondExporterOnTheSamePortFails) {
  Metrics rank0({"twice", 0, std::string(kRoleWorker)}, "0.1.0");
  Metrics rank1({"twice", 1, std::string(kRoleWorker)}, "0.1.0");
  auto first = Exporter::Start("127.0.0.1", 0, rank0);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = Exporter::Start("127.0.0.1", (*first)->port(), rank1);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Code::kUsage);
  EXPECT_NE(second.status().message().find(std::to_string((*first)->port())), std::string::npos);
  // The first one still serves.
  EXPECT_EQ(HttpGet((*first)->port(), "/metrics").status, 200);
}

TEST(Exporter, BadAddressOrPortIsAUsageError) {
  Metrics metrics({"bad", 0, std::string(kRoleWorker)}, "0.1.0");
  for (const auto& [bind, port] : std::vector<std::pair<std::string, int32_t>>{{"300.1.1.1", 9100},
                                                                               {"localhost", 9100},
                                                                               {"", 9100},
                                                                               {"127.0.0.1,0.0.0.0", 9100},
                                                                               {"127.0.0.1", 70000},
                                                                               {"127.0.0.1", -1}}) {
    auto exporter = Exporter::Start(bind, port, metrics);
    ASSERT_FALSE(exporter.ok()) << bind << ":" << port;
    EXPECT_EQ(exporter.status().code(), Code::kUsage);
    EXPECT_NE(exporter.status().message().find(bind + ":" + std::to_string(port)), std::string::npos)
        << exporter.status().message();
  }
}

TEST(Exporter, AddressNotOnThisHostIsAUsageError) {
  Metrics metrics({"remote", 0, std::string(kRoleWorker)}, "0.1.0");
  auto exporter = Exporter::Start("192.0.2.1", 0, metrics);  // TEST-NET-1: never a local address
  ASSERT_FALSE(exporter.ok());
  EXPECT_EQ(exporter.status().code(), Code::kUsage);
  EXPECT_NE(exporter.status().message().find("192.0.2.1:0"), std::string::npos) << exporter.status().message();
}

// Issue 32: `curl http://RANK:PORT/` (any path but /metrics), HEAD or POST killed the job with SIGSEGV in
// civetweb's error path. Every method and path gets an answer, and scraping goes on.
TEST(Exporter, EveryMethodAndPathIsAnsweredAndScrapingGoesOn) {
  Metrics metrics({"any", 0, std::string(kRoleWorker)}, "0.1.0");
  auto exporter = Exporter::Start("127.0.0.1", 0, metrics);
  ASSERT_TRUE(exporter.ok()) << exporter.status().ToString();
  const int32_t port = (*exporter)->port();
  EXPECT_EQ(HttpGet(port, "/").status, 200);
  EXPECT_EQ(HttpGet(port, "/favicon.ico").status, 404);
  EXPECT_EQ(HttpGet(port, "/metrics/../etc/passwd").status, 404);
  const auto raw = [&](const std::string& request) {
    const std::string answer = loopback::Exchange(port, request);
    return answer.substr(0, answer.find("\r\n"));
  };
  EXPECT_EQ(raw("HEAD /metrics HTTP/1.1\r\n\r\n"), "HTTP/1.1 200 OK");
  EXPECT_EQ(raw("POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc"), "HTTP/1.1 405 Method Not Allowed");
  EXPECT_EQ(raw("DELETE / HTTP/1.1\r\n\r\n"), "HTTP/1.1 405 Method Not Allowed");
  EXPECT_EQ(raw("\x16\x03\x01\x02\x05\x01\x07\x01\xfc\x03\x03\r\n\r\n"), "HTTP/1.1 400 Bad Request");  // TLS hello
  const HttpResponse scrape = HttpGet(port, "/metrics");
  EXPECT_EQ(scrape.status, 200) << scrape.error;
  EXPECT_NE(scrape.body.find("tessel_build_info"), std::string::npos);
}

TEST(Exporter, ANonLoopbackBindIsWarnedAbout) {
  EXPECT_EQ(ExposureWarning("127.0.0.1", 9100), "");
  EXPECT_EQ(ExposureWarning("127.3.4.5", 9100), "");
  EXPECT_EQ(ExposureWarning("::1", 9100), "");
  const std::string every = ExposureWarning("0.0.0.0", 9100);
  EXPECT_NE(every.find("metrics.bind = 0.0.0.0"), std::string::npos) << every;
  EXPECT_NE(every.find("any address of its host"), std::string::npos) << every;
  EXPECT_NE(every.find("without a password"), std::string::npos) << every;
  EXPECT_NE(ExposureWarning("10.1.2.3", 9100).find("reach 10.1.2.3"), std::string::npos);
}

TEST(Exporter, Ipv6LoopbackListensOrSaysWhyNot) {
  Metrics metrics({"v6", 0, std::string(kRoleWorker)}, "0.1.0");
  auto exporter = Exporter::Start("::1", 0, metrics);
  if (!exporter.ok()) {  // no IPv6 loopback on this host: a clear usage error
    EXPECT_EQ(exporter.status().code(), Code::kUsage);
    EXPECT_NE(exporter.status().message().find("[::1]:0"), std::string::npos) << exporter.status().message();
    return;
  }
  EXPECT_GT((*exporter)->port(), 0);
  EXPECT_EQ((*exporter)->url(), "http://[::1]:" + std::to_string((*exporter)->port()) + "/metrics");
}

}  // namespace
}  // namespace tessel::monitoring
