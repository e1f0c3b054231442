// The sidecar's GPU state (loaded libraries, device buffers, NCCL communicators) and the request
// handlers that act on it. Handlers run on the executor thread only, one at a time.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "cmesh_sidecar/cuda_api.hpp"
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

  /** The "cuda", "nccl" and "devices" parts of hello; immutable after construction. */
  Json describe() const;
  bool available() const { return cuda_.available && nccl_.available; }
  std::string unavailableReason() const;

  /** True when `op` runs on the GPU thread (one of the handlers below). */
  static bool handles(Op op);
  /** Runs one decoded request; throws SidecarError. `payload` is the request payload (moved from). */
  Response handle(const Request& req, std::vector<uint8_t>& payload, const Deadline& deadline);

 private:
  struct Buffer {
    int device = 0;
    void* ptr = nullptr;
    size_t bytes = 0;
  };
  struct Comm {
    ncclComm_t comm = nullptr;
    int device = 0, rank = 0, nranks = 0;
    cudaStream_t stream = nullptr;
    cudaEvent_t start = nullptr, stop = nullptr;
    bool aborted = false;
    std::string abortReason;
  };

  Response getUniqueId();
  Response commInitRank(const Request& req, const std::vector<uint8_t>& payload, const Deadline& d);
  Response alloc(const Request& req);
  Response free(const Request& req);
  Response memset(const Request& req, const Deadline& d);
  Response copyIn(const Request& req, std::vector<uint8_t>& payload, const Deadline& d);
  Response copyOut(const Request& req, const Deadline& d);
  Response collective(const Request& req, const Deadline& d);
  Response asyncError(const Request& req);
  Response abort(const Request& req);
  Response destroy(const Request& req, const Deadline& d);

  void requireCuda() const;
  void requireNccl() const;
  void check(cudaError_t e, const std::string& what) const;
  Buffer& buffer(int64_t handle);
  Comm& liveComm(int64_t handle);
  /** Bounds-checks [offset, offset+bytes) against a buffer; returns its device address. */
  char* span(const Buffer& b, size_t offset, size_t bytes, const char* field) const;
  cudaStream_t copyStream(int device);
  void waitStream(cudaStream_t s, const Deadline& d, const std::string& what);
  /** Polls until the communicator leaves ncclInProgress; aborts it on deadline. */
  ncclResult_t waitComm(Comm& c, const Deadline& d, const std::string& what);
  /** Polls an event recorded on the comm's stream, watching NCCL's async error; aborts on hang. */
  void waitEvent(Comm& c, cudaEvent_t ev, const Deadline& d, const std::string& what);
  /** Aborts the communicator and keeps the handle, marked, so later calls say why. */
  [[noreturn]] void abortAndThrow(Comm& c, const std::string& code, const std::string& reason);
  void releaseComm(Comm& c);

  CudaApi cuda;
  NcclApi nccl;
  CudaProbe cuda_;
  NcclProbe nccl_;
  std::map<int64_t, Buffer> buffers_;
  std::map<int64_t, Comm> comms_;
  std::map<int, cudaStream_t> copyStreams_;
  int64_t nextHandle_ = 1;
};

}  // namespace cmesh
