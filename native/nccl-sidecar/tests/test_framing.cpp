// FrameReader / writeReply over a socketpair: whole, split, skipped, truncated, stalled and
// oversized frames.
#include <chrono>
#include <thread>

#include "cmesh_sidecar/frame.hpp"
#include "harness.hpp"
#include "support.hpp"

using namespace cmesh;
using namespace testsupport;

namespace {

ProtocolLimits limits() {
  ProtocolLimits l;
  l.maxFrameBytes = 1 << 20;
  l.maxTimeoutMs = 60000;
  return l;
}

Request copyIn(uint64_t id, uint32_t bytes) {
  Request r;
  r.op = Op::CopyIn;
  r.id = id;
  r.buf = 1;
  r.dtype = 1;
  r.count = bytes;
  r.payloadLength = bytes;
  return r;
}

std::vector<uint8_t> pattern(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; i++) v[i] = static_cast<uint8_t>(i * 7 + 3);
  return v;
}

}  // namespace

TEST(framing, reads_whole_frames_back_to_back) {
  SocketPair sp;
  auto one = frameBytes(copyIn(1, 1000), pattern(1000));
  Request hello;
  hello.op = Op::Hello;
  hello.id = 2;
  auto two = frameBytes(hello);
  one.insert(one.end(), two.begin(), two.end());
  CHECK(writeAll(sp.a, one.data(), one.size()));
  FrameReader reader(sp.b, limits(), 1000);
  Frame f;
  DecodeResult err;
  CHECK(reader.read(f, err) == ReadStatus::Ok);
  CHECK_EQ(f.req.id, 1u);
  CHECK(f.payload == pattern(1000));
  Frame g;
  CHECK(reader.read(g, err) == ReadStatus::Ok);
  CHECK(g.req.op == Op::Hello);
  CHECK(g.payload.empty());
  sp.closeA();
  CHECK(reader.read(g, err) == ReadStatus::Closed);
}

TEST(framing, reassembles_a_frame_sent_byte_by_byte) {
  SocketPair sp;
  auto bytes = frameBytes(copyIn(5, 300), pattern(300));
  std::thread writer([&] {
    for (uint8_t b : bytes) writeAll(sp.a, &b, 1);
  });
  FrameReader reader(sp.b, limits(), 2000);
  Frame f;
  DecodeResult err;
  CHECK(reader.read(f, err) == ReadStatus::Ok);
  CHECK(f.payload == pattern(300));
  writer.join();
}

TEST(framing, skips_an_invalid_frame_with_its_payload_and_stays_in_sync) {
  SocketPair sp;
  Request bad = copyIn(7, 5000);
  bad.dtype = 77;  // unknown: the frame is skipped, payload and all
  auto bytes = frameBytes(bad, pattern(5000));
  auto next = frameBytes(copyIn(8, 16), pattern(16));
  bytes.insert(bytes.end(), next.begin(), next.end());
  std::thread writer([&] { writeAll(sp.a, bytes.data(), bytes.size()); });
  FrameReader reader(sp.b, limits(), 1000);
  Frame f;
  DecodeResult err;
  CHECK(reader.read(f, err) == ReadStatus::Malformed);
  CHECK(err.code == ErrorCode::InvalidArgument);
  CHECK(err.idKnown);
  CHECK_EQ(f.req.id, 7u);
  CHECK_CONTAINS(err.message, "'dtype'");
  Frame g;
  DecodeResult err2;
  CHECK(reader.read(g, err2) == ReadStatus::Ok);
  CHECK_EQ(g.req.id, 8u);
  CHECK(g.payload == pattern(16));
  writer.join();
}

