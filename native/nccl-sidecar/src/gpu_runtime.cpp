#include "cmesh_sidecar/gpu_runtime.hpp"

#include <chrono>
#include <cstring>
#include <limits>
#include <thread>

#include "cmesh_sidecar/collective.hpp"

namespace cmesh {

namespace {

// Polling: spin briefly (small collectives finish in microseconds), then back off.
class Backoff {
 public:
  void pause() {
    if (++n_ < 2000) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(50));
  }

 private:
  int n_ = 0;
};

}  // namespace

GpuRuntime::GpuRuntime(const RuntimeOptions& opts) {
  cuda_ = loadCuda(opts.cudartLib, cuda);
  nccl_ = loadNccl(opts.ncclLib, nccl);
}

std::string GpuRuntime::unavailableReason() const {
  std::string r;
  if (!cuda_.available) r += "CUDA unavailable: " + cuda_.reason;
  if (!nccl_.available) r += (r.empty() ? "" : "; ") + std::string("NCCL unavailable: ") + nccl_.reason;
  return r;
}

Json GpuRuntime::describe() const {
  Json out = Json::object();
  Json c = Json::object();
  c.set("available", cuda_.available);
  if (!cuda_.available) c.set("reason", cuda_.reason);
  c.set("library", cuda.library.empty() ? Json() : Json(cuda.library));
  c.set("runtimeVersion", cuda_.runtimeVersion);
  c.set("driverVersion", cuda_.driverVersion);
  out.set("cuda", c);
  Json devices = Json::array();
  for (const auto& d : cuda_.devices) {
    Json j = Json::object();
    j.set("index", d.index).set("name", d.name).set("totalMemoryBytes", static_cast<int64_t>(d.totalMemoryBytes));
    j.set("pciBusId", d.pciBusId);
    devices.push(j);
  }
  out.set("deviceCount", static_cast<int64_t>(cuda_.devices.size()));
  out.set("devices", devices);
  Json n = Json::object();
  n.set("available", nccl_.available);
  if (!nccl_.available) n.set("reason", nccl_.reason);
  n.set("library", nccl.library.empty() ? Json() : Json(nccl.library));
  n.set("version", nccl_.version);
  n.set("versionString", nccl_.versionString.empty() ? Json() : Json(nccl_.versionString));
  n.set("nonblocking", nccl_.nonblocking);
  out.set("nccl", n);
  return out;
}

bool GpuRuntime::handles(Op op) {
  switch (op) {
    case Op::Hello: case Op::Ping: case Op::Shutdown: return false;
    default: return true;
  }
}

Response GpuRuntime::handle(const Request& req, std::vector<uint8_t>& payload, const Deadline& d) {
  switch (req.op) {
    case Op::GetUniqueId: return getUniqueId();
    case Op::CommInitRank: return commInitRank(req, payload, d);
    case Op::Alloc: return alloc(req);
    case Op::Free: return free(req);
    case Op::Memset: return memset(req, d);
    case Op::CopyIn: return copyIn(req, payload, d);
    case Op::CopyOut: return copyOut(req, d);
    case Op::Collective: return collective(req, d);
    case Op::AsyncError: return asyncError(req);
    case Op::Abort: return abort(req);
    case Op::Destroy: return destroy(req, d);
    default: break;
  }
  throw SidecarError(codes::kUnknownOp, std::string("op '") + opName(static_cast<uint16_t>(req.op)) +
                                            "' does not run on the GPU thread");
}

void GpuRuntime::requireCuda() const {
  if (!cuda_.available) throw SidecarError(codes::kUnavailable, "CUDA unavailable: " + cuda_.reason);
}

void GpuRuntime::requireNccl() const {
  if (!available()) throw SidecarError(codes::kUnavailable, unavailableReason());
}

void GpuRuntime::check(cudaError_t e, const std::string& what) const {
  if (e != kCudaSuccess) throw SidecarError(codes::kCudaError, what + ": " + cuda.describe(e));
}

