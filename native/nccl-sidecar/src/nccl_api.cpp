#include "cmesh_sidecar/nccl_api.hpp"

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "cmesh_sidecar/library_search.hpp"

namespace cmesh {

std::string NcclApi::describe(ncclResult_t r, ncclComm_t comm) const {
  static const char* names[] = {"ncclSuccess",       "ncclUnhandledCudaError", "ncclSystemError",
                                "ncclInternalError", "ncclInvalidArgument",    "ncclInvalidUsage",
                                "ncclRemoteError",   "ncclInProgress",         "ncclTimeout"};
  std::string out = (r >= 0 && r < 9) ? names[r] : "ncclResult " + std::to_string(r);
  if (getErrorString) out += std::string(" (") + getErrorString(r) + ")";
  if (getLastError) {
    const char* last = getLastError(comm);
    if (last && *last) out += std::string(": ") + last;
  }
  return out;
}

namespace {

template <typename Fn>
void bind(void* h, const char* name, Fn& fn, std::string& missing) {
  fn = reinterpret_cast<Fn>(findSymbol(h, name));
  if (!fn) missing += (missing.empty() ? "" : ", ") + std::string(name);
}

}  // namespace

NcclProbe loadNccl(const std::string& explicitPath, NcclApi& api) {
  NcclProbe probe;
  // Timeouts need abortable communicators: non-blocking ones (asked for in the init's config)
  // unless the operator set NCCL_COMM_BLOCKING, which NCCL applies to every communicator.
  const char* blockingEnv = std::getenv("NCCL_COMM_BLOCKING");

  auto candidates = libraryCandidates(explicitPath, {"libnccl.so.2", "libnccl.so"},
                                      {"nvidia/nccl/lib/libnccl.so.2", "nvidia/nccl/lib/libnccl.so*"},
                                      {"/usr/local/nccl/lib/libnccl.so.2", "/usr/local/cuda/lib64/libnccl.so.2"});
  std::string attempts;
  std::vector<std::string> seen;  // real files already tried under another name
  for (const auto& path : candidates) {
    std::string err;
    void* h = openLibrary(path, err);
    if (!h) {
      attempts += (attempts.empty() ? "" : "; ") + path + ": " + err;
      continue;
    }
    std::string real = loadedPath(h);
    if (std::find(seen.begin(), seen.end(), real) != seen.end()) continue;
    seen.push_back(real);
    NcclApi candidate;
    candidate.library = real.empty() || real == path ? path : path + " (" + real + ")";
    std::string missing;
    bind(h, "ncclGetVersion", candidate.getVersion, missing);
    bind(h, "ncclGetUniqueId", candidate.getUniqueId, missing);
    bind(h, "ncclCommInitRank", candidate.commInitRank, missing);
    bind(h, "ncclCommDestroy", candidate.commDestroy, missing);
    bind(h, "ncclCommAbort", candidate.commAbort, missing);
    bind(h, "ncclCommGetAsyncError", candidate.commGetAsyncError, missing);
    bind(h, "ncclGetErrorString", candidate.getErrorString, missing);
    bind(h, "ncclAllReduce", candidate.allReduce, missing);
    bind(h, "ncclBroadcast", candidate.broadcast, missing);
    bind(h, "ncclReduce", candidate.reduce, missing);
    bind(h, "ncclAllGather", candidate.allGather, missing);
    bind(h, "ncclReduceScatter", candidate.reduceScatter, missing);
    bind(h, "ncclSend", candidate.send, missing);
    bind(h, "ncclRecv", candidate.recv, missing);
    bind(h, "ncclGroupStart", candidate.groupStart, missing);
    bind(h, "ncclGroupEnd", candidate.groupEnd, missing);
    if (!missing.empty()) {
      attempts += (attempts.empty() ? "" : "; ") + path + ": missing symbols " + missing + " (NCCL >= 2.7 needed)";
      continue;
    }
    candidate.commCuDevice = reinterpret_cast<decltype(candidate.commCuDevice)>(findSymbol(h, "ncclCommCuDevice"));
    candidate.commFinalize = reinterpret_cast<decltype(candidate.commFinalize)>(findSymbol(h, "ncclCommFinalize"));
    candidate.commInitRankConfig = reinterpret_cast<decltype(candidate.commInitRankConfig)>(findSymbol(h, "ncclCommInitRankConfig"));
    candidate.commSplit = reinterpret_cast<decltype(candidate.commSplit)>(findSymbol(h, "ncclCommSplit"));
    candidate.getLastError = reinterpret_cast<decltype(candidate.getLastError)>(findSymbol(h, "ncclGetLastError"));
    api = candidate;
    candidate.getVersion(&probe.version);
    // Codes are X*1000+Y*100+Z before 2.9 and X*10000+Y*100+Z since.
    int v = probe.version;
    int major = v >= 10000 ? v / 10000 : v / 1000;
    int minor = v >= 10000 ? (v % 10000) / 100 : (v % 1000) / 100;
    probe.versionString = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(v % 100);
    // Non-blocking communicators (ncclInProgress, ncclConfig_t, NCCL_COMM_BLOCKING) came with
    // NCCL 2.14 and ncclCommSplit with 2.18; older libraries block, so claim no abortable waits there.
    const bool v214 = major > 2 || (major == 2 && minor >= 14);
    const bool v218 = major > 2 || (major == 2 && minor >= 18);
    if (blockingEnv) {
      probe.nonblocking = blockingEnv[0] == '0' && v214;
    } else {
      probe.nonblocking = v214 && api.commInitRankConfig;
      probe.splitLaunches = probe.nonblocking && v218 && api.commSplit;
    }
    probe.available = true;
    return probe;
  }
  probe.reason = "NCCL library not found: " + (attempts.empty() ? std::string("no candidates") : attempts) +
                 (explicitPath.empty() ? " (install the nvidia-nccl-cu13 wheel or set CMESH_NCCL_LIB / --nccl-lib)" : "");
  return probe;
}

}  // namespace cmesh
