#include "cmesh_sidecar/protocol.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>

namespace cmesh {

namespace {

const char* const kOpNames[kMaxOpCode + 1] = {
    "",       "hello",   "ping",    "shutdown",   "getUniqueId", "commInitRank", "alloc", "free",
    "memset", "copyIn",  "copyOut", "collective", "asyncError",  "abort",        "destroy",
};

const char* const kErrorNames[] = {"OK",          "BAD_FRAME", "UNKNOWN_OP", "INVALID_ARGUMENT",
                                   "UNAVAILABLE", "NOT_FOUND", "TIMEOUT",    "ABORTED",
                                   "CUDA_ERROR",  "NCCL_ERROR", "INTERNAL"};
constexpr uint16_t kMaxErrorCode = 10;

const DtypeInfo kDtypes[] = {
    {"int8", 0, 1},    {"uint8", 1, 1},   {"int32", 2, 4},   {"uint32", 3, 4},   {"int64", 4, 8},
    {"uint64", 5, 8},  {"float16", 6, 2}, {"float32", 7, 4}, {"float64", 8, 8},  {"bfloat16", 9, 2},
};

const char* const kRedOpNames[kMaxRedOpCode + 1] = {"sum", "product", "max", "min", "avg"};

const char* const kCollectiveNames[kMaxCollectiveCode + 1] = {
    "allReduce", "broadcast", "reduce", "allGather", "reduceScatter", "sendRecv",
    "send",      "recv",      "gather", "scatter",   "allToAll",
};

// Request header offsets (README.md, "Request header").
enum Off : size_t {
  kOffMagic = 0, kOffVersion = 4, kOffHeaderLength = 6, kOffOp = 8, kOffDtype = 10, kOffRedOp = 11,
  kOffCollective = 12, kOffReserved = 13, kOffId = 16, kOffTimeout = 24, kOffPayloadLength = 28, kOffComm = 32,
  kOffBuf = 40, kOffCount = 48, kOffOffset = 56, kOffRecvOffset = 64, kOffSendBuf = 72, kOffRecvBuf = 80,
  kOffNranks = 88, kOffRank = 92, kOffDevice = 96, kOffRoot = 100, kOffSendPeer = 104, kOffRecvPeer = 108,
  kOffWarmup = 112, kOffIters = 116, kOffValue = 120, kOffDelay = 124,
};
static_assert(kOffDelay + 4 == kRequestHeaderBytes, "request header layout");

std::string range(uint64_t min, uint64_t max) { return "[" + std::to_string(min) + ", " + std::to_string(max) + "]"; }

/** Thrown inside decodeRequest only; becomes a DecodeResult. */
struct Reject {
  DecodeResult::Kind kind;
  ErrorCode code;
  std::string message;
};

[[noreturn]] void invalid(const std::string& message) {
  throw Reject{DecodeResult::Kind::Skip, ErrorCode::InvalidArgument, message};
}

void checkRange(const char* field, uint64_t v, uint64_t min, uint64_t max) {
  if (v < min || v > max)
    invalid(std::string("field '") + field + "' = " + std::to_string(v) + " is outside " + range(min, max));
}

void checkPeer(const char* field, int32_t v) {
  if (v < kNoPeer || v >= static_cast<int64_t>(kMaxNranks))
    invalid(std::string("field '") + field + "' = " + std::to_string(v) + " is outside [-1 (none), " +
            std::to_string(kMaxNranks - 1) + "]");
}

const DtypeInfo& requireDtype(const Request& r) {
  const DtypeInfo* d = dtypeInfo(r.dtype);
  if (!d) {
    std::string known;
    for (const auto& k : kDtypes) known += (known.empty() ? "" : ", ") + std::to_string(k.code) + " " + k.name;
    invalid("field 'dtype': unknown dtype code " + std::to_string(r.dtype) + "; known: " + known);
  }
  return *d;
}

/** count × element size, checked for overflow and against `maxBytes`; returns the byte count. */
uint64_t checkedBytes(const Request& r, const DtypeInfo& d, uint64_t minCount, uint64_t maxBytes) {
  uint64_t maxCount = maxBytes / d.bytes;
  if (r.count < minCount || r.count > maxCount)
    invalid("field 'count' = " + std::to_string(r.count) + " is outside " + range(minCount, maxCount) + " (at most " +
            std::to_string(maxBytes) + " bytes of " + d.name + ")");
  return r.count * d.bytes;
}

void requirePayload(const Request& r, uint64_t expected, const std::string& why) {
  if (r.payloadLength != expected)
    invalid("field 'payloadLength' = " + std::to_string(r.payloadLength) + " does not match " + why + " = " +
            std::to_string(expected));
}

void validateOp(const Request& r, const ProtocolLimits& limits) {
  checkRange("timeoutMs", r.timeoutMs, 0, limits.maxTimeoutMs);
  switch (r.op) {
    case Op::Hello: case Op::Shutdown: case Op::GetUniqueId:
      break;
    case Op::Ping:
      checkRange("delayMs", r.delayMs, 0, limits.maxTimeoutMs);
      break;
    case Op::CommInitRank:
      checkRange("nranks", r.nranks, 1, kMaxNranks);
      checkRange("rank", r.rank, 0, r.nranks - 1);
      checkRange("device", r.device, 0, static_cast<uint64_t>(std::numeric_limits<int32_t>::max()));
      requirePayload(r, 128, "the ncclUniqueId size");
      return;
    case Op::Alloc:
      checkRange("device", r.device, 0, static_cast<uint64_t>(std::numeric_limits<int32_t>::max()));
      checkedBytes(r, requireDtype(r), 1, kMaxBytes);
      break;
    case Op::Free:
      checkRange("buf", r.buf, 1, kMaxHandle);
      break;
    case Op::Memset: {
      checkRange("buf", r.buf, 1, kMaxHandle);
      checkRange("offset", r.offset, 0, kMaxBytes);
      const DtypeInfo& d = requireDtype(r);
      if (r.count != kCountToEnd) checkedBytes(r, d, 0, kMaxBytes);
      checkRange("value", r.value, 0, 255);
      break;
    }
    case Op::CopyIn: {
      checkRange("buf", r.buf, 1, kMaxHandle);
      checkRange("offset", r.offset, 0, kMaxBytes);
      uint64_t bytes = checkedBytes(r, requireDtype(r), 0, kMaxBytes);
      requirePayload(r, bytes, "count × element size");
      return;
    }
    case Op::CopyOut:
      checkRange("buf", r.buf, 1, kMaxHandle);
      checkRange("offset", r.offset, 0, kMaxBytes);
      // The reply carries the bytes: bounded by the frame limit, before anything is allocated.
      checkedBytes(r, requireDtype(r), 0,
                   std::min<uint64_t>(kMaxBytes, limits.maxFrameBytes > kReplyHeaderBytes
                                                     ? limits.maxFrameBytes - kReplyHeaderBytes
                                                     : 0));
      break;
    case Op::Collective: {
      checkRange("comm", r.comm, 1, kMaxHandle);
      if (!collectiveName(r.collective)) {
        std::string known;
        for (uint8_t c = 0; c <= kMaxCollectiveCode; c++)
          known += (known.empty() ? "" : ", ") + std::to_string(c) + " " + kCollectiveNames[c];
        invalid("field 'collective': unknown collective code " + std::to_string(r.collective) + "; known: " + known);
      }
      checkedBytes(r, requireDtype(r), 0, kMaxBytes);
      if (!redOpName(r.redOp))
        invalid("field 'redOp': unknown reduce op code " + std::to_string(r.redOp) +
                "; known: 0 sum, 1 product, 2 max, 3 min, 4 avg");
      checkRange("root", r.root, 0, kMaxNranks - 1);
      checkPeer("sendPeer", r.sendPeer);
      checkPeer("recvPeer", r.recvPeer);
      checkRange("sendBuf", r.sendBuf, 0, kMaxHandle);
      checkRange("recvBuf", r.recvBuf, 0, kMaxHandle);
      checkRange("sendOffset", r.offset, 0, kMaxBytes);
      checkRange("recvOffset", r.recvOffset, 0, kMaxBytes);
      checkRange("warmup", r.warmup, 0, kMaxIters);
      checkRange("iters", r.iters, 1, kMaxIters);
      break;
    }
    case Op::AsyncError: case Op::Abort: case Op::Destroy:
      checkRange("comm", r.comm, 1, kMaxHandle);
      break;
  }
  requirePayload(r, 0, "the op's payload length (none)");
}

}  // namespace

const char* opName(uint16_t code) { return code <= kMaxOpCode ? kOpNames[code] : ""; }

std::string knownOps() {
  std::string s;
  for (uint16_t c = 1; c <= kMaxOpCode; c++) s += (s.empty() ? "" : ", ") + std::to_string(c) + " " + kOpNames[c];
  return s;
}

const char* errorName(ErrorCode code) {
  auto c = static_cast<uint16_t>(code);
  return c <= kMaxErrorCode ? kErrorNames[c] : "INTERNAL";
}

ErrorCode errorCodeOf(const std::string& name) {
  for (uint16_t c = 1; c <= kMaxErrorCode; c++)
    if (name == kErrorNames[c]) return static_cast<ErrorCode>(c);
  return ErrorCode::Internal;
}

const DtypeInfo* dtypeInfo(uint8_t code) {
  for (const auto& d : kDtypes)
    if (d.code == code) return &d;
  return nullptr;
}

const char* redOpName(uint8_t code) { return code <= kMaxRedOpCode ? kRedOpNames[code] : nullptr; }
const char* collectiveName(uint8_t code) { return code <= kMaxCollectiveCode ? kCollectiveNames[code] : nullptr; }

uint16_t loadLe16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t loadLe32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}
uint64_t loadLe64(const uint8_t* p) { return loadLe32(p) | (static_cast<uint64_t>(loadLe32(p + 4)) << 32); }
void storeLe16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
void storeLe32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void storeLe64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