GpuRuntime::Buffer& GpuRuntime::buffer(int64_t handle) {
  auto it = buffers_.find(handle);
  if (it == buffers_.end()) throw SidecarError(codes::kNotFound, "no buffer with handle " + std::to_string(handle));
  return it->second;
}

GpuRuntime::Comm& GpuRuntime::liveComm(int64_t handle) {
  auto it = comms_.find(handle);
  if (it == comms_.end())
    throw SidecarError(codes::kNotFound, "no communicator with handle " + std::to_string(handle));
  if (it->second.aborted)
    throw SidecarError(codes::kAborted,
                       "communicator " + std::to_string(handle) + " was aborted: " + it->second.abortReason);
  return it->second;
}

char* GpuRuntime::span(const Buffer& b, size_t offset, size_t bytes, const char* field) const {
  if (offset > b.bytes || bytes > b.bytes - offset)
    throw SidecarError(codes::kInvalidArgument, std::string(field) + ": range [" + std::to_string(offset) + ", " +
                                                    std::to_string(offset + bytes) + ") exceeds the buffer's " +
                                                    std::to_string(b.bytes) + " bytes");
  return static_cast<char*>(b.ptr) + offset;
}

cudaStream_t GpuRuntime::copyStream(int device) {
  auto it = copyStreams_.find(device);
  if (it != copyStreams_.end()) return it->second;
  cudaStream_t s = nullptr;
  check(cuda.streamCreateWithFlags(&s, kCudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  copyStreams_[device] = s;
  return s;
}

void GpuRuntime::waitStream(cudaStream_t s, const Deadline& d, const std::string& what) {
  Backoff backoff;
  for (;;) {
    cudaError_t e = cuda.streamQuery(s);
    if (e == kCudaSuccess) return;
    if (e != kCudaErrorNotReady) check(e, what);
    if (d.expired())
      throw SidecarError(codes::kTimeout, what + " did not finish within " + std::to_string(d.budgetMs()) + " ms");
    backoff.pause();
  }
}

void GpuRuntime::releaseComm(Comm& c) {
  if (c.start) cuda.eventDestroy(c.start);
  if (c.stop) cuda.eventDestroy(c.stop);
  if (c.stream) cuda.streamDestroy(c.stream);
  c.start = c.stop = nullptr;
  c.stream = nullptr;
}

void GpuRuntime::abortAndThrow(Comm& c, const std::string& code, const std::string& reason) {
  if (c.comm) nccl.commAbort(c.comm);
  c.comm = nullptr;
  c.aborted = true;
  c.abortReason = reason;
  releaseComm(c);
  throw SidecarError(code, reason + "; communicator aborted");
}

ncclResult_t GpuRuntime::waitComm(Comm& c, const Deadline& d, const std::string& what) {
  Backoff backoff;
  for (;;) {
    ncclResult_t st = kNcclSuccess;
    ncclResult_t r = nccl.commGetAsyncError(c.comm, &st);
    if (r != kNcclSuccess) return r;
    if (st != kNcclInProgress) return st;
    if (d.expired())
      abortAndThrow(c, codes::kTimeout,
                    what + " did not complete within " + std::to_string(d.budgetMs()) + " ms (rank " +
                        std::to_string(c.rank) + " of " + std::to_string(c.nranks) + ")");
    backoff.pause();
  }
}

void GpuRuntime::waitEvent(Comm& c, cudaEvent_t ev, const Deadline& d, const std::string& what) {
  Backoff backoff;
  for (;;) {
    cudaError_t e = cuda.eventQuery(ev);
    if (e == kCudaSuccess) return;
    if (e != kCudaErrorNotReady) abortAndThrow(c, codes::kCudaError, what + ": " + cuda.describe(e));
    ncclResult_t st = kNcclSuccess;
    nccl.commGetAsyncError(c.comm, &st);
    if (st != kNcclSuccess && st != kNcclInProgress)
      abortAndThrow(c, codes::kNcclError, what + ": asynchronous NCCL error " + nccl.describe(st, c.comm));
    if (d.expired())
      abortAndThrow(c, codes::kTimeout,
                    what + " hung: not complete within " + std::to_string(d.budgetMs()) + " ms (rank " +
                        std::to_string(c.rank) + " of " + std::to_string(c.nranks) + ")");
    backoff.pause();
  }
}

Response GpuRuntime::getUniqueId() {
  requireNccl();
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  ncclResult_t r = nccl.getUniqueId(&id);
  if (r != kNcclSuccess) throw SidecarError(codes::kNcclError, "ncclGetUniqueId: " + nccl.describe(r));
  Response out;
  out.result.set("uniqueId", toHex(&id, sizeof id));
  return out;
}

Response GpuRuntime::commInitRank(const Request& req, const std::vector<uint8_t>& payload, const Deadline& d) {
  requireNccl();
  // decodeRequest checked nranks, rank < nranks and the 128-byte payload (the ncclUniqueId).
  int nranks = static_cast<int>(req.nranks);
  int rank = static_cast<int>(req.rank);
  checkField("device", req.device, 0, static_cast<int64_t>(cuda_.devices.size()) - 1);
  int device = static_cast<int>(req.device);
  ncclUniqueId id;
  if (payload.size() != sizeof id)
    throw SidecarError(codes::kInvalidArgument, "the payload must be the " + std::to_string(sizeof id) +
                                                    "-byte ncclUniqueId (from getUniqueId)");
  std::memcpy(&id, payload.data(), sizeof id);
  check(cuda.setDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
  Comm c;
  c.device = device;
  c.rank = rank;
  c.nranks = nranks;
  ncclResult_t r = nccl.commInitRank(&c.comm, nranks, id, rank);
  const std::string what = "ncclCommInitRank(rank " + std::to_string(rank) + " of " + std::to_string(nranks) + ")";
  if (r == kNcclInProgress || (r == kNcclSuccess && nccl_.nonblocking && c.comm)) r = waitComm(c, d, what);
  if (r != kNcclSuccess) {
    std::string msg = what + ": " + nccl.describe(r, c.comm);
    if (c.comm) nccl.commAbort(c.comm);
    throw SidecarError(codes::kNcclError, msg);
  }
  try {
    check(cuda.streamCreateWithFlags(&c.stream, kCudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    check(cuda.eventCreateWithFlags(&c.start, kCudaEventDefault), "cudaEventCreate");
    check(cuda.eventCreateWithFlags(&c.stop, kCudaEventDefault), "cudaEventCreate");
  } catch (...) {
    releaseComm(c);
    nccl.commAbort(c.comm);
    throw;
  }
  int64_t handle = nextHandle_++;
  comms_[handle] = c;
  Response out;
  out.result.set("comm", handle).set("rank", rank).set("nranks", nranks).set("device", device);
  return out;
}

Response GpuRuntime::alloc(const Request& req) {
  requireCuda();
  checkField("device", req.device, 0, static_cast<int64_t>(cuda_.devices.size()) - 1);
  int device = static_cast<int>(req.device);
  size_t bytes = static_cast<size_t>(req.count * dtypeInfo(req.dtype)->bytes);  // checked by decodeRequest
  check(cuda.setDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
  void* ptr = nullptr;
  check(cuda.malloc(&ptr, bytes), "cudaMalloc(" + std::to_string(bytes) + " bytes on device " + std::to_string(device) + ")");
  int64_t handle = nextHandle_++;
  buffers_[handle] = Buffer{device, ptr, bytes};
  Response out;
  out.result.set("buf", handle).set("bytes", static_cast<int64_t>(bytes)).set("device", device);
  return out;
}

Response GpuRuntime::free(const Request& req) {
  int64_t handle = static_cast<int64_t>(req.buf);
  Buffer& b = buffer(handle);
  check(cuda.setDevice(b.device), "cudaSetDevice");
  check(cuda.free(b.ptr), "cudaFree");
  buffers_.erase(handle);
  return Response{};
}

Response GpuRuntime::memset(const Request& req, const Deadline& d) {
  Buffer& b = buffer(static_cast<int64_t>(req.buf));
  size_t offset = static_cast<size_t>(req.offset);
  size_t bytes = req.count == kCountToEnd ? b.bytes - std::min(offset, b.bytes)
                                          : static_cast<size_t>(req.count * dtypeInfo(req.dtype)->bytes);
  int value = static_cast<int>(req.value);
  char* dst = span(b, offset, bytes, "memset");
  check(cuda.setDevice(b.device), "cudaSetDevice");
  cudaStream_t s = copyStream(b.device);
  check(cuda.memsetAsync(dst, value, bytes, s), "cudaMemsetAsync");
  waitStream(s, d, "memset");
  return Response{};
}

Response GpuRuntime::copyIn(const Request& req, std::vector<uint8_t>& payload, const Deadline& d) {
  Buffer& b = buffer(static_cast<int64_t>(req.buf));
  size_t offset = static_cast<size_t>(req.offset);
  char* dst = span(b, offset, payload.size(), "copyIn");
  if (payload.empty()) return Response{};
  check(cuda.setDevice(b.device), "cudaSetDevice");
  cudaStream_t s = copyStream(b.device);
  check(cuda.memcpyAsync(dst, payload.data(), payload.size(), kCudaMemcpyHostToDevice, s), "cudaMemcpyAsync(H2D)");
  waitStream(s, d, "copyIn");
  Response out;
  out.result.set("bytes", static_cast<int64_t>(payload.size()));
  return out;
}

Response GpuRuntime::copyOut(const Request& req, const Deadline& d) {
  Buffer& b = buffer(static_cast<int64_t>(req.buf));
  size_t offset = static_cast<size_t>(req.offset);
  // Bounded by the frame limit (decodeRequest) and by the buffer (span) before the reply is allocated.
  size_t bytes = static_cast<size_t>(req.count * dtypeInfo(req.dtype)->bytes);
  const char* src = span(b, offset, bytes, "copyOut");
  Response out;
  out.payload.resize(bytes);
  if (bytes == 0) return out;
  check(cuda.setDevice(b.device), "cudaSetDevice");
  cudaStream_t s = copyStream(b.device);
  check(cuda.memcpyAsync(out.payload.data(), src, bytes, kCudaMemcpyDeviceToHost, s), "cudaMemcpyAsync(D2H)");
  waitStream(s, d, "copyOut");
  return out;
}

Response GpuRuntime::collective(const Request& req, const Deadline& d) {
  requireNccl();
  int64_t handle = static_cast<int64_t>(req.comm);
  Comm& c = liveComm(handle);
  CollectiveSpec s = parseCollective(req, c.nranks, c.rank);
  size_t sendBytes = sendExtentBytes(s, c.nranks, c.rank);
  size_t recvBytes = recvExtentBytes(s, c.nranks, c.rank);
  const void* send = nullptr;
  void* recv = nullptr;
  if (sendBytes) {
    Buffer& b = buffer(s.sendBuf);
    if (b.device != c.device)
      throw SidecarError(codes::kInvalidArgument, "sendBuf is on device " + std::to_string(b.device) +
                                                      ", the communicator on device " + std::to_string(c.device));
    send = span(b, s.sendOffset, sendBytes, "sendBuf");
  }
  if (recvBytes) {
    Buffer& b = buffer(s.recvBuf);
    if (b.device != c.device)
      throw SidecarError(codes::kInvalidArgument, "recvBuf is on device " + std::to_string(b.device) +
                                                      ", the communicator on device " + std::to_string(c.device));
    recv = span(b, s.recvOffset, recvBytes, "recvBuf");
  }
  check(cuda.setDevice(c.device), "cudaSetDevice");
  const std::string what = s.name + "(count " + std::to_string(s.count) + ", " + s.dtypeName + ")";
  auto launch = [&] {
    ncclResult_t r = enqueueCollective(nccl, s, send, recv, c.nranks, c.rank, c.comm, c.stream);
    if (r == kNcclInProgress) r = waitComm(c, d, what);
    if (r != kNcclSuccess) throw SidecarError(codes::kNcclError, what + ": " + nccl.describe(r, c.comm));
  };
  auto hostStart = std::chrono::steady_clock::now();
  if (s.warmup > 0) {
    for (int i = 0; i < s.warmup; i++) launch();
    check(cuda.eventRecord(c.stop, c.stream), "cudaEventRecord");
    waitEvent(c, c.stop, d, what + " warm-up");
  }
  check(cuda.eventRecord(c.start, c.stream), "cudaEventRecord");
  auto timedStart = std::chrono::steady_clock::now();
  for (int i = 0; i < s.iters; i++) launch();
  check(cuda.eventRecord(c.stop, c.stream), "cudaEventRecord");
  waitEvent(c, c.stop, d, what);
  auto hostEnd = std::chrono::steady_clock::now();
  float ms = 0;
  check(cuda.eventElapsedTime(&ms, c.start, c.stop), "cudaEventElapsedTime");
  Response out;
  out.result.set("collective", s.name).set("count", static_cast<int64_t>(s.count)).set("dtype", s.dtypeName);
  out.result.set("iters", s.iters).set("warmup", s.warmup);
  out.result.set("deviceSeconds", static_cast<double>(ms) / 1e3 / s.iters);
  out.result.set("hostSeconds", std::chrono::duration<double>(hostEnd - timedStart).count() / s.iters);
  out.result.set("wallSeconds", std::chrono::duration<double>(hostEnd - hostStart).count());
  return out;
}

Response GpuRuntime::asyncError(const Request& req) {
  int64_t handle = static_cast<int64_t>(req.comm);
  auto it = comms_.find(handle);
  if (it == comms_.end()) throw SidecarError(codes::kNotFound, "no communicator with handle " + std::to_string(handle));
  Comm& c = it->second;
  Response out;
  if (c.aborted) {
    out.result.set("aborted", true).set("reason", c.abortReason).set("result", Json());
    return out;
  }
  ncclResult_t st = kNcclSuccess;
  ncclResult_t r = nccl.commGetAsyncError(c.comm, &st);
  if (r != kNcclSuccess) throw SidecarError(codes::kNcclError, "ncclCommGetAsyncError: " + nccl.describe(r, c.comm));
  out.result.set("aborted", false).set("result", st).set("inProgress", st == kNcclInProgress);
  out.result.set("message", nccl.describe(st, c.comm));
  return out;
}

Response GpuRuntime::abort(const Request& req) {
  int64_t handle = static_cast<int64_t>(req.comm);
  auto it = comms_.find(handle);
  if (it == comms_.end()) throw SidecarError(codes::kNotFound, "no communicator with handle " + std::to_string(handle));
  Comm& c = it->second;
  bool wasAborted = c.aborted;
  if (!c.aborted) {
    cuda.setDevice(c.device);
    nccl.commAbort(c.comm);
    releaseComm(c);
  }
  comms_.erase(it);
  Response out;
  out.result.set("aborted", true).set("alreadyAborted", wasAborted);
  return out;
}

Response GpuRuntime::destroy(const Request& req, const Deadline& d) {
  int64_t handle = static_cast<int64_t>(req.comm);
  auto it = comms_.find(handle);
  if (it == comms_.end()) throw SidecarError(codes::kNotFound, "no communicator with handle " + std::to_string(handle));
  Comm& c = it->second;
  if (c.aborted) {
    comms_.erase(it);
    return Response{};
  }
  cuda.setDevice(c.device);
  if (nccl.commFinalize) {
    // Finalize flushes outstanding work; a peer that never arrives must not hang us.
    ncclResult_t r = nccl.commFinalize(c.comm);
    if (r == kNcclInProgress || r == kNcclSuccess) r = waitComm(c, d, "ncclCommFinalize");
    if (r != kNcclSuccess) abortAndThrow(c, codes::kNcclError, "ncclCommFinalize: " + nccl.describe(r, c.comm));
  }
  ncclResult_t r = nccl.commDestroy(c.comm);
  releaseComm(c);
  comms_.erase(it);
  if (r != kNcclSuccess) throw SidecarError(codes::kNcclError, "ncclCommDestroy: " + nccl.describe(r));
  return Response{};
}

}  // namespace cmesh
