// The sidecar's wire protocol, version 2 (README.md, "Frame format"): fixed-size little-endian
// binary headers both ways, then a payload.
//
// Why binary and not JSON (hand-written or nlohmann): every request field is a number or an enum,
// so a fixed 128-byte header is decoded by reading integers at constant offsets. There is no
// parser state, recursion, string escaping or allocation driven by the input; the only length
// taken from the wire (payloadLength) is checked against limits before anything is allocated.
// The TypeScript side (frame-codec.ts) encodes it with a handful of Buffer.writeUInt* calls, as
// the store and mesh framings already do. Replies carry their result fields as a small JSON
// object the sidecar writes (never parses): nested hello data stays readable by JSON.parse + zod.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace cmesh {

constexpr int kProtocolVersion = 2;

// Request header: "CMRQ", reply header: "CMRP" (as bytes on the wire).
constexpr uint32_t kRequestMagic = 0x51524D43u;  // 'C' 'M' 'R' 'Q'
constexpr uint32_t kReplyMagic = 0x50524D43u;    // 'C' 'M' 'R' 'P'
constexpr size_t kRequestHeaderBytes = 128;
constexpr size_t kReplyHeaderBytes = 32;

/** Largest request id (ids are JavaScript numbers on the client: exact up to 2^53 - 1). */
constexpr uint64_t kMaxRequestId = (uint64_t(1) << 53) - 1;
/** Largest handle, byte count, element count or offset a header may carry. */
constexpr uint64_t kMaxHandle = (uint64_t(1) << 53) - 1;
constexpr uint64_t kMaxBytes = uint64_t(1) << 48;
/** memset's count meaning "to the end of the buffer". */
constexpr uint64_t kCountToEnd = ~uint64_t(0);
constexpr uint32_t kMaxNranks = 1u << 20;
constexpr uint32_t kMaxIters = 1000000;
/** A peer field that is not set. */
constexpr int32_t kNoPeer = -1;

enum class Op : uint16_t {
  Hello = 1, Ping = 2, Shutdown = 3, GetUniqueId = 4, CommInitRank = 5, Alloc = 6, Free = 7, Memset = 8,
  CopyIn = 9, CopyOut = 10, Collective = 11, AsyncError = 12, Abort = 13, Destroy = 14,
};
constexpr uint16_t kMaxOpCode = 14;

/** The op's name ("" for a code that is not an op). */
const char* opName(uint16_t code);
/** "1 hello, 2 ping, …" */
std::string knownOps();

// Error codes on the wire (0 = ok). The names are what clients show (README.md, "Errors").
enum class ErrorCode : uint16_t {
  Ok = 0, BadFrame = 1, UnknownOp = 2, InvalidArgument = 3, Unavailable = 4, NotFound = 5, Timeout = 6,
  Aborted = 7, CudaError = 8, NcclError = 9, Internal = 10,
};
const char* errorName(ErrorCode code);
/** The code for a name (INTERNAL for one that is not known). */
ErrorCode errorCodeOf(const std::string& name);

// dtype codes are ncclDataType_t's values; redOp codes ncclRedOp_t's.
struct DtypeInfo {
  const char* name;
  uint8_t code;
  size_t bytes;
};
/** nullptr for a code that is not a dtype. */
const DtypeInfo* dtypeInfo(uint8_t code);
const char* redOpName(uint8_t code);  // nullptr when unknown
constexpr uint8_t kMaxRedOpCode = 4;

enum class CollKind : uint8_t {
  AllReduce = 0, Broadcast = 1, Reduce = 2, AllGather = 3, ReduceScatter = 4, SendRecv = 5, Send = 6, Recv = 7,
  Gather = 8, Scatter = 9, AllToAll = 10,
};
constexpr uint8_t kMaxCollectiveCode = 10;
const char* collectiveName(uint8_t code);  // nullptr when unknown

/** A decoded request header. Which fields an op reads: README.md, "Ops". */
struct Request {
  uint16_t version = kProtocolVersion;
  Op op = Op::Hello;
  uint8_t dtype = 0;
  uint8_t redOp = 0;
  uint8_t collective = 0;
  uint64_t id = 0;
  uint32_t timeoutMs = 0;  // 0 = the sidecar's default
  uint32_t payloadLength = 0;
  uint64_t comm = 0;
  uint64_t buf = 0;
  uint64_t count = 0;
  uint64_t offset = 0;  // buffer ops: offset; collective: sendOffset
  uint64_t recvOffset = 0;
  uint64_t sendBuf = 0;
  uint64_t recvBuf = 0;
  uint32_t nranks = 0;
  uint32_t rank = 0;
  uint32_t device = 0;
  uint32_t root = 0;
  int32_t sendPeer = kNoPeer;
  int32_t recvPeer = kNoPeer;
  uint32_t warmup = 0;
  uint32_t iters = 0;
  uint32_t value = 0;
  uint32_t delayMs = 0;
};

struct ProtocolLimits {
  uint64_t maxFrameBytes = (uint64_t(1) << 30) + (uint64_t(1) << 20);  // header + payload
  uint64_t maxTimeoutMs = 24ull * 3600 * 1000;
};

/** What decoding a request header came to. */
struct DecodeResult {
  enum class Kind {
    Ok,     // the request is valid; read payloadLength bytes of payload next
    Skip,   // the request is invalid but its extent is known: drain payloadLength bytes, reply, go on
    Fatal,  // the stream cannot be trusted (magic, version, header size, oversized): reply, close
  };
  Kind kind = Kind::Ok;
  ErrorCode code = ErrorCode::Ok;
  std::string message;
  bool idKnown = false;  // req.id / req.op are meaningful for the reply
  bool ok() const { return kind == Kind::Ok; }
};

/**
 * Decodes and validates one request header of exactly kRequestHeaderBytes bytes (`n` smaller is
 * a Fatal truncation). Checks every field an op reads against its range and the payload length
 * against the op (copyIn: count × dtype size; commInitRank: 128; others: 0). Never reads past
 * `n` bytes, never allocates from a field. Messages name the field.
 */
DecodeResult decodeRequest(const uint8_t* data, size_t n, const ProtocolLimits& limits, Request& req);

/** Encodes a request header (used by the tests; the client is TypeScript). */
void encodeRequest(const Request& req, uint8_t out[kRequestHeaderBytes]);

/** A reply header. */
struct ReplyHeader {
  uint16_t op = 0;  // 0 when the request could not be read
  ErrorCode status = ErrorCode::Ok;
  bool idKnown = false;
  uint64_t id = 0;
  uint32_t bodyLength = 0;     // ok: result JSON object (UTF-8); error: message (UTF-8)
  uint32_t payloadLength = 0;  // raw bytes (copyOut)
};
void encodeReply(const ReplyHeader& h, uint8_t out[kReplyHeaderBytes]);
/** False (with `error`) on a bad magic, version or header size. */
bool decodeReply(const uint8_t* data, size_t n, ReplyHeader& h, std::string& error);

uint16_t loadLe16(const uint8_t* p);
uint32_t loadLe32(const uint8_t* p);
uint64_t loadLe64(const uint8_t* p);
void storeLe16(uint8_t* p, uint16_t v);
void storeLe32(uint8_t* p, uint32_t v);
void storeLe64(uint8_t* p, uint64_t v);

}  // namespace cmesh
