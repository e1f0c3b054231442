// Request decoding and validation, reply headers, and the collective checks that need nranks.
#include <cstring>
#include <random>

#include "cmesh_sidecar/collective.hpp"
#include "cmesh_sidecar/protocol.hpp"
#include "cmesh_sidecar/request.hpp"
#include "harness.hpp"

using namespace cmesh;

namespace {

ProtocolLimits smallLimits() {
  ProtocolLimits l;
  l.maxFrameBytes = 4096;
  l.maxTimeoutMs = 60000;
  return l;
}

/** A valid request for each op. */
Request valid(Op op) {
  Request r;
  r.op = op;
  r.id = 42;
  r.timeoutMs = 1000;
  r.dtype = 1;  // uint8
  switch (op) {
    case Op::Ping: r.delayMs = 5; break;
    case Op::CommInitRank: r.nranks = 4; r.rank = 3; r.device = 0; r.payloadLength = 128; break;
    case Op::Alloc: r.count = 1024; break;
    case Op::Free: r.buf = 7; break;
    case Op::Memset: r.buf = 7; r.count = kCountToEnd; r.value = 255; break;
    case Op::CopyIn: r.buf = 7; r.dtype = 7; r.count = 16; r.payloadLength = 64; break;
    case Op::CopyOut: r.buf = 7; r.count = 64; break;
    case Op::Collective:
      r.comm = 3; r.collective = 0; r.dtype = 7; r.redOp = 0; r.count = 256; r.sendBuf = 1; r.recvBuf = 2;
      r.iters = 1; break;
    case Op::AsyncError: case Op::Abort: case Op::Destroy: r.comm = 3; break;
    default: break;
  }
  return r;
}

DecodeResult decode(const Request& r, Request& out, const ProtocolLimits& l = smallLimits()) {
  uint8_t bytes[kRequestHeaderBytes];
  encodeRequest(r, bytes);
  return decodeRequest(bytes, sizeof bytes, l, out);
}

/** Expects a Skip with `code` whose message names `field`. */
void expectRejected(const Request& r, ErrorCode code, const std::string& needle, const char* file, int line) {
  Request out;
  DecodeResult d = decode(r, out);
  if (d.kind != DecodeResult::Kind::Skip || d.code != code || d.message.find(needle) == std::string::npos)
    harness::fail(file, line, std::string("expected ") + errorName(code) + " naming \"" + needle + "\", got kind " +
                                  std::to_string(static_cast<int>(d.kind)) + " " + errorName(d.code) + ": " +
                                  d.message);
}
#define EXPECT_REJECTED(r, code, needle) expectRejected((r), (code), (needle), __FILE__, __LINE__)

}  // namespace

TEST(protocol, every_op_round_trips) {
  for (uint16_t c = 1; c <= kMaxOpCode; c++) {
    Request in = valid(static_cast<Op>(c)), out;
    DecodeResult d = decode(in, out);
    CHECK(d.ok());
    if (!d.ok()) std::fprintf(stderr, "    op %s: %s\n", opName(c), d.message.c_str());
    CHECK(out.op == in.op);
    CHECK_EQ(out.id, in.id);
    CHECK_EQ(out.count, in.count);
    CHECK_EQ(out.payloadLength, in.payloadLength);
    CHECK_EQ(out.sendPeer, in.sendPeer);
    CHECK_EQ(out.timeoutMs, in.timeoutMs);
  }
}

TEST(protocol, header_layout_is_little_endian_at_fixed_offsets) {
  Request r = valid(Op::Collective);
  r.id = 0x0102030405060708ull & kMaxRequestId;
  r.count = 0x1122;
  uint8_t b[kRequestHeaderBytes];
  encodeRequest(r, b);
  CHECK(std::memcmp(b, "CMRQ", 4) == 0);
  CHECK_EQ(loadLe16(b + 4), 2);
  CHECK_EQ(loadLe16(b + 6), 128);
  CHECK_EQ(loadLe16(b + 8), 11);
  CHECK_EQ(int(b[10]), 7);
  CHECK_EQ(loadLe64(b + 16), r.id);
  CHECK_EQ(int(b[48]), 0x22);
  CHECK_EQ(int(b[49]), 0x11);
}