TEST(framing, oversized_frames_are_drained_without_storing_and_the_stream_goes_on) {
  SocketPair sp;
  const uint32_t big = (2u << 20) + 5;  // over the 1 MiB limit
  Request r = copyIn(9, big);
  auto bytes = frameBytes(r, std::vector<uint8_t>(big, 0xab));
  Request next = copyIn(10, 16);
  auto more = frameBytes(next, pattern(16));
  bytes.insert(bytes.end(), more.begin(), more.end());
  std::thread writer([&] { CHECK(writeAll(sp.a, bytes.data(), bytes.size())); });
  FrameReader reader(sp.b, limits(), 1000);
  Frame f;
  DecodeResult err;
  CHECK(reader.read(f, err) == ReadStatus::Malformed);
  CHECK(err.code == ErrorCode::BadFrame);
  CHECK(err.idKnown);
  CHECK_EQ(f.req.id, 9u);
  CHECK_CONTAINS(err.message, "exceeds the limit of 1048576 bytes");
  CHECK(f.payload.capacity() == 0);
  Frame g;
  CHECK(reader.read(g, err) == ReadStatus::Ok);
  CHECK_EQ(g.req.id, 10u);
  CHECK(g.payload == pattern(16));
  writer.join();
}

TEST(framing, garbage_is_fatal) {
  SocketPair sp;
  std::string junk(200, 'x');
  junk.replace(0, 8, "{\"id\": 1");
  CHECK(writeAll(sp.a, junk.data(), junk.size()));
  FrameReader reader(sp.b, limits(), 1000);
  Frame f;
  DecodeResult err;
  CHECK(reader.read(f, err) == ReadStatus::Fatal);
  CHECK_CONTAINS(err.message, "bad magic");
}

TEST(framing, truncated_header_or_payload_is_fatal) {
  {
    SocketPair sp;
    auto bytes = frameBytes(copyIn(1, 10), pattern(10));
    CHECK(writeAll(sp.a, bytes.data(), 50));
    sp.closeA();
    FrameReader reader(sp.b, limits(), 1000);
    Frame f;
    DecodeResult err;
    CHECK(reader.read(f, err) == ReadStatus::Fatal);
    CHECK_CONTAINS(err.message, "closed inside a frame");
  }
  {
    SocketPair sp;
    auto bytes = frameBytes(copyIn(3, 100), pattern(100));
    CHECK(writeAll(sp.a, bytes.data(), kRequestHeaderBytes + 10));
    sp.closeA();
    FrameReader reader(sp.b, limits(), 1000);
    Frame f;
    DecodeResult err;
    CHECK(reader.read(f, err) == ReadStatus::Fatal);
    CHECK(err.idKnown);
    CHECK_EQ(f.req.id, 3u);
  }
}

TEST(framing, a_stalled_frame_times_out) {
  SocketPair sp;
  auto bytes = frameBytes(copyIn(1, 10), pattern(10));
  CHECK(writeAll(sp.a, bytes.data(), 11));
  FrameReader reader(sp.b, limits(), 200);
  Frame f;
  DecodeResult err;
  auto t0 = std::chrono::steady_clock::now();
  CHECK(reader.read(f, err) == ReadStatus::Stalled);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  CHECK(ms >= 190 && ms < 2000);
  CHECK(err.code == ErrorCode::Timeout);
  CHECK_CONTAINS(err.message, "stalled");
}

TEST(framing, replies_carry_header_body_and_payload) {
  SocketPair sp;
  ReplyHeader h;
  h.op = static_cast<uint16_t>(Op::CopyOut);
  h.idKnown = true;
  h.id = 77;
  std::string body = "{\"ok\":1}";
  auto payload = pattern(100000);  // larger than a socket buffer: written while read
  h.bodyLength = static_cast<uint32_t>(body.size());
  h.payloadLength = static_cast<uint32_t>(payload.size());
  std::thread writer([&] { CHECK(writeReply(sp.a, h, body, payload.data(), payload.size())); });
  Reply r;
  CHECK(readReply(sp.b, r));
  writer.join();
  CHECK(r.header.status == ErrorCode::Ok);
  CHECK_EQ(r.header.id, 77u);
  CHECK_EQ(r.body, body);
  CHECK(r.payload == payload);
}
