#include "cmesh_sidecar/gpu_runtime.hpp"

#include <algorithm>
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

thread_local uint64_t GpuRuntime::owner_ = 0;

GpuRuntime::GpuRuntime(const RuntimeOptions& opts) {
  cuda_ = loadCuda(opts.cudartLib, cuda);
  nccl_ = loadNccl(opts.ncclLib, nccl);
  if (available()) watchdogThread_ = std::thread([this] { watchdog(); });
}

GpuRuntime::~GpuRuntime() {
  stopping_ = true;
  if (watchdogThread_.joinable()) watchdogThread_.join();
  // Communicators first (aborted, their work ended), then the memory, whose release waits for the
  // device. The sidecar itself ends with _exit and leaves all of it to the driver.
  watched_.clear();
  claims_.clear();
  comms_.clear();
}

GpuRuntime::Comm::~Comm() {
  if (comm || parent) {
    rt.cuda.setDevice(device);
    comm.reset();  // the child before its parent (aborting the parent first breaks the child)
    parent.reset();
  }
  rt.returnScratch(*this);
}

// The executor's own deadline checks run between library calls. A call that blocks (a launch
// that sets up its connections and waits for a peer, a launch into a full queue) is past them:
// as torch's watchdog does, this thread aborts the communicator once that call outlives its
// request's deadline, and NCCL's abort makes the blocked call return. It aborts only a
// communicator whose executor is inside such a call, so no other NCCL call on it races the abort.
void GpuRuntime::watchdog() {
  while (!stopping_) {
    std::this_thread::sleep_for(std::chrono::milliseconds(kWatchdogPeriodMs));
    std::vector<CommPtr> live;
    {
      std::lock_guard<std::mutex> lk(m_);
      for (auto it = watched_.begin(); it != watched_.end();) {
        if (auto c = it->lock()) {
          live.push_back(std::move(c));
          ++it;
        } else {
          it = watched_.erase(it);
        }
      }
    }
    for (auto& cp : live) {
      Comm& c = *cp;
      {
        std::lock_guard<std::mutex> lk(c.m);
        if (c.aborted || !c.inCall || Deadline::Clock::now() < c.inCallDeadline) continue;
        abortLocked(c, "the sidecar's watchdog aborted it: " + *c.inCallWhat + " was still inside NCCL at its deadline of " +
                           std::to_string(c.inCallBudgetMs) + " ms (rank " + std::to_string(c.rank) + " of " +
                           std::to_string(c.nranks) + ")",
                    false, codes::kTimeout);
      }
      c.cv.notify_all();
    }
  }
}

GpuRuntime::InCall::InCall(Comm& c, const Deadline& d, const std::string& what) : c_(c) {
  std::lock_guard<std::mutex> lk(c.m);
  c.inCall = true;
  c.inCallWhat = &what;  // the caller's, alive for the call: no copy per launch
  c.inCallDeadline = d.at();
  c.inCallBudgetMs = d.budgetMs();
}

GpuRuntime::InCall::~InCall() {
  std::lock_guard<std::mutex> lk(c_.m);
  c_.inCall = false;
}

ncclComm_t GpuRuntime::handleOf(Comm& c, const std::string& what) {
  std::unique_lock<std::mutex> lk(c.m);
  if (c.aborted) {
    lk.unlock();
    abortAndThrow(c, codes::kAborted, what);
  }
  return c.comm.get();
}

void GpuRuntime::checkComm(Comm& c, cudaError_t e, const std::string& what) {
  if (e != kCudaSuccess) abortAndThrow(c, codes::kCudaError, what + ": " + cuda.describe(e));
}

void GpuRuntime::takeScratch(Comm& c) {
  {
    std::lock_guard<std::mutex> lk(m_);
    auto& pool = freeScratch_[c.device];
    if (!pool.empty()) {
      c.scratch = std::move(pool.back());
      pool.pop_back();
      return;
    }
  }
  Scratch slot;
  check(cuda.malloc(slot.device.put(cuda), sizeof(double)), "cudaMalloc(scratch)");
  if (cudaError_t e = cuda.mallocHost(slot.host.put(cuda), sizeof(double))) {
    slot.device.release();  // 8 bytes left allocated: freeing them would synchronise the device
    check(e, "cudaMallocHost(scratch)");
  }
  c.scratch = std::move(slot);
}

void GpuRuntime::returnScratch(Comm& c) {
  if (!c.scratch.device && !c.scratch.host) return;
  // A slot whose stream may still copy into it (work left after an abort) is not reused, nor freed
  // (that would wait on every kernel of the device): it stays allocated.
  if (c.scratch.device && c.scratch.host && (!c.stream || cuda.streamQuery(c.stream.get()) == kCudaSuccess)) {
    std::lock_guard<std::mutex> lk(m_);
    freeScratch_[c.device].push_back(std::move(c.scratch));
    return;
  }
  c.scratch.device.release();
  c.scratch.host.release();
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
  n.set("nonblocking", nccl_.nonblocking).set("splitLaunches", nccl_.splitLaunches);
  out.set("nccl", n);
  return out;
}