TEST(protocol, stream_level_errors_are_fatal) {
  Request out;
  uint8_t b[kRequestHeaderBytes];
  encodeRequest(valid(Op::Hello), b);
  b[0] = '{';
  DecodeResult d = decodeRequest(b, sizeof b, smallLimits(), out);
  CHECK(d.kind == DecodeResult::Kind::Fatal);
  CHECK(d.code == ErrorCode::BadFrame);
  CHECK_CONTAINS(d.message, "magic");

  Request v1 = valid(Op::Hello);
  v1.version = 1;
  d = decode(v1, out);
  CHECK(d.kind == DecodeResult::Kind::Fatal);
  CHECK_CONTAINS(d.message, "'version' = 1");

  encodeRequest(valid(Op::Hello), b);
  storeLe16(b + 6, 129);
  d = decodeRequest(b, sizeof b, smallLimits(), out);
  CHECK(d.kind == DecodeResult::Kind::Fatal);
  CHECK_CONTAINS(d.message, "'headerLength' = 129");
}

TEST(protocol, truncated_headers_are_fatal_and_read_nothing_past_the_end) {
  Request in = valid(Op::Collective), out;
  uint8_t b[kRequestHeaderBytes];
  encodeRequest(in, b);
  for (size_t n = 0; n < kRequestHeaderBytes; n++) {
    // A copy of exactly n bytes on the heap: a read past it would show under sanitizers.
    std::vector<uint8_t> part(b, b + n);
    DecodeResult d = decodeRequest(part.data(), n, smallLimits(), out);
    CHECK(d.kind == DecodeResult::Kind::Fatal);
    CHECK_CONTAINS(d.message, "truncated");
  }
}

TEST(protocol, oversized_frames_are_skipped_naming_the_limit) {
  Request r = valid(Op::CopyIn), out;
  r.count = 4096;
  r.dtype = 1;
  r.payloadLength = 4096;  // 128 + 4096 > 4096
  DecodeResult d = decode(r, out);
  // The header is sound: the payload is drained and the connection kept, the reply names the request.
  CHECK(d.kind == DecodeResult::Kind::Skip);
  CHECK(d.idKnown);
  CHECK(d.code == ErrorCode::BadFrame);
  CHECK_CONTAINS(d.message, "exceeds the limit of 4096");
  CHECK_CONTAINS(d.message, "'payloadLength'");
  r.payloadLength = 0xFFFFFFFFu;
  d = decode(r, out);
  CHECK(d.kind == DecodeResult::Kind::Skip);
  // Exactly at the limit is fine.
  r.count = r.payloadLength = 4096 - 128;
  d = decode(r, out);
  CHECK(d.ok());
}

TEST(protocol, bad_id_reserved_bytes_and_unknown_ops_are_skipped) {
  Request r = valid(Op::Hello), out;
  r.id = kMaxRequestId + 1;
  DecodeResult d = decode(r, out);
  CHECK(d.kind == DecodeResult::Kind::Skip);
  CHECK(d.code == ErrorCode::BadFrame);
  CHECK(!d.idKnown);
  CHECK_CONTAINS(d.message, "'id'");

  uint8_t b[kRequestHeaderBytes];
  encodeRequest(valid(Op::Hello), b);
  b[14] = 1;
  d = decodeRequest(b, sizeof b, smallLimits(), out);
  CHECK(d.kind == DecodeResult::Kind::Skip);
  CHECK_CONTAINS(d.message, "reserved header byte 14");

  for (uint16_t op : {0, 15, 999, 0xFFFF}) {
    Request u = valid(Op::Hello);
    u.op = static_cast<Op>(op);
    d = decode(u, out);
    CHECK(d.kind == DecodeResult::Kind::Skip);
    CHECK(d.code == ErrorCode::UnknownOp);
    CHECK(d.idKnown);
    CHECK_EQ(out.id, 42u);
    CHECK_CONTAINS(d.message, "unknown op " + std::to_string(op));
    CHECK_CONTAINS(d.message, "11 collective");
  }
}