DecodeResult decodeRequest(const uint8_t* p, size_t n, const ProtocolLimits& limits, Request& r) {
  DecodeResult out;
  try {
    if (n < kRequestHeaderBytes)
      throw Reject{DecodeResult::Kind::Fatal, ErrorCode::BadFrame,
                   "request header truncated: " + std::to_string(n) + " of " + std::to_string(kRequestHeaderBytes) +
                       " bytes"};
    uint32_t magic = loadLe32(p + kOffMagic);
    if (magic != kRequestMagic)
      throw Reject{DecodeResult::Kind::Fatal, ErrorCode::BadFrame,
                   "bad magic 0x" + [&] {
                     char b[9];
                     std::snprintf(b, sizeof b, "%08x", magic);
                     return std::string(b);
                   }() + " (a request header starts with \"CMRQ\")"};
    r.version = loadLe16(p + kOffVersion);
    if (r.version != kProtocolVersion)
      throw Reject{DecodeResult::Kind::Fatal, ErrorCode::BadFrame,
                   "field 'version' = " + std::to_string(r.version) + ": this sidecar speaks protocol version " +
                       std::to_string(kProtocolVersion)};
    uint16_t headerLength = loadLe16(p + kOffHeaderLength);
    if (headerLength != kRequestHeaderBytes)
      throw Reject{DecodeResult::Kind::Fatal, ErrorCode::BadFrame,
                   "field 'headerLength' = " + std::to_string(headerLength) + ", expected " +
                       std::to_string(kRequestHeaderBytes)};
    r.payloadLength = loadLe32(p + kOffPayloadLength);
    // From here on the frame's extent is known: errors skip it and the connection goes on.
    for (size_t i = kOffReserved; i < kOffId; i++)
      if (p[i] != 0)
        throw Reject{DecodeResult::Kind::Skip, ErrorCode::BadFrame,
                     "reserved header byte " + std::to_string(i) + " is " + std::to_string(p[i]) + ", must be 0"};
    r.id = loadLe64(p + kOffId);
    if (r.id > kMaxRequestId)
      throw Reject{DecodeResult::Kind::Skip, ErrorCode::BadFrame,
                   "field 'id' = " + std::to_string(r.id) + " is outside " + range(0, kMaxRequestId)};
    uint16_t op = loadLe16(p + kOffOp);
    r.op = static_cast<Op>(op);
    out.idKnown = true;
    if (op == 0 || op > kMaxOpCode)
      throw Reject{DecodeResult::Kind::Skip, ErrorCode::UnknownOp,
                   "unknown op " + std::to_string(op) + "; known ops: " + knownOps()};
    // An oversized frame is refused, not fatal: the header is sound, so its payload is read and
    // dropped (never stored) and the connection stays usable for the requests that follow
    // (clean-up included). Clients split copies into frames of at most limits.maxFrameBytes.
    if (r.payloadLength > limits.maxFrameBytes || kRequestHeaderBytes > limits.maxFrameBytes - r.payloadLength)
      throw Reject{DecodeResult::Kind::Skip, ErrorCode::BadFrame,
                   "frame of " + std::to_string(kRequestHeaderBytes + uint64_t(r.payloadLength)) +
                       " bytes (field 'payloadLength' = " + std::to_string(r.payloadLength) +
                       ") exceeds the limit of " + std::to_string(limits.maxFrameBytes) +
                       " bytes (hello's limits.maxFrameBytes); its payload was discarded: copy in chunks"};
    r.dtype = p[kOffDtype];
    r.redOp = p[kOffRedOp];
    r.collective = p[kOffCollective];
    r.timeoutMs = loadLe32(p + kOffTimeout);
    r.comm = loadLe64(p + kOffComm);
    r.buf = loadLe64(p + kOffBuf);
    r.count = loadLe64(p + kOffCount);
    r.offset = loadLe64(p + kOffOffset);
    r.recvOffset = loadLe64(p + kOffRecvOffset);
    r.sendBuf = loadLe64(p + kOffSendBuf);
    r.recvBuf = loadLe64(p + kOffRecvBuf);
    r.nranks = loadLe32(p + kOffNranks);
    r.rank = loadLe32(p + kOffRank);
    r.device = loadLe32(p + kOffDevice);
    r.root = loadLe32(p + kOffRoot);
    r.sendPeer = static_cast<int32_t>(loadLe32(p + kOffSendPeer));
    r.recvPeer = static_cast<int32_t>(loadLe32(p + kOffRecvPeer));
    r.warmup = loadLe32(p + kOffWarmup);
    r.iters = loadLe32(p + kOffIters);
    r.value = loadLe32(p + kOffValue);
    r.delayMs = loadLe32(p + kOffDelay);
    validateOp(r, limits);
  } catch (Reject& e) {
    out.kind = e.kind;
    out.code = e.code;
    out.message = std::move(e.message);
  }
  return out;
}

