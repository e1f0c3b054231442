// Helpers shared by the socket-level tests.
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cmesh_sidecar/protocol.hpp"

namespace testsupport {

struct SocketPair {
  int a = -1, b = -1;
  SocketPair() {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0) {
      a = fds[0];
      b = fds[1];
    }
  }
  ~SocketPair() {
    if (a >= 0) ::close(a);
    if (b >= 0) ::close(b);
  }
  void closeA() {
    if (a >= 0) ::close(a);
    a = -1;
  }
};

inline bool writeAll(int fd, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

inline std::vector<uint8_t> frameBytes(const cmesh::Request& r, const std::vector<uint8_t>& payload = {}) {
  std::vector<uint8_t> out(cmesh::kRequestHeaderBytes);
  cmesh::encodeRequest(r, out.data());
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

/** Reads exactly n bytes within timeoutMs; false on EOF, error or timeout. */
inline bool readAll(int fd, uint8_t* dst, size_t n, int timeoutMs = 5000) {
  size_t got = 0;
  while (got < n) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, timeoutMs) <= 0) return false;
    ssize_t r = ::recv(fd, dst + got, n - got, 0);
    if (r <= 0) return false;
    got += static_cast<size_t>(r);
  }
  return true;
}

struct Reply {
  cmesh::ReplyHeader header;
  std::string body;
  std::vector<uint8_t> payload;
};

/** Reads one reply frame; false on EOF/timeout/bad header. */
inline bool readReply(int fd, Reply& out, int timeoutMs = 5000) {
  uint8_t h[cmesh::kReplyHeaderBytes];
  if (!readAll(fd, h, sizeof h, timeoutMs)) return false;
  std::string err;
  if (!cmesh::decodeReply(h, sizeof h, out.header, err)) return false;
  out.body.assign(out.header.bodyLength, '\0');
  if (out.header.bodyLength && !readAll(fd, reinterpret_cast<uint8_t*>(&out.body[0]), out.body.size(), timeoutMs))
    return false;
  out.payload.assign(out.header.payloadLength, 0);
  return out.payload.empty() || readAll(fd, out.payload.data(), out.payload.size(), timeoutMs);
}

/** True when the peer has closed (EOF within timeoutMs). */
inline bool peerClosed(int fd, int timeoutMs = 5000) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, timeoutMs) <= 0) return false;
  char c;
  return ::recv(fd, &c, 1, MSG_PEEK) == 0;
}

}  // namespace testsupport