TEST(protocol, unknown_codes_name_their_field) {
  Request r = valid(Op::Collective);
  r.dtype = 10;
  EXPECT_REJECTED(r, ErrorCode::InvalidArgument, "field 'dtype': unknown dtype code 10");
  r = valid(Op::Collective);
  r.dtype = 255;
  EXPECT_REJECTED(r, ErrorCode::InvalidArgument, "'dtype'");
  r = valid(Op::Collective);
  r.redOp = 5;
  EXPECT_REJECTED(r, ErrorCode::InvalidArgument, "field 'redOp': unknown reduce op code 5");
  r = valid(Op::Collective);
  r.collective = 11;
  EXPECT_REJECTED(r, ErrorCode::InvalidArgument, "field 'collective': unknown collective code 11");
  r = valid(Op::CopyOut);
  r.dtype = 42;
  EXPECT_REJECTED(r, ErrorCode::InvalidArgument, "'dtype'");
}

TEST(protocol, counts_that_overflow_or_exceed_the_maximum_are_rejected) {
  // 2^61 float64 elements = 2^64 bytes: wraps to 0, which must not match an empty payload.
  Request r = valid(Op::CopyIn);
  r.dtype = 8;
  r.count = uint64_t(1) << 61;
  r.payloadLength = 0;
  EXPECT_REJECTED(r, ErrorCode::InvalidArgument, "field 'count'");
  r = valid(Op::Alloc);
  r.count = kMaxBytes + 1;
  EXPECT_REJECTED(r, ErrorCode::InvalidArgument, "field 'count' = 281474976710657 is outside");
  r = valid(Op::Alloc);
  r.count = 0;
  EXPECT_REJECTED(r, ErrorCode::InvalidArgument, "field 'count' = 0");
  r = valid(Op::Collective);
  r.count = ~uint64_t(0);
  EXPECT_REJECTED(r, ErrorCode::InvalidArgument, "field 'count'");
  // copyOut's reply carries the bytes: bounded by the frame limit before anything is allocated.
  r = valid(Op::CopyOut);
  r.count = 4096 - 32 + 1;
  EXPECT_REJECTED(r, ErrorCode::InvalidArgument, "field 'count'");
  r.count = 4096 - 32;
  Request out;
  CHECK(decode(r, out).ok());
  r = valid(Op::Memset);
  r.count = kCountToEnd - 1;
  EXPECT_REJECTED(r, ErrorCode::InvalidArgument, "field 'count'");
}

TEST(protocol, payload_length_must_match_the_op) {
  Request r = valid(Op::CopyIn);  // 16 float32 = 64 bytes
  r.payloadLength = 63;
  EXPECT_REJECTED(r, ErrorCode::InvalidArgument, "field 'payloadLength' = 63 does not match count × element size = 64");
  r = valid(Op::Hello);
  r.payloadLength = 1;
  EXPECT_REJECTED(r, ErrorCode::InvalidArgument, "field 'payloadLength' = 1");
  r = valid(Op::Collective);
  r.payloadLength = 8;
  EXPECT_REJECTED(r, ErrorCode::InvalidArgument, "'payloadLength'");
  r = valid(Op::CommInitRank);
  r.payloadLength = 256;
  EXPECT_REJECTED(r, ErrorCode::InvalidArgument, "the ncclUniqueId size = 128");
}