void encodeRequest(const Request& r, uint8_t p[kRequestHeaderBytes]) {
  for (size_t i = 0; i < kRequestHeaderBytes; i++) p[i] = 0;
  storeLe32(p + kOffMagic, kRequestMagic);
  storeLe16(p + kOffVersion, r.version);
  storeLe16(p + kOffHeaderLength, kRequestHeaderBytes);
  storeLe16(p + kOffOp, static_cast<uint16_t>(r.op));
  p[kOffDtype] = r.dtype;
  p[kOffRedOp] = r.redOp;
  p[kOffCollective] = r.collective;
  storeLe64(p + kOffId, r.id);
  storeLe32(p + kOffTimeout, r.timeoutMs);
  storeLe32(p + kOffPayloadLength, r.payloadLength);
  storeLe64(p + kOffComm, r.comm);
  storeLe64(p + kOffBuf, r.buf);
  storeLe64(p + kOffCount, r.count);
  storeLe64(p + kOffOffset, r.offset);
  storeLe64(p + kOffRecvOffset, r.recvOffset);
  storeLe64(p + kOffSendBuf, r.sendBuf);
  storeLe64(p + kOffRecvBuf, r.recvBuf);
  storeLe32(p + kOffNranks, r.nranks);
  storeLe32(p + kOffRank, r.rank);
  storeLe32(p + kOffDevice, r.device);
  storeLe32(p + kOffRoot, r.root);
  storeLe32(p + kOffSendPeer, static_cast<uint32_t>(r.sendPeer));
  storeLe32(p + kOffRecvPeer, static_cast<uint32_t>(r.recvPeer));
  storeLe32(p + kOffWarmup, r.warmup);
  storeLe32(p + kOffIters, r.iters);
  storeLe32(p + kOffValue, r.value);
  storeLe32(p + kOffDelay, r.delayMs);
}

