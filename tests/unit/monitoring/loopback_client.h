// A raw-socket HTTP client on 127.0.0.1 for the exporter's and the HTTP server's tests: it sends exactly the
// bytes given (malformed ones included) and returns everything the server sends back until it closes.
// Thread safety: free functions. Failure: never throws; a connection that cannot be made gives "".
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdint>
#include <string>

namespace tessel::monitoring::loopback {

// A connected socket to 127.0.0.1:port with 5 s send and receive timeouts, or -1. The caller closes it.
inline int ConnectLoopback(int32_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  timeval timeout{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Everything the server sends on `fd` until it closes (or the 5 s timeout passes).
inline std::string ReadAll(int fd) {
  std::string raw;
  char buffer[4096];
  ssize_t n;
  while ((n = ::recv(fd, buffer, sizeof buffer, 0)) > 0) raw.append(buffer, static_cast<size_t>(n));
  return raw;
}

// Sends `bytes` on a new connection and returns the whole answer ("" when none).
inline std::string Exchange(int32_t port, const std::string& bytes) {
  const int fd = ConnectLoopback(port);
  if (fd < 0) return "";
  (void)::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  std::string raw = ReadAll(fd);
  ::close(fd);
  return raw;
}

}  // namespace tessel::monitoring::loopback
