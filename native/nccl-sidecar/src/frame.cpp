#include "cmesh_sidecar/frame.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace cmesh {

namespace {

uint32_t loadLe32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}

void storeLe32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
  p[2] = static_cast<uint8_t>(v >> 16);
  p[3] = static_cast<uint8_t>(v >> 24);
}

}  // namespace

ReadStatus FrameReader::readExact(uint8_t* dst, size_t n, bool started, std::string& error) {
  using Clock = std::chrono::steady_clock;
  auto stallDeadline = Clock::now() + std::chrono::milliseconds(stallTimeoutMs_);
  size_t got = 0;
  while (got < n) {
    if (started) {
      // Inside a frame: a peer that stops sending must not pin this connection forever.
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(stallDeadline - Clock::now()).count();
      if (left <= 0) {
        error = "frame stalled: " + std::to_string(got) + " of " + std::to_string(n) + " bytes arrived within " +
                std::to_string(stallTimeoutMs_) + " ms";
        return ReadStatus::Stalled;
      }
      pollfd pfd{fd_, POLLIN, 0};
      int pr = ::poll(&pfd, 1, static_cast<int>(left));
      if (pr < 0 && errno == EINTR) continue;
      if (pr < 0) { error = std::string("poll: ") + std::strerror(errno); return ReadStatus::Fatal; }
      if (pr == 0) continue;  // re-check the deadline
    }
    ssize_t r = ::recv(fd_, dst + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) { error = std::string("recv: ") + std::strerror(errno); return ReadStatus::Fatal; }
    if (r == 0) {
      if (!started && got == 0) return ReadStatus::Closed;
      error = "connection closed inside a frame";
      return ReadStatus::Fatal;
    }
    got += static_cast<size_t>(r);
    if (!started) {
      started = true;
      stallDeadline = Clock::now() + std::chrono::milliseconds(stallTimeoutMs_);
    }
  }
  return ReadStatus::Ok;
}

ReadStatus FrameReader::read(Frame& out, std::string& error) {
  uint8_t prefix[4];
  ReadStatus st = readExact(prefix, 4, false, error);
  if (st != ReadStatus::Ok) return st;
  uint32_t frameLen = loadLe32(prefix);
  if (frameLen < 4) {
    error = "frameLength " + std::to_string(frameLen) + " is below the 4-byte minimum";
    return ReadStatus::Fatal;
  }
  if (frameLen > maxFrameBytes_) {
    error = "frameLength " + std::to_string(frameLen) + " exceeds the limit of " + std::to_string(maxFrameBytes_) +
            " bytes";
    return ReadStatus::Fatal;
  }
  uint8_t hl[4];
  st = readExact(hl, 4, true, error);
  if (st != ReadStatus::Ok) return st;
  uint32_t headerLen = loadLe32(hl);
  size_t rest = frameLen - 4;
  if (headerLen > rest) {
    // The frame's extent is still known: swallow it so the next frame parses.
    std::vector<uint8_t> sink(rest);
    st = readExact(sink.data(), rest, true, error);
    if (st != ReadStatus::Ok) return st;
    error = "headerLength " + std::to_string(headerLen) + " exceeds frameLength - 4 = " + std::to_string(rest);
    return ReadStatus::Malformed;
  }
  out.header.resize(headerLen);
  st = readExact(reinterpret_cast<uint8_t*>(&out.header[0]), headerLen, true, error);
  if (st != ReadStatus::Ok) return st;
  out.payload.resize(rest - headerLen);
  return readExact(out.payload.data(), out.payload.size(), true, error);
}

bool writeFrame(int fd, const std::string& header, const uint8_t* payload, size_t payloadLen) {
  uint8_t prefix[8];
  storeLe32(prefix, static_cast<uint32_t>(4 + header.size() + payloadLen));
  storeLe32(prefix + 4, static_cast<uint32_t>(header.size()));
  iovec iov[3] = {{prefix, 8}, {const_cast<char*>(header.data()), header.size()},
                  {const_cast<uint8_t*>(payload), payloadLen}};
  int iovcnt = payloadLen ? 3 : 2;
  size_t total = 8 + header.size() + payloadLen;
  size_t sent = 0;
  while (sent < total) {
    // Advance the iovecs past what was sent.
    iovec cur[3];
    int n = 0;
    size_t skip = sent;
    for (int i = 0; i < iovcnt; i++) {
      if (skip >= iov[i].iov_len) { skip -= iov[i].iov_len; continue; }
      cur[n].iov_base = static_cast<char*>(iov[i].iov_base) + skip;
      cur[n].iov_len = iov[i].iov_len - skip;
      skip = 0;
      n++;
    }
    msghdr msg{};
    msg.msg_iov = cur;
    msg.msg_iovlen = n;
    ssize_t w = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    sent += static_cast<size_t>(w);
  }
  return true;
}

}  // namespace cmesh