TEST(protocol, ranges_of_every_field_are_checked) {
  auto with = [](Op op, auto set) {
    Request r = valid(op);
    set(r);
    return r;
  };
  const ErrorCode IA = ErrorCode::InvalidArgument;
  EXPECT_REJECTED(with(Op::Ping, [](Request& r) { r.delayMs = 60001; }), IA, "field 'delayMs' = 60001 is outside [0, 60000]");
  EXPECT_REJECTED(with(Op::Hello, [](Request& r) { r.timeoutMs = 60001; }), IA, "field 'timeoutMs'");
  EXPECT_REJECTED(with(Op::CommInitRank, [](Request& r) { r.nranks = 0; }), IA, "field 'nranks' = 0");
  EXPECT_REJECTED(with(Op::CommInitRank, [](Request& r) { r.nranks = kMaxNranks + 1; }), IA, "'nranks'");
  EXPECT_REJECTED(with(Op::CommInitRank, [](Request& r) { r.rank = 4; }), IA, "field 'rank' = 4 is outside [0, 3]");
  EXPECT_REJECTED(with(Op::CommInitRank, [](Request& r) { r.device = 0x80000000u; }), IA, "'device'");
  EXPECT_REJECTED(with(Op::Free, [](Request& r) { r.buf = 0; }), IA, "field 'buf' = 0");
  EXPECT_REJECTED(with(Op::Free, [](Request& r) { r.buf = kMaxHandle + 1; }), IA, "'buf'");
  EXPECT_REJECTED(with(Op::Memset, [](Request& r) { r.value = 256; }), IA, "field 'value' = 256");
  EXPECT_REJECTED(with(Op::Memset, [](Request& r) { r.offset = kMaxBytes + 1; }), IA, "field 'offset'");
  EXPECT_REJECTED(with(Op::AsyncError, [](Request& r) { r.comm = 0; }), IA, "field 'comm' = 0");
  EXPECT_REJECTED(with(Op::Collective, [](Request& r) { r.iters = 0; }), IA, "field 'iters' = 0");
  EXPECT_REJECTED(with(Op::Collective, [](Request& r) { r.warmup = kMaxIters + 1; }), IA, "field 'warmup'");
  EXPECT_REJECTED(with(Op::Collective, [](Request& r) { r.sendPeer = -2; }), IA, "field 'sendPeer' = -2");
  EXPECT_REJECTED(with(Op::Collective, [](Request& r) { r.recvPeer = int32_t(kMaxNranks); }), IA, "'recvPeer'");
  EXPECT_REJECTED(with(Op::Collective, [](Request& r) { r.root = kMaxNranks; }), IA, "field 'root'");
  EXPECT_REJECTED(with(Op::Collective, [](Request& r) { r.recvOffset = kMaxBytes + 1; }), IA, "field 'recvOffset'");
  EXPECT_REJECTED(with(Op::Collective, [](Request& r) { r.sendBuf = kMaxHandle + 1; }), IA, "field 'sendBuf'");
}

TEST(protocol, random_and_mutated_headers_never_crash_and_ok_means_valid) {
  std::mt19937_64 rng(12345);
  ProtocolLimits l = smallLimits();
  int ok = 0;
  for (int i = 0; i < 200000; i++) {
    uint8_t b[kRequestHeaderBytes];
    encodeRequest(valid(static_cast<Op>(1 + i % kMaxOpCode)), b);
    if (i % 4 == 0) {
      for (size_t k = 8; k < kRequestHeaderBytes; k++) b[k] = static_cast<uint8_t>(rng());
    } else {
      int flips = 1 + static_cast<int>(rng() % 4);
      for (int f = 0; f < flips; f++) b[8 + rng() % (kRequestHeaderBytes - 8)] ^= static_cast<uint8_t>(1u << (rng() % 8));
    }
    Request r;
    DecodeResult d = decodeRequest(b, sizeof b, l, r);
    if (!d.ok()) {
      CHECK(!d.message.empty());
      CHECK(d.code != ErrorCode::Ok);
      continue;
    }
    ok++;
    CHECK(static_cast<uint16_t>(r.op) >= 1 && static_cast<uint16_t>(r.op) <= kMaxOpCode);
    CHECK(kRequestHeaderBytes + uint64_t(r.payloadLength) <= l.maxFrameBytes);
    CHECK(r.id <= kMaxRequestId);
    if (r.op == Op::CopyIn) CHECK_EQ(uint64_t(r.payloadLength), r.count * dtypeInfo(r.dtype)->bytes);
    if (r.op == Op::CopyOut) CHECK(r.count * dtypeInfo(r.dtype)->bytes <= l.maxFrameBytes);
    if (r.op != Op::CopyIn && r.op != Op::CommInitRank) CHECK_EQ(r.payloadLength, 0u);
  }
  CHECK(ok > 1000);  // the mutations leave plenty of valid headers too
}

