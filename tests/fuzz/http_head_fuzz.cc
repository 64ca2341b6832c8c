// libFuzzer target: the metrics server's request-head parser (monitoring/http_server.h), which reads bytes
// any client on the network may send. Beyond "no crash": a head it accepts has a token method and a path
// that starts with '/' (or is "*") and holds no query, space or control byte; feeding the same bytes with
// more appended never changes a decided answer (the server decides once the blank line has arrived); and
// the response it would format states the Content-Length of the body it carries.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "monitoring/http_server.h"

namespace tessel::monitoring {
namespace {

[[noreturn]] void Fail(const std::string& what, std::string_view input) {
  std::fprintf(stderr, "http_head_fuzz: %s (input of %zu bytes)\n", what.c_str(), input.size());
  std::abort();
}

void Check(std::string_view input) {
  const std::optional<HttpHead> head = ParseHttpHead(input);
  if (!head) return;
  const std::optional<HttpHead> again = ParseHttpHead(std::string(input) + "GET / HTTP/1.1\r\n\r\n");
  if (!again || again->status != head->status || again->method != head->method || again->path != head->path) {
    Fail("appending bytes after a complete head changed its answer", input);
  }
  if (head->status != 0) {
    if (head->status != 400 && head->status != 505) Fail("an error status other than 400 or 505", input);
    return;
  }
  if (head->method.empty()) Fail("an accepted head with an empty method", input);
  if (head->path.empty() || (head->path[0] != '/' && head->path != "*")) Fail("a path that is not origin-form", input);
  for (char c : head->path) {
    if (c == '?' || static_cast<unsigned char>(c) <= 0x20 || c == 0x7f)
      Fail("a path with a query or control byte", input);
  }
  HttpResponse response;
  response.body = head->path;
  const std::string wire = FormatHttpResponse(response, false);
  if (wire.find("Content-Length: " + std::to_string(head->path.size()) + "\r\n") == std::string::npos ||
      wire.substr(wire.size() - head->path.size()) != head->path) {
    Fail("a formatted response whose length or body is wrong", input);
  }
}

}  // namespace
}  // namespace tessel::monitoring

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tessel::monitoring::Check(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
