// The sidecar's GPU state (loaded libraries, device buffers, NCCL communicators) and the request
// handlers that act on it. Handlers run on executor threads: a communicator's on its own (one
// owner: only that thread calls NCCL on it), buffer requests on their connection's. Abort and the
// release of a closed connection's handles run on connection threads, and a watchdog thread aborts
// a communicator whose thread is stuck inside a library call past its request's deadline (as
// torch's watchdog does). Every buffer and communicator belongs to the connection that created it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cmesh_sidecar/cuda_api.hpp"
#include "cmesh_sidecar/executor.hpp"
#include "cmesh_sidecar/handles.hpp"
#include "cmesh_sidecar/nccl_api.hpp"
#include "cmesh_sidecar/request.hpp"

namespace cmesh {

struct RuntimeOptions {
  std::string ncclLib;    // explicit libnccl path ("" = search)
  std::string cudartLib;  // explicit libcudart path ("" = search)
};

class GpuRuntime {
 public:
  explicit GpuRuntime(const RuntimeOptions& opts);
  ~GpuRuntime();

  /** The "cuda", "nccl" and "devices" parts of hello; immutable after construction. */
  Json describe() const;
  bool available() const { return cuda_.available && nccl_.available; }
  std::string unavailableReason() const;

  /** True when `op` runs on the GPU thread (one of the handlers below). */
  static bool handles(Op op);
  /**
   * Runs one decoded request for connection `owner` on the executor thread; throws SidecarError.
   * `payload` is the request payload (moved from).
   */
  Response handle(const Request& req, std::vector<uint8_t>& payload, const Deadline& deadline, uint64_t owner);
  /**
   * commInitRank on `exec`, the new communicator's own executor (the caller runs this there); the
   * communicator keeps it. `claim` is the init's claim (claimInit), released here.
   */
  Response commInitRank(const Request& req, const std::vector<uint8_t>& payload, const Deadline& d, uint64_t owner,
                        std::shared_ptr<Executor> exec, const std::string& claim);
  /** The executor of a communicator of `owner`, or null (unknown handle: the request fails NOT_FOUND). */
  std::shared_ptr<Executor> executorOf(int64_t handle, uint64_t owner) const;
  /**
   * On the connection thread, before an init is queued: registers which rank of which unique id
   * this sidecar is initialising. Another rank of the same communicator on this sidecar (local
   * ranks sharing one socket) is refused at once (INVALID_ARGUMENT), and the first init is
   * interrupted: it would wait for a rank queued behind it. Returns the claim's key.
   */
  std::string claimInit(const Request& req, const std::vector<uint8_t>& payload, uint64_t owner);
  void releaseInit(const std::string& claim);

  /**
   * The abort op, on the calling (connection) thread: asks the GPU thread to abort the
   * communicator and, if that thread is stuck inside a library call for longer than
   * kAbortHandoffMs, calls ncclCommAbort itself (NCCL allows it from another thread). The handle
   * is released at once.
   */
  Response abort(const Request& req, uint64_t owner);
  /** A closed connection's communicators: aborted (connection thread), handles released. */
  void abortOwned(uint64_t owner, const std::string& why);
  /** A closed connection's buffers: freed (run it on the executor thread, after abortOwned). */
  Response freeOwned(uint64_t owner);
  bool ownsBuffers(uint64_t owner) const;
  /** Live handles of every connection: {comms, buffers, bufferBytes} (hello's `resources`). */
  Json resources() const;

  static constexpr int64_t kAbortHandoffMs = 1000;
  /** How often the watchdog looks at the communicators' library calls. */
  static constexpr int64_t kWatchdogPeriodMs = 20;

 private:
  struct Buffer {
    int device = 0;
    DeviceMemory mem;
    size_t bytes = 0;
    uint64_t owner = 0;
  };
  /** 8 device bytes and 8 pinned host bytes for the timing alignment and the slowest-rank time. */
  struct Scratch {
    DeviceMemory device;
    PinnedMemory host;  // its copies are asynchronous, event-polled
    double* value() const { return static_cast<double*>(host.get()); }
  };
  struct Comm {
    explicit Comm(GpuRuntime& runtime) : rt(runtime) {}
    /** Whatever an abort or destroy left: the handles aborted, the scratch slot back to the pool. */
    ~Comm();
    GpuRuntime& rt;
    // Read on the communicator's executor and written by aborts from other threads: under `m`.
    NcclComm comm;                  // the ops' communicator
    NcclComm parent;                // the non-blocking one `comm` was split from, until released (aborted after `comm`)
    bool nonblocking = false;       // `comm` answers ncclInProgress
    int device = 0, rank = 0, nranks = 0;
    uint64_t owner = 0;
    CudaStream stream;
    CudaEvent start, stop, sync;
    Scratch scratch;
    std::shared_ptr<Executor> exec;  // runs every request on this communicator
    std::string claim;               // the init's claim while init runs (claimInit)
    std::mutex m;             // guards comm, parent, aborted, abortReason, abortCode, busy, inCall*
    std::condition_variable cv;
    bool aborted = false;
    std::string abortReason;
    std::string abortCode;  // the error later requests on it get (ABORTED, or TIMEOUT from the watchdog)
    bool busy = false;  // its executor is running a request on it
    // Its executor is inside a library call that may block (a launch connecting to peers, a full
    // launch queue): what, and until when the request may take. The watchdog aborts past it.
    bool inCall = false;
    const std::string* inCallWhat = nullptr;
    Deadline::Clock::time_point inCallDeadline{};
    int64_t inCallBudgetMs = 0;
    std::atomic<bool> abortRequested{false};
    std::string abortRequestReason;  // under m
  };
  using CommPtr = std::shared_ptr<Comm>;
  /** Marks a communicator in use by the GPU thread for a scope (abort waits for it to notice). */
  class Use {
   public:
    /** With requireLive = the handle (not 0): throws ABORTED for an aborted communicator. */
    Use(CommPtr c, int64_t requireLive);
    ~Use();
    Comm& operator*() const { return *c_; }

