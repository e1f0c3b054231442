// Length-prefixed frames on a stream socket (see README.md, "Frame format"):
//   u32 LE frameLength  = 4 + headerLength + payloadLength (bytes after this field)
//   u32 LE headerLength
//   header  (UTF-8 JSON object)
//   payload (raw bytes, may be empty)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace cmesh {

struct Frame {
  std::string header;
  std::vector<uint8_t> payload;
};

enum class ReadStatus {
  Ok,         // a whole frame was read
  Closed,     // peer closed cleanly between frames
  Malformed,  // boundaries known, contents bad (headerLength > frameLength): stream still in sync
  Stalled,    // a started frame did not complete within the stall timeout: connection is dropped
  Fatal,      // stream out of sync or broken (length over the limit, truncated)
};

class FrameReader {
 public:
  /** maxFrameBytes bounds frameLength; stallTimeoutMs bounds the wait for the rest of a started frame. */
  FrameReader(int fd, uint64_t maxFrameBytes, int stallTimeoutMs)
      : fd_(fd), maxFrameBytes_(maxFrameBytes), stallTimeoutMs_(stallTimeoutMs) {}
  /** Reads the next frame; on anything but Ok, `error` says why. */
  ReadStatus read(Frame& out, std::string& error);

 private:
  /** Reads exactly n bytes. `started` = part of a frame was already read (so EOF is truncation). */
  ReadStatus readExact(uint8_t* dst, size_t n, bool started, std::string& error);

  int fd_;
  uint64_t maxFrameBytes_;
  int stallTimeoutMs_;
};

/** Writes one frame (blocking, whole). False when the peer is gone. */
bool writeFrame(int fd, const std::string& header, const uint8_t* payload, size_t payloadLen);

}  // namespace cmesh