TEST(protocol, reply_headers_round_trip_and_error_names_map) {
  ReplyHeader h;
  h.op = 11;
  h.status = ErrorCode::NcclError;
  h.idKnown = true;
  h.id = 99;
  h.bodyLength = 5;
  h.payloadLength = 7;
  uint8_t b[kReplyHeaderBytes];
  encodeReply(h, b);
  CHECK(std::memcmp(b, "CMRP", 4) == 0);
  ReplyHeader back;
  std::string err;
  CHECK(decodeReply(b, sizeof b, back, err));
  CHECK_EQ(back.op, 11);
  CHECK(back.status == ErrorCode::NcclError);
  CHECK(back.idKnown);
  CHECK_EQ(back.id, 99u);
  CHECK_EQ(back.bodyLength, 5u);
  CHECK_EQ(back.payloadLength, 7u);
  CHECK(!decodeReply(b, 31, back, err));
  for (uint16_t c = 1; c <= 10; c++) CHECK(errorCodeOf(errorName(static_cast<ErrorCode>(c))) == static_cast<ErrorCode>(c));
  CHECK(errorCodeOf("NO_SUCH") == ErrorCode::Internal);
  CHECK_EQ(std::string(errorName(ErrorCode::InvalidArgument)), std::string(codes::kInvalidArgument));
}

TEST(protocol, collectives_are_checked_against_the_communicator) {
  Request r = valid(Op::Collective);
  auto rejects = [](const Request& q, int nranks, int rank, const std::string& needle) {
    try {
      parseCollective(q, nranks, rank);
      return std::string("accepted");
    } catch (const SidecarError& e) {
      std::string m = e.what();
      return e.code() == std::string(codes::kInvalidArgument) && m.find(needle) != std::string::npos ? std::string()
                                                                                                      : m;
    }
  };
  CollectiveSpec s = parseCollective(r, 4, 0);
  CHECK(s.kind == CollKind::AllReduce);
  CHECK_EQ(s.elementBytes, 4u);
  CHECK_EQ(sendExtentBytes(s, 4, 0), 1024u);
  Request q = r;
  q.collective = static_cast<uint8_t>(CollKind::AllGather);
  CHECK_EQ(recvExtentBytes(parseCollective(q, 4, 0), 4, 0), 4096u);
  q = r;
  q.root = 4;
  CHECK_EQ(rejects(q, 4, 0, "field 'root' = 4 is outside [0, 3]"), "");
  q = r;
  q.collective = static_cast<uint8_t>(CollKind::AllToAll);
  q.count = kMaxBytes / 4 / 2;  // fits one rank's slot, not n·c for 4 ranks
  CHECK_EQ(rejects(q, 4, 0, "field 'count'"), "");
  q = r;
  q.collective = static_cast<uint8_t>(CollKind::SendRecv);
  CHECK_EQ(rejects(q, 4, 0, "needs field 'sendPeer'"), "");
  q.sendPeer = 1;
  CHECK_EQ(rejects(q, 4, 0, "needs field 'recvPeer'"), "");
  q.recvPeer = 5;
  CHECK_EQ(rejects(q, 4, 0, "field 'recvPeer' = 5"), "");
  q = r;
  q.sendBuf = 0;
  CHECK_EQ(rejects(q, 4, 0, "needs 'sendBuf'"), "");
  q = r;
  q.collective = static_cast<uint8_t>(CollKind::Broadcast);
  q.sendBuf = 0;
  q.root = 1;
  CHECK(parseCollective(q, 4, 0).name == "broadcast");  // only the root reads sendBuf
}
