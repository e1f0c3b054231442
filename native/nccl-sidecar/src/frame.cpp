#include "cmesh_sidecar/frame.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace cmesh {

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

ReadStatus FrameReader::skip(size_t n, std::string& error) {
  uint8_t sink[64 * 1024];
  while (n > 0) {
    size_t chunk = n < sizeof sink ? n : sizeof sink;
    ReadStatus st = readExact(sink, chunk, true, error);
    if (st != ReadStatus::Ok) return st;
    n -= chunk;
  }
  return ReadStatus::Ok;
}

ReadStatus FrameReader::read(Frame& out, DecodeResult& error) {
  uint8_t header[kRequestHeaderBytes];
  // The first bytes decide whether a frame started (EOF before them is a clean close).
  ReadStatus st = readExact(header, 1, false, error.message);
  if (st == ReadStatus::Ok) st = readExact(header + 1, kRequestHeaderBytes - 1, true, error.message);
  if (st != ReadStatus::Ok) {
    error.code = st == ReadStatus::Stalled ? ErrorCode::Timeout : ErrorCode::BadFrame;
    return st;
  }
  error = decodeRequest(header, sizeof header, limits_, out.req);
  if (error.kind == DecodeResult::Kind::Fatal) return ReadStatus::Fatal;
  if (error.kind == DecodeResult::Kind::Skip) {
    // The frame's extent is known: swallow its payload (without allocating) so the next frame parses.
    std::string why;
    st = skip(out.req.payloadLength, why);
    if (st != ReadStatus::Ok) {
      error.message += "; then " + why;
      if (st == ReadStatus::Stalled) error.code = ErrorCode::Timeout;
      return st;
    }
    return ReadStatus::Malformed;
  }
  // payloadLength was checked against limits.maxFrameBytes by decodeRequest. The buffer grows with
  // what arrives (doubling from 64 KiB): a header alone never makes the sidecar allocate what it
  // announces, so connections that announce large payloads and send nothing hold nothing.
  const size_t want = out.req.payloadLength;
  size_t have = 0;
  out.payload.clear();
  while (have < want) {
    size_t next = std::min(want, std::max<size_t>(have * 2, 64 * 1024));
    out.payload.resize(next);
    st = readExact(out.payload.data() + have, next - have, true, error.message);
    if (st != ReadStatus::Ok) {
      error.code = st == ReadStatus::Stalled ? ErrorCode::Timeout : ErrorCode::BadFrame;
      error.idKnown = true;
      return st;
    }
    have = next;
  }
  return ReadStatus::Ok;
}

bool writeReply(int fd, const ReplyHeader& h, const std::string& body, const uint8_t* payload, size_t payloadLen) {
  uint8_t prefix[kReplyHeaderBytes];
  encodeReply(h, prefix);
  iovec iov[3] = {{prefix, sizeof prefix}, {const_cast<char*>(body.data()), body.size()},
                  {const_cast<uint8_t*>(payload), payloadLen}};
  int iovcnt = 3;
  size_t total = sizeof prefix + body.size() + payloadLen;
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