   private:
    CommPtr c_;
  };

  Response getUniqueId();
  /** The communicator's device as NCCL sees it (ncclCommCuDevice) must be the one asked for. */
  void checkDevice(Comm& c, const std::string& what);
  /** Replaces the (non-blocking) communicator with a blocking one of the same ranks split from it. */
  void splitBlocking(Comm& c, const Deadline& d, const std::string& what);
  /** The timed loop's start and result across ranks: a 1-element all-reduce aligns them; max gives the slowest. */
  double allReduceMax(Comm& c, double value, const Deadline& d, const std::string& what);
  Response alloc(const Request& req);
  Response free(const Request& req);
  Response memset(const Request& req, const Deadline& d);
  Response copyIn(const Request& req, std::vector<uint8_t>& payload, const Deadline& d);
  Response copyOut(const Request& req, const Deadline& d);
  Response collective(const Request& req, const Deadline& d);
  Response asyncError(const Request& req);
  Response destroy(const Request& req, const Deadline& d);

  void requireCuda() const;
  void requireNccl() const;
  void check(cudaError_t e, const std::string& what) const;
  /** check() on a communicator's launch path: an error aborts it (peers may be inside the op). */
  void checkComm(Comm& c, cudaError_t e, const std::string& what);
  /** The communicator's handle (under its lock); throws ABORTED once aborted. */
  ncclComm_t handleOf(Comm& c, const std::string& what);
  /** Marks a library call that may block on the communicator, for the watchdog (RAII). */
  class InCall {
   public:
    /** `what` must outlive the call (it is kept by reference). */
    InCall(Comm& c, const Deadline& d, const std::string& what);
    ~InCall();

   private:
    Comm& c_;
  };
  void watchdog();
  /**
   * Pinned host and device scratch slots: reused, never freed while the sidecar runs (cudaFree
   * would wait on every kernel of the device). A slot whose stream may still copy into it is left
   * allocated, not reused.
   */
  void takeScratch(Comm& c);
  void returnScratch(Comm& c);
  /** Pinned staging buffers for copyIn / copyOut (kStagingBytes each), reused as the scratch slots. */
  class Staging;
  static constexpr size_t kStagingBytes = size_t(4) << 20;
  Buffer& buffer(int64_t handle);
  /** A communicator of this connection (NOT_FOUND otherwise). */
  CommPtr findComm(int64_t handle);
  /** Bounds-checks [offset, offset+bytes) against a buffer; returns its device address. */
  char* span(const Buffer& b, size_t offset, size_t bytes, const char* field) const;
  cudaStream_t copyStream(int device);
  void waitStream(cudaStream_t s, const Deadline& d, const std::string& what);
  /**
   * Polls until the communicator (`comm`, default c.comm) leaves ncclInProgress and, with
   * `written`, until NCCL has written a communicator there. Any error, the deadline or an abort
   * request aborts the communicator and throws (as nccl-tests aborts on any async error).
   */
  void waitComm(Comm& c, const Deadline& d, const std::string& what, ncclComm_t comm = nullptr,
                const ncclComm_t* written = nullptr);
  /** Polls an event recorded on the comm's stream, watching NCCL's async error; aborts on hang. */
  void waitEvent(Comm& c, cudaEvent_t ev, const Deadline& d, const std::string& what);
  /** Aborts the communicator and keeps the handle, marked, so later calls say why. */
  [[noreturn]] void abortAndThrow(Comm& c, const std::string& code, const std::string& reason);
  /** ncclCommAbort once, then the stream, events and scratch buffer (c.m held by the caller). */
  void abortLocked(Comm& c, const std::string& reason, bool releaseResources, const std::string& code = codes::kAborted);
  void releaseComm(Comm& c);
  /** Throws ABORTED when an abort was requested from a connection thread. */
  void checkAbortRequest(Comm& c, const std::string& what);
  /** Aborts a communicator from a connection thread (see abort()). */
  void abortFromConnection(const CommPtr& c, const std::string& reason);

  CudaApi cuda;
  NcclApi nccl;
  CudaProbe cuda_;
  NcclProbe nccl_;
  static thread_local uint64_t owner_;  // the connection of the request running on this executor thread
  mutable std::mutex m_;  // guards the maps; a connection's executor adds and frees its buffers
  std::map<int64_t, Buffer> buffers_;
  std::map<int64_t, CommPtr> comms_;
  // Handles released by an abort request -> their connection, until it closes: a request on one
  // (queued before the abort ran, or sent after it) fails ABORTED, not NOT_FOUND.
  std::map<int64_t, uint64_t> abortedByRequest_;
  std::vector<std::weak_ptr<Comm>> watched_;  // every communicator, from init on (the watchdog's)
  std::map<std::string, std::pair<int, std::weak_ptr<Comm>>> claims_;  // unique id -> (rank, comm) while init runs
  std::map<std::string, std::string> refused_;  // a claim interrupted by another rank's init -> why
  std::map<int, CudaStream> copyStreams_;
  std::map<int, std::vector<Scratch>> freeScratch_;  // per device
  std::vector<PinnedMemory> freeStaging_;
  int64_t nextHandle_ = 1;
  std::atomic<bool> stopping_{false};
  std::thread watchdogThread_;
};

}  // namespace cmesh
