// Frames on a stream socket (README.md, "Frame format"): a fixed 128-byte request header
// (protocol.hpp) then `payloadLength` payload bytes; replies: a 32-byte header, a body (result JSON
// or error message) and a payload.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cmesh_sidecar/protocol.hpp"

namespace cmesh {

struct Frame {
  Request req;
  std::vector<uint8_t> payload;
};

enum class ReadStatus {
  Ok,         // a whole, valid request was read
  Closed,     // peer closed cleanly between frames
  Malformed,  // the request was invalid, its payload skipped: reply with `error`, the stream is still in sync
  Stalled,    // a started frame did not complete within the stall timeout: reply, drop the connection
  Fatal,      // stream out of sync or broken (magic, version, oversized, truncated): reply, drop the connection
};

class FrameReader {
 public:
  /** limits.maxFrameBytes bounds header + payload; stallTimeoutMs bounds the wait for the rest of a started frame. */
  FrameReader(int fd, const ProtocolLimits& limits, int stallTimeoutMs)
      : fd_(fd), limits_(limits), stallTimeoutMs_(stallTimeoutMs) {}
  /**
   * Reads the next frame. On anything but Ok, `error` has the code and message for the error
   * reply (and error.idKnown says whether out.req.id / out.req.op may be echoed).
   */
  ReadStatus read(Frame& out, DecodeResult& error);

 private:
  /** Reads exactly n bytes. `started` = part of a frame was already read (so EOF is truncation). */
  ReadStatus readExact(uint8_t* dst, size_t n, bool started, std::string& error);
  /** Reads and discards n bytes through a fixed-size buffer. */
  ReadStatus skip(size_t n, std::string& error);

  int fd_;
  ProtocolLimits limits_;
  int stallTimeoutMs_;
};

/** Writes one reply frame (blocking, whole). False when the peer is gone. */
bool writeReply(int fd, const ReplyHeader& header, const std::string& body, const uint8_t* payload,
                size_t payloadLen);

}  // namespace cmesh
