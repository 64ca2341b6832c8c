// The metrics HTTP server: its head parser on its own, and the server over real loopback sockets with
// malformed, oversized, slow and too many requests.
#include "monitoring/http_server.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tests/unit/monitoring/loopback_client.h"

namespace tessel::monitoring {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

using loopback::Exchange;
using loopback::ReadAll;
constexpr auto Connect = loopback::ConnectLoopback;

HttpResponse Echo(const HttpHead& head) {
  if (head.path == "/throw") throw std::runtime_error("handler failed");
  HttpResponse r;
  r.body = head.method + " " + head.path;
  return r;
}

std::unique_ptr<HttpServer> StartEcho(HttpLimits limits = {}) {
  auto server = HttpServer::Start("127.0.0.1", 0, Echo, limits);
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  return server.ok() ? std::move(server).value() : nullptr;
}

TEST(ParseHttpHead, WaitsForTheBlankLine) {
  EXPECT_FALSE(ParseHttpHead("").has_value());
  EXPECT_FALSE(ParseHttpHead("GET /metrics HTTP/1.1\r\n").has_value());
  EXPECT_FALSE(ParseHttpHead("GET /metrics HTTP/1.1\r\nHost: x\r\n").has_value());
  EXPECT_FALSE(ParseHttpHead("\r\n\r\n\r\n").has_value());
}

TEST(ParseHttpHead, ReadsMethodAndPathWithoutTheQuery) {
  auto head = ParseHttpHead("\r\nGET /metrics?name[]=x HTTP/1.1\r\nHost: a:1\r\nAccept: */*\r\n\r\n");
  ASSERT_TRUE(head.has_value());
  EXPECT_EQ(head->status, 0);
  EXPECT_EQ(head->method, "GET");
  EXPECT_EQ(head->path, "/metrics");
  head = ParseHttpHead("HEAD http://host:9100/metrics HTTP/1.0\n\n");  // absolute-form, bare LF
  ASSERT_TRUE(head.has_value());
  EXPECT_EQ(head->status, 0);
  EXPECT_EQ(head->method, "HEAD");
  EXPECT_EQ(head->path, "/metrics");
}

TEST(ParseHttpHead, MalformedHeadsAre400And505) {
  for (const char* bad : {"GET /\r\n\r\n", "GET  / HTTP/1.1\r\n\r\n", "G(T / HTTP/1.1\r\n\r\n",
                          "GET / HTTP/1.1 extra\r\n\r\n", "GET / HTTX/1.1\r\n\r\n", "GET nopath HTTP/1.1\r\n\r\n",
                          "GET / HTTP/1.1\r\nno colon here\r\n\r\n", "GET / HTTP/1.1\r\n: empty name\r\n\r\n",
                          "GET / HTTP/1.1\r\n folded: header\r\n\r\n", "GET /a\x01 HTTP/1.1\r\n\r\n"}) {
    auto head = ParseHttpHead(bad);
    ASSERT_TRUE(head.has_value()) << bad;
    EXPECT_EQ(head->status, 400) << bad;
  }
  auto head = ParseHttpHead("GET / HTTP/2.0\r\n\r\n");
  ASSERT_TRUE(head.has_value());
  EXPECT_EQ(head->status, 505);
  head = ParseHttpHead(std::string("GET /\0 HTTP/1.1\r\n\r\n", 20));
  ASSERT_TRUE(head.has_value());
  EXPECT_EQ(head->status, 400);
}

TEST(HttpServer, AnswersWellFormedRequestsThroughTheHandler) {
  auto server = StartEcho();
  ASSERT_NE(server, nullptr);
  const std::string raw = Exchange(server->port(), "GET /x?y HTTP/1.1\r\nHost: h\r\n\r\n");
  EXPECT_THAT(raw, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(raw, HasSubstr("Content-Length: 6\r\n"));
  EXPECT_THAT(raw, HasSubstr("Connection: close\r\n"));
  EXPECT_THAT(raw, HasSubstr("\r\n\r\nGET /x"));
  // HEAD: the headers GET would send, no body.
  const std::string head = Exchange(server->port(), "HEAD /abc HTTP/1.0\r\n\r\n");
  EXPECT_THAT(head, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(head, HasSubstr("Content-Length: 9\r\n"));
  EXPECT_EQ(head.substr(head.size() - 4), "\r\n\r\n");
}

TEST(HttpServer, AnswersMalformedOversizedAndFailingRequestsItself) {
  auto server = StartEcho();
  ASSERT_NE(server, nullptr);
  EXPECT_THAT(Exchange(server->port(), "garbage\r\n\r\n"), StartsWith("HTTP/1.1 400 Bad Request\r\n"));
  EXPECT_THAT(Exchange(server->port(), "GET / HTTP/3.0\r\n\r\n"), StartsWith("HTTP/1.1 505 "));
  EXPECT_THAT(Exchange(server->port(), "GET / HTTP/1.1\r\nX: " + std::string(20000, 'a') + "\r\n\r\n"),
              StartsWith("HTTP/1.1 431 "));
  EXPECT_THAT(Exchange(server->port(), std::string(20000, 'G')), StartsWith("HTTP/1.1 431 "));
  const std::string failed = Exchange(server->port(), "GET /throw HTTP/1.1\r\n\r\n");
  EXPECT_THAT(failed, StartsWith("HTTP/1.1 500 "));
  EXPECT_THAT(failed, HasSubstr("handler failed"));
  // A POST with a body it never reads: the answer still arrives whole.
  const std::string post =
      Exchange(server->port(), "POST / HTTP/1.1\r\nContent-Length: 30000\r\n\r\n" + std::string(30000, 'b'));
  EXPECT_THAT(post, StartsWith("HTTP/1.1 200 "));
  EXPECT_THAT(post, HasSubstr("POST /"));
  EXPECT_EQ(server->answered(), 6);
}

TEST(HttpServer, SlowClientsGet408AtTheDeadline) {
  auto server = StartEcho({.connection_seconds = 0.3});
  ASSERT_NE(server, nullptr);
  const int fd = Connect(server->port());
  ASSERT_GE(fd, 0);
  (void)::send(fd, "GET /metr", 9, MSG_NOSIGNAL);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string raw = ReadAll(fd);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ::close(fd);
  EXPECT_THAT(raw, StartsWith("HTTP/1.1 408 "));
  EXPECT_LT(waited, 3.0);
  // A client that connects and says nothing is closed without an answer.
  const int idle = Connect(server->port());
  ASSERT_GE(idle, 0);
  EXPECT_EQ(ReadAll(idle), "");
  ::close(idle);
  EXPECT_EQ(server->dropped(), 2);
}

TEST(HttpServer, TooManyConnectionsAre503AndServingGoesOn) {
  auto server = StartEcho({.max_connections = 4, .connection_seconds = 5.0});
  ASSERT_NE(server, nullptr);
  std::vector<int> idle;
  for (int i = 0; i < 4; ++i) idle.push_back(Connect(server->port()));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // accepted before the next one
  EXPECT_THAT(Exchange(server->port(), "GET / HTTP/1.1\r\n\r\n"), StartsWith("HTTP/1.1 503 "));
  for (int fd : idle) ::close(fd);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_THAT(Exchange(server->port(), "GET / HTTP/1.1\r\n\r\n"), StartsWith("HTTP/1.1 200 "));
}

TEST(HttpServer, ClientsThatVanishDoNotStopIt) {
  auto server = StartEcho();
  ASSERT_NE(server, nullptr);
  for (int i = 0; i < 50; ++i) {
    const int fd = Connect(server->port());
    ASSERT_GE(fd, 0);
    if (i % 2 == 0) (void)::send(fd, "GET / HTTP/1.1\r\n\r\n", 18, MSG_NOSIGNAL);
    linger reset{1, 0};  // close with RST
    ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
    ::close(fd);
  }
  EXPECT_THAT(Exchange(server->port(), "GET /still HTTP/1.1\r\n\r\n"), HasSubstr("GET /still"));
}

TEST(HttpServer, BadAddressesAndBusyPortsAreUsageErrors) {
  auto bad = HttpServer::Start("localhost", 0, Echo);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kUsage);
  EXPECT_THAT(bad.status().message(), HasSubstr("localhost:0"));
  auto first = StartEcho();
  ASSERT_NE(first, nullptr);
  auto second = HttpServer::Start("127.0.0.1", first->port(), Echo);
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(second.status().message(), HasSubstr("Address already in use"));
}

}  // namespace
}  // namespace tessel::monitoring