bool GpuRuntime::handles(Op op) {
  switch (op) {
    case Op::Hello: case Op::Ping: case Op::Shutdown: case Op::Abort: return false;
    default: return true;
  }
}

Response GpuRuntime::handle(const Request& req, std::vector<uint8_t>& payload, const Deadline& d, uint64_t owner) {
  owner_ = owner;  // an executor thread runs one request at a time
  switch (req.op) {
    case Op::GetUniqueId: return getUniqueId();
    case Op::Alloc: return alloc(req);
    case Op::Free: return free(req);
    case Op::Memset: return memset(req, d);
    case Op::CopyIn: return copyIn(req, payload, d);
    case Op::CopyOut: return copyOut(req, d);
    case Op::Collective: return collective(req, d);
    case Op::AsyncError: return asyncError(req);
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
  std::lock_guard<std::mutex> lk(m_);
  auto it = buffers_.find(handle);
  // Another connection's handle is as unknown as a freed one: handles do not cross connections.
  if (it == buffers_.end() || it->second.owner != owner_)
    throw SidecarError(codes::kNotFound, "no buffer with handle " + std::to_string(handle) + " on this connection");
  return it->second;  // only the GPU thread erases buffers, so the reference stays valid
}

GpuRuntime::CommPtr GpuRuntime::findComm(int64_t handle) {
  std::lock_guard<std::mutex> lk(m_);
  auto it = comms_.find(handle);
  auto gone = abortedByRequest_.find(handle);
  if (it == comms_.end() && gone != abortedByRequest_.end() && gone->second == owner_)
    throw SidecarError(codes::kAborted, "communicator " + std::to_string(handle) +
                                            " was aborted by an abort request; its handle is released");
  if (it == comms_.end() || it->second->owner != owner_)
    throw SidecarError(codes::kNotFound, "no communicator with handle " + std::to_string(handle) + " on this connection");
  return it->second;
}

GpuRuntime::Use::Use(CommPtr c, int64_t requireLive) : c_(std::move(c)) {
  std::lock_guard<std::mutex> lk(c_->m);
  // Checked and marked in one step: an abort from a connection thread either sees `busy` or came first.
  if (requireLive && c_->aborted)
    throw SidecarError(codes::kAborted, "communicator " + std::to_string(requireLive) + " was aborted: " + c_->abortReason);
  c_->busy = true;
}

GpuRuntime::Use::~Use() {
  {
    std::lock_guard<std::mutex> lk(c_->m);
    c_->busy = false;
  }
  c_->cv.notify_all();
}

char* GpuRuntime::span(const Buffer& b, size_t offset, size_t bytes, const char* field) const {
  if (offset > b.bytes || bytes > b.bytes - offset)
    throw SidecarError(codes::kInvalidArgument, std::string(field) + ": range [" + std::to_string(offset) + ", " +
                                                    std::to_string(offset + bytes) + ") exceeds the buffer's " +
                                                    std::to_string(b.bytes) + " bytes");
  return static_cast<char*>(b.mem.get()) + offset;
}

cudaStream_t GpuRuntime::copyStream(int device) {
  std::lock_guard<std::mutex> lk(m_);  // connections' executors copy concurrently
  auto it = copyStreams_.find(device);
  if (it != copyStreams_.end()) return it->second.get();
  CudaStream s;
  check(cuda.streamCreateWithFlags(s.put(cuda), kCudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  return (copyStreams_[device] = std::move(s)).get();
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
  // No cudaFree here: it synchronises the whole device, so an abort would wait on the kernels of
  // every other communicator there (a hung one included). Scratch slots go back to a pool.
  returnScratch(c);
  c.start.reset();
  c.stop.reset();
  c.sync.reset();
  c.stream.reset();  // a stream with work left (after an abort) is released once that work ends
}

void GpuRuntime::abortLocked(Comm& c, const std::string& reason, bool releaseResources, const std::string& code) {
  if (!c.aborted) {
    cuda.setDevice(c.device);
    c.comm.reset();  // ncclCommAbort, the child before its parent
    c.parent.reset();
    c.aborted = true;
    c.abortReason = reason;
    c.abortCode = code;
  }
  if (releaseResources) releaseComm(c);
}

void GpuRuntime::abortAndThrow(Comm& c, const std::string& code, const std::string& reason) {
  {
    std::lock_guard<std::mutex> lk(c.m);
    if (c.aborted) {
      // Another thread (an abort request, the watchdog) aborted it while this one was inside a
      // library call: later requests get the error that abort stands for.
      releaseComm(c);
      throw SidecarError(c.abortCode.empty() ? codes::kAborted : c.abortCode,
                         reason + "; communicator aborted: " + c.abortReason);
    }
    abortLocked(c, reason, true, code == codes::kTimeout ? codes::kTimeout : codes::kAborted);
  }
  c.cv.notify_all();
  throw SidecarError(code, reason + "; communicator aborted");
}

void GpuRuntime::checkAbortRequest(Comm& c, const std::string& what) {
  if (!c.abortRequested) return;
  std::string why;
  {
    std::lock_guard<std::mutex> lk(c.m);
    why = c.abortRequestReason;
  }
  abortAndThrow(c, codes::kAborted, what + (why.empty() ? " was interrupted by an abort request" : ": " + why));
}

void GpuRuntime::waitComm(Comm& c, const Deadline& d, const std::string& what, ncclComm_t comm,
                          const ncclComm_t* written) {
  const bool own = !comm;
  Backoff backoff;
  for (;;) {
    checkAbortRequest(c, what);
    if (own) comm = handleOf(c, what);
    ncclResult_t st = kNcclSuccess;
    ncclResult_t r = nccl.commGetAsyncError(comm, &st);
    if (r != kNcclSuccess)
      abortAndThrow(c, codes::kNcclError, what + ": ncclCommGetAsyncError: " + nccl.describe(r, comm));
    if (st == kNcclSuccess && (!written || __atomic_load_n(written, __ATOMIC_ACQUIRE))) return;
    if (st != kNcclSuccess && st != kNcclInProgress) abortAndThrow(c, codes::kNcclError, what + ": " + nccl.describe(st, comm));
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
    checkAbortRequest(c, what);
    const ncclComm_t comm = handleOf(c, what);
    cudaError_t e = cuda.eventQuery(ev);
    if (e != kCudaSuccess && e != kCudaErrorNotReady) abortAndThrow(c, codes::kCudaError, what + ": " + cuda.describe(e));
    // also once the work is done: a collective whose peer failed is no result (on a blocking
    // communicator nothing else reports it)
    ncclResult_t st = kNcclSuccess;
    nccl.commGetAsyncError(comm, &st);
    if (st != kNcclSuccess && st != kNcclInProgress)
      abortAndThrow(c, codes::kNcclError, what + ": asynchronous NCCL error " + nccl.describe(st, comm));
    if (e == kCudaSuccess) return;
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

std::string GpuRuntime::claimInit(const Request& req, const std::vector<uint8_t>& payload, uint64_t owner) {
  if (payload.size() != sizeof(ncclUniqueId)) return "";  // commInitRank reports it
  const std::string key = toHex(payload.data(), payload.size());
  const int rank = static_cast<int>(req.rank);
  std::lock_guard<std::mutex> lk(m_);
  auto it = claims_.find(key);
  if (it == claims_.end()) {
    claims_[key] = {rank, {}};
    return key;
  }
  if (it->second.first == rank)
    throw SidecarError(codes::kInvalidArgument, "commInitRank: rank " + std::to_string(rank) +
                                                    " of this communicator is already being initialised on this sidecar");
  // NCCL wants one process per rank of a communicator here: local ranks that share one sidecar
  // socket would each wait for the other's init. Both fail now, saying why.
  const std::string why = "ranks " + std::to_string(it->second.first) + " and " + std::to_string(rank) +
                          " of one communicator on one sidecar: give each local rank its own sidecar (its own " +
                          "CMESH_NCCL_SOCKET, or none so that each process spawns one)";
  if (auto first = it->second.second.lock()) {
    {
      std::lock_guard<std::mutex> g(first->m);
      first->abortRequestReason = why;
    }
    first->abortRequested = true;
  } else {
    refused_[key] = why;  // its init has not started yet
  }
  throw SidecarError(codes::kInvalidArgument, "commInitRank: " + why);
}

void GpuRuntime::releaseInit(const std::string& claim) {
  if (claim.empty()) return;
  std::lock_guard<std::mutex> lk(m_);
  claims_.erase(claim);
  refused_.erase(claim);
}

void GpuRuntime::checkDevice(Comm& c, const std::string& what) {
  if (!nccl.commCuDevice) return;
  int device = -1;
  ncclResult_t r = nccl.commCuDevice(handleOf(c, what), &device);
  if (r != kNcclSuccess) abortAndThrow(c, codes::kNcclError, what + ": ncclCommCuDevice: " + nccl.describe(r));
  if (device != c.device)
    abortAndThrow(c, codes::kNcclError,
                  what + ": NCCL placed this rank on CUDA device " + std::to_string(device) + ", the request asked for device " +
                      std::to_string(c.device) + " (NCCL takes the calling thread's current device)");
}

std::shared_ptr<Executor> GpuRuntime::executorOf(int64_t handle, uint64_t owner) const {
  std::lock_guard<std::mutex> lk(m_);
  auto it = comms_.find(handle);
  if (it == comms_.end() || it->second->owner != owner) return nullptr;
  return it->second->exec;
}

Response GpuRuntime::commInitRank(const Request& req, const std::vector<uint8_t>& payload, const Deadline& d,
                                  uint64_t owner, std::shared_ptr<Executor> exec, const std::string& claim) {
  owner_ = owner;
  struct Release {
    GpuRuntime* rt;
    std::string claim;
    std::shared_ptr<Executor> exec;
    bool ok = false;
    ~Release() {
      rt->releaseInit(claim);
      if (!ok && exec) exec->close();  // no communicator will use it
    }
  } release{this, claim, exec};
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
  auto c = std::make_shared<Comm>(*this);
  c->device = device;
  c->rank = rank;
  c->nranks = nranks;
  c->owner = owner_;
  c->exec = exec;
  {
    std::lock_guard<std::mutex> lk(m_);
    auto refused = refused_.find(claim);
    if (refused != refused_.end()) throw SidecarError(codes::kAborted, "commInitRank: " + refused->second);
    auto cl = claims_.find(claim);
    if (cl != claims_.end()) cl->second.second = c;
    watched_.push_back(c);
  }
  const std::string what = "ncclCommInitRank(rank " + std::to_string(rank) + " of " + std::to_string(nranks) + ")";
  c->nonblocking = nccl_.nonblocking;
  ncclResult_t r;
  ncclComm_t made = nullptr;
  if (nccl_.nonblocking && nccl.commInitRankConfig) {
    NcclConfig config;
    config.blocking = 0;
    r = nccl.commInitRankConfig(&made, nranks, id, rank, &config);
  } else {
    r = nccl.commInitRank(&made, nranks, id, rank);
  }
  {
    std::lock_guard<std::mutex> lk(c->m);
    c->comm = NcclComm(nccl, made);
  }
  if (r != kNcclSuccess && r != kNcclInProgress) {
    std::string msg = what + ": " + nccl.describe(r, made);
    std::lock_guard<std::mutex> lk(c->m);
    abortLocked(*c, msg, true);
    throw SidecarError(codes::kNcclError, msg);
  }
  if (r == kNcclInProgress || c->nonblocking) waitComm(*c, d, what);  // aborts on error or deadline
  if (nccl_.splitLaunches) splitBlocking(*c, d, what);
  checkDevice(*c, what);
  try {
    check(cuda.streamCreateWithFlags(c->stream.put(cuda), kCudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    check(cuda.eventCreateWithFlags(c->start.put(cuda), kCudaEventDefault), "cudaEventCreate");
    check(cuda.eventCreateWithFlags(c->stop.put(cuda), kCudaEventDefault), "cudaEventCreate");
    check(cuda.eventCreateWithFlags(c->sync.put(cuda), kCudaEventDefault), "cudaEventCreate");
    takeScratch(*c);
  } catch (...) {
    std::lock_guard<std::mutex> lk(c->m);
    abortLocked(*c, "set-up failed", true);
    throw;
  }
  int64_t handle;
  {
    std::lock_guard<std::mutex> lk(m_);
    handle = nextHandle_++;
    comms_[handle] = c;
  }
  release.ok = true;
  Response out;
  out.result.set("comm", handle).set("rank", rank).set("nranks", nranks).set("device", device);
  out.result.set("launches", c->nonblocking ? "non-blocking" : "blocking");
  return out;
}

// Init stays abortable (non-blocking), but a non-blocking communicator hands every grouped launch
// (send/recv, all_to_all, gather, scatter) to a thread of NCCL's own: ~55 us a call on an H200
// against ~8 on a blocking one. Ops run on a blocking communicator of the same ranks split from it
// (a hung op is still aborted: deadline or abort request, ncclCommAbort from this or the connection
// thread). The parent, idle, is finalized and destroyed at once: aborting it while the child lives
// breaks the child (NCCL 2.28 on an H200), and an abort after the child would cost ~1 s at the end.
void GpuRuntime::splitBlocking(Comm& c, const Deadline& d, const std::string& what) {
  const std::string step = what + ": ncclCommSplit";
  const ncclComm_t parent = handleOf(c, step);
  NcclConfig config;
  config.blocking = 1;
  // NCCL writes the child from its own thread when the split completes (the parent is
  // non-blocking): if this call gives up first, the cell is left to NCCL, never freed.
  auto cell = std::make_unique<ncclComm_t>(nullptr);
  ncclResult_t r = nccl.commSplit(parent, 0, c.rank, cell.get(), &config);
  if (r != kNcclSuccess && r != kNcclInProgress)
    abortAndThrow(c, codes::kNcclError, step + ": " + nccl.describe(r, parent));
  try {
    waitComm(c, d, step, parent, cell.get());
  } catch (...) {
    cell.release();
    throw;
  }
  {
    std::lock_guard<std::mutex> lk(c.m);
    NcclComm child(nccl, __atomic_load_n(cell.get(), __ATOMIC_ACQUIRE));
    if (!c.aborted) {
      c.parent = std::move(c.comm);
      c.comm = std::move(child);
      c.nonblocking = false;
    }  // else aborted from another thread since: the child is aborted here, on leaving the scope
  }
  waitComm(c, d, step);  // a failed split hands back a child in error
  // The idle parent goes now if NCCL lets it; else it stays, aborted after the child at the end.
  bool released = true;
  if (nccl.commFinalize) {
    r = nccl.commFinalize(parent);
    Backoff backoff;
    while (r == kNcclInProgress && !d.expired()) {
      backoff.pause();
      nccl.commGetAsyncError(parent, &r);
    }
    released = r == kNcclSuccess;
  }
  if (released) {
    NcclComm idle;
    {
      // taken first: an abort from another thread from now on leaves the handle alone
      std::lock_guard<std::mutex> lk(c.m);
      idle = std::move(c.parent);
    }
    if (idle) nccl.commDestroy(idle.release());  // finalized: the handle is gone whatever destroy says
  }
}

Response GpuRuntime::alloc(const Request& req) {
  requireCuda();
  checkField("device", req.device, 0, static_cast<int64_t>(cuda_.devices.size()) - 1);
  int device = static_cast<int>(req.device);
  size_t bytes = static_cast<size_t>(req.count * dtypeInfo(req.dtype)->bytes);  // checked by decodeRequest
  check(cuda.setDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
  DeviceMemory mem;
  check(cuda.malloc(mem.put(cuda), bytes), "cudaMalloc(" + std::to_string(bytes) + " bytes on device " + std::to_string(device) + ")");
  int64_t handle;
  {
    std::lock_guard<std::mutex> lk(m_);
    handle = nextHandle_++;
    buffers_[handle] = Buffer{device, std::move(mem), bytes, owner_};
  }
  Response out;
  out.result.set("buf", handle).set("bytes", static_cast<int64_t>(bytes)).set("device", device);
  return out;
}

Response GpuRuntime::free(const Request& req) {
  int64_t handle = static_cast<int64_t>(req.buf);
  Buffer& b = buffer(handle);
  check(cuda.setDevice(b.device), "cudaSetDevice");
  check(b.mem.reset(), "cudaFree");
  std::lock_guard<std::mutex> lk(m_);
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

// One copy's staging buffer: back to the pool once the copy has finished; left allocated when it
// has not (deadline, error), as the DMA may still touch it and cudaFreeHost would wait on the device.
class GpuRuntime::Staging {
 public:
  explicit Staging(GpuRuntime& rt) : rt_(rt) {
    {
      std::lock_guard<std::mutex> lk(rt.m_);
      if (!rt.freeStaging_.empty()) {
        mem_ = std::move(rt.freeStaging_.back());
        rt.freeStaging_.pop_back();
        return;
      }
    }
    rt.check(rt.cuda.mallocHost(mem_.put(rt.cuda), kStagingBytes), "cudaMallocHost(staging)");
  }
  ~Staging() {
    if (!finished_) {
      mem_.release();
      return;
    }
    std::lock_guard<std::mutex> lk(rt_.m_);
    rt_.freeStaging_.push_back(std::move(mem_));
  }
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;
  char* get() const { return static_cast<char*>(mem_.get()); }
  void finished() { finished_ = true; }

 private:
  GpuRuntime& rt_;
  PinnedMemory mem_;
  bool finished_ = false;
};

// Copies go through a pinned staging buffer, a piece at a time: a cudaMemcpyAsync with pageable
// memory returns only when done, where no deadline is seen; from pinned memory it is queued and
// the stream polled against the deadline. A buffer whose copy did not finish (deadline, error) is
// not reused: the DMA may still touch it.
Response GpuRuntime::copyIn(const Request& req, std::vector<uint8_t>& payload, const Deadline& d) {
  Buffer& b = buffer(static_cast<int64_t>(req.buf));
  size_t offset = static_cast<size_t>(req.offset);
  char* dst = span(b, offset, payload.size(), "copyIn");
  if (payload.empty()) return Response{};
  check(cuda.setDevice(b.device), "cudaSetDevice");
  cudaStream_t s = copyStream(b.device);
  Staging staging(*this);
  char* stage = staging.get();
  for (size_t done = 0; done < payload.size();) {
    const size_t n = std::min(kStagingBytes, payload.size() - done);
    std::memcpy(stage, payload.data() + done, n);
    check(cuda.memcpyAsync(dst + done, stage, n, kCudaMemcpyHostToDevice, s), "cudaMemcpyAsync(H2D)");
    waitStream(s, d, "copyIn");
    done += n;
  }
  staging.finished();
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
  Staging staging(*this);
  char* stage = staging.get();
  for (size_t done = 0; done < bytes;) {
    const size_t n = std::min(kStagingBytes, bytes - done);
    check(cuda.memcpyAsync(stage, src + done, n, kCudaMemcpyDeviceToHost, s), "cudaMemcpyAsync(D2H)");
    waitStream(s, d, "copyOut");
    std::memcpy(out.payload.data() + done, stage, n);
    done += n;
  }
  staging.finished();
  return out;
}

// The value goes through pinned host memory: a copy to or from pageable memory returns only when
// it is done, so a peer missing from this all-reduce would hold the thread inside CUDA, past every
// deadline. From pinned memory the copies are queued and the completion event polled.
double GpuRuntime::allReduceMax(Comm& c, double value, const Deadline& d, const std::string& what) {
  *c.scratch.value() = value;
  const ncclComm_t comm = handleOf(c, what);
  ncclResult_t r;
  {
    InCall call(c, d, what);  // each call may block (a full launch queue, NCCL's lazy connect)
    checkComm(c, cuda.memcpyAsync(c.scratch.device.get(), c.scratch.value(), sizeof value, kCudaMemcpyHostToDevice, c.stream.get()),
              what + ": cudaMemcpyAsync(H2D)");
    r = nccl.allReduce(c.scratch.device.get(), c.scratch.device.get(), 1, kNcclFloat64, kNcclMax, comm, c.stream.get());
  }
  if (r == kNcclInProgress) waitComm(c, d, what);  // enqueued only then: the copy back goes after it
  else if (r != kNcclSuccess) abortAndThrow(c, codes::kNcclError, what + ": " + nccl.describe(r, comm));
  {
    InCall call(c, d, what);
    checkComm(c, cuda.memcpyAsync(c.scratch.value(), c.scratch.device.get(), sizeof value, kCudaMemcpyDeviceToHost, c.stream.get()),
              what + ": cudaMemcpyAsync(D2H)");
    checkComm(c, cuda.eventRecord(c.sync.get(), c.stream.get()), what + ": cudaEventRecord");
  }
  waitEvent(c, c.sync.get(), d, what);
  return *c.scratch.value();
}

Response GpuRuntime::collective(const Request& req, const Deadline& d) {
  requireNccl();
  int64_t handle = static_cast<int64_t>(req.comm);
  Use use(findComm(handle), handle);
  Comm& c = *use;
  CollectiveSpec s = parseCollective(req, c.nranks, c.rank);
  size_t sendBytes = sendExtentBytes(s, c.nranks, c.rank);
  size_t recvBytes = recvExtentBytes(s, c.nranks, c.rank);
  // sendBuf and recvBuf must be on the communicator's device
  auto onCommDevice = [&](int64_t handle, size_t offset, size_t bytes, const char* field) -> void* {
    Buffer& b = buffer(handle);
    if (b.device != c.device)
      throw SidecarError(codes::kInvalidArgument, std::string(field) + " is on device " + std::to_string(b.device) +
                                                      ", the communicator on device " + std::to_string(c.device));
    return span(b, offset, bytes, field);
  };
  const void* send = sendBytes ? onCommDevice(s.sendBuf, s.sendOffset, sendBytes, "sendBuf") : nullptr;
  void* recv = recvBytes ? onCommDevice(s.recvBuf, s.recvOffset, recvBytes, "recvBuf") : nullptr;
  checkComm(c, cuda.setDevice(c.device), "cudaSetDevice");
  const std::string what = s.name + "(count " + std::to_string(s.count) + ", " + s.dtypeName + ")";
  // Every error aborts the communicator (as nccl-tests does), CUDA's included: a failed launch may
  // leave peers inside the collective, and a later free would wait on their kernels.
  auto record = [&](cudaEvent_t ev, const std::string& phase) {
    InCall call(c, d, what);  // a full launch queue blocks the call
    checkComm(c, cuda.eventRecord(ev, c.stream.get()), what + phase + ": cudaEventRecord");
  };
  auto launch = [&]() {
    checkAbortRequest(c, what);
    const ncclComm_t comm = handleOf(c, what);
    ncclResult_t r;
    {
      // The first launch on a communicator sets up its connections inside this call and waits for
      // the peers there (NCCL's lazy connect): the watchdog ends it at the deadline.
      InCall call(c, d, what);
      r = enqueueCollective(nccl, s, send, recv, c.nranks, c.rank, comm, c.stream.get());
    }
    if (r == kNcclInProgress) waitComm(c, d, what);
    else if (r != kNcclSuccess) abortAndThrow(c, codes::kNcclError, what + ": " + nccl.describe(r, comm));
    // No wait on the stream between launches (nccl-tests times the same way): a full CUDA launch
    // queue blocks the next launch inside InCall, where the watchdog ends it at the deadline.
  };
  auto hostStart = std::chrono::steady_clock::now();
  if (s.warmup > 0) {
    for (int i = 0; i < s.warmup; i++) launch();
    record(c.stop.get(), " warm-up");
    waitEvent(c, c.stop.get(), d, what + " warm-up");
  }
  // Ranks reach this point at different times; a 1-element all-reduce (completed) lines them up
  // so the first timed iteration does not absorb the skew. Only collectives every rank calls.
  const bool everyRank = s.kind != CollKind::Send && s.kind != CollKind::Recv && s.kind != CollKind::SendRecv;
  const bool timed = s.warmup > 0 && everyRank;
  if (timed) allReduceMax(c, 0.0, d, what + " alignment");
  record(c.start.get(), "");
  auto timedStart = std::chrono::steady_clock::now();
  for (int i = 0; i < s.iters; i++) launch();
  record(c.stop.get(), "");
  waitEvent(c, c.stop.get(), d, what);
  auto hostEnd = std::chrono::steady_clock::now();
  float ms = 0;
  checkComm(c, cuda.eventElapsedTime(&ms, c.start.get(), c.stop.get()), what + ": cudaEventElapsedTime");
  const double rankSeconds = static_cast<double>(ms) / 1e3 / s.iters;
  // Rank 0 is the root of rooted ops and finishes early: report the slowest rank's time.
  const double deviceSeconds = timed ? allReduceMax(c, rankSeconds, d, what + " slowest-rank time") : rankSeconds;
  Response out;
  out.result.set("collective", s.name).set("count", static_cast<int64_t>(s.count)).set("dtype", s.dtypeName);
  out.result.set("iters", s.iters).set("warmup", s.warmup);
  out.result.set("deviceSeconds", deviceSeconds).set("rankDeviceSeconds", rankSeconds);
  out.result.set("slowestRank", timed);
  out.result.set("hostSeconds", std::chrono::duration<double>(hostEnd - timedStart).count() / s.iters);
  out.result.set("wallSeconds", std::chrono::duration<double>(hostEnd - hostStart).count());
  return out;
}

Response GpuRuntime::asyncError(const Request& req) {
  CommPtr cp = findComm(static_cast<int64_t>(req.comm));
  Use use(cp, 0);
  Comm& c = *use;
  Response out;
  {
    std::lock_guard<std::mutex> lk(c.m);
    if (c.aborted) {
      out.result.set("aborted", true).set("reason", c.abortReason).set("result", Json());
      return out;
    }
  }
  const ncclComm_t comm = handleOf(c, "asyncError");
  ncclResult_t st = kNcclSuccess;
  ncclResult_t r = nccl.commGetAsyncError(comm, &st);
  if (r != kNcclSuccess) throw SidecarError(codes::kNcclError, "ncclCommGetAsyncError: " + nccl.describe(r, comm));
  out.result.set("aborted", false).set("result", st).set("inProgress", st == kNcclInProgress);
  out.result.set("message", nccl.describe(st, comm));
  return out;
}

void GpuRuntime::abortFromConnection(const CommPtr& cp, const std::string& reason) {
  Comm& c = *cp;
  c.abortRequested = true;
  std::unique_lock<std::mutex> lk(c.m);
  // The communicator's executor polls the request flag between library calls and aborts itself
  // (one owner: no NCCL call of its own races the abort); give it a moment. Inside a call that
  // blocks (a launch connecting to a peer, a full queue) it cannot: abort from here then, as the
  // watchdog does, and the blocked call returns.
  c.cv.wait_for(lk, std::chrono::milliseconds(kAbortHandoffMs), [&] { return !c.busy || c.aborted || c.inCall; });
  if (!c.aborted) abortLocked(c, reason, !c.busy);
  if (c.exec) c.exec->close();  // the handle is gone: its executor ends after what is queued
}

Response GpuRuntime::abort(const Request& req, uint64_t owner) {
  int64_t handle = static_cast<int64_t>(req.comm);
  CommPtr c;
  {
    std::lock_guard<std::mutex> lk(m_);
    auto it = comms_.find(handle);
    if (it == comms_.end() || it->second->owner != owner)
      throw SidecarError(codes::kNotFound, "no communicator with handle " + std::to_string(handle) + " on this connection");
    c = it->second;
    comms_.erase(it);
    abortedByRequest_[handle] = owner;
  }
  bool wasAborted;
  {
    std::lock_guard<std::mutex> lk(c->m);
    wasAborted = c->aborted;
  }
  abortFromConnection(c, "aborted by request");
  Response out;
  out.result.set("aborted", true).set("alreadyAborted", wasAborted);
  return out;
}

void GpuRuntime::abortOwned(uint64_t owner, const std::string& why) {
  std::vector<CommPtr> mine;
  {
    std::lock_guard<std::mutex> lk(m_);
    for (auto it = abortedByRequest_.begin(); it != abortedByRequest_.end();)
      it = it->second == owner ? abortedByRequest_.erase(it) : std::next(it);
    for (auto it = comms_.begin(); it != comms_.end();) {
      if (it->second->owner == owner) {
        mine.push_back(it->second);
        it = comms_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& c : mine) abortFromConnection(c, why);
}

Response GpuRuntime::freeOwned(uint64_t owner) {
  std::vector<int64_t> mine;
  {
    std::lock_guard<std::mutex> lk(m_);
    for (const auto& [h, b] : buffers_)
      if (b.owner == owner) mine.push_back(h);
  }
  int64_t freed = 0;
  for (int64_t h : mine) {
    Buffer* b;
    {
      std::lock_guard<std::mutex> lk(m_);
      b = &buffers_.at(h);  // stays valid: only this (the connection's) executor erases its buffers
    }
    cuda.setDevice(b->device);
    cudaError_t e = b->mem.reset();
    std::lock_guard<std::mutex> lk(m_);
    buffers_.erase(h);
    if (e == kCudaSuccess) freed++;
  }
  Response out;
  out.result.set("freed", freed);
  return out;
}

bool GpuRuntime::ownsBuffers(uint64_t owner) const {
  std::lock_guard<std::mutex> lk(m_);
  for (const auto& [h, b] : buffers_)
    if (b.owner == owner) return true;
  return false;
}

Json GpuRuntime::resources() const {
  std::lock_guard<std::mutex> lk(m_);
  int64_t bytes = 0;
  for (const auto& [h, b] : buffers_) bytes += static_cast<int64_t>(b.bytes);
  Json r = Json::object();
  r.set("comms", static_cast<int64_t>(comms_.size())).set("buffers", static_cast<int64_t>(buffers_.size()));
  r.set("bufferBytes", bytes);
  return r;
}

Response GpuRuntime::destroy(const Request& req, const Deadline& d) {
  int64_t handle = static_cast<int64_t>(req.comm);
  CommPtr cp = findComm(handle);
  auto release = [&] {
    std::lock_guard<std::mutex> lk(m_);
    comms_.erase(handle);
  };
  {
    Use use(cp, 0);
    Comm& c = *use;
    bool aborted;
    {
      std::lock_guard<std::mutex> lk(c.m);
      aborted = c.aborted;
    }
    if (aborted) {
      release();
      if (c.exec) c.exec->close();
      return Response{};
    }
    cuda.setDevice(c.device);
    try {
      if (nccl.commFinalize) {
        // Finalize flushes outstanding work; a peer that never arrives must not hang us.
        const ncclComm_t comm = handleOf(c, "ncclCommFinalize");
        ncclResult_t r;
        {
          static const std::string kFinalize = "ncclCommFinalize";
          InCall call(c, d, kFinalize);  // blocking: waits for the communicator's work
          r = nccl.commFinalize(comm);
        }
        if (r == kNcclInProgress || (r == kNcclSuccess && c.nonblocking)) waitComm(c, d, "ncclCommFinalize");
        else if (r != kNcclSuccess) abortAndThrow(c, codes::kNcclError, "ncclCommFinalize: " + nccl.describe(r, comm));
      }
    } catch (...) {
      release();  // aborted: the handle goes
      if (c.exec) c.exec->close();
      throw;
    }
    ncclResult_t r;
    {
      std::lock_guard<std::mutex> lk(c.m);
      r = nccl.commDestroy(c.comm.release());
      if (c.exec) c.exec->close();
      c.parent.reset();  // aborted: its release after the split failed; after the child is safe
      c.aborted = true;
      c.abortReason = "destroyed";
      releaseComm(c);
    }
    release();
    if (r != kNcclSuccess) throw SidecarError(codes::kNcclError, "ncclCommDestroy: " + nccl.describe(r));
  }
  return Response{};
}

}  // namespace cmesh