// Reply header: magic(4) version(2) headerLength(2) op(2) status(2) flags(4) id(8) bodyLength(4) payloadLength(4)
void encodeReply(const ReplyHeader& h, uint8_t p[kReplyHeaderBytes]) {
  storeLe32(p, kReplyMagic);
  storeLe16(p + 4, kProtocolVersion);
  storeLe16(p + 6, kReplyHeaderBytes);
  storeLe16(p + 8, h.op);
  storeLe16(p + 10, static_cast<uint16_t>(h.status));
  storeLe32(p + 12, h.idKnown ? 1u : 0u);
  storeLe64(p + 16, h.idKnown ? h.id : 0);
  storeLe32(p + 24, h.bodyLength);
  storeLe32(p + 28, h.payloadLength);
}

bool decodeReply(const uint8_t* p, size_t n, ReplyHeader& h, std::string& error) {
  if (n < kReplyHeaderBytes) {
    error = "reply header truncated";
    return false;
  }
  if (loadLe32(p) != kReplyMagic) {
    error = "bad reply magic";
    return false;
  }
  if (loadLe16(p + 4) != kProtocolVersion || loadLe16(p + 6) != kReplyHeaderBytes) {
    error = "bad reply version or header size";
    return false;
  }
  h.op = loadLe16(p + 8);
  h.status = static_cast<ErrorCode>(loadLe16(p + 10));
  h.idKnown = (loadLe32(p + 12) & 1u) != 0;
  h.id = loadLe64(p + 16);
  h.bodyLength = loadLe32(p + 24);
  h.payloadLength = loadLe32(p + 28);
  return true;
}

}  // namespace cmesh
