// One collective request: which NCCL calls it makes, which buffer extents it touches, and how
// P2P patterns (gather, scatter, all-to-all, send/recv) map to grouped ncclSend/ncclRecv.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "cmesh_sidecar/protocol.hpp"
#include "cmesh_sidecar/nccl_api.hpp"

namespace cmesh {

struct CollectiveSpec {
  CollKind kind = CollKind::AllReduce;
  std::string name;
  int dtype = kNcclFloat32;
  std::string dtypeName;
  size_t elementBytes = 4;
  int redOp = kNcclSum;
  size_t count = 0;  // elements per rank (NCCL's count / sendcount / recvcount)
  int root = 0;
  int sendPeer = -1;
  int recvPeer = -1;
  int64_t sendBuf = 0, recvBuf = 0;  // buffer handles (0 = none)
  size_t sendOffset = 0, recvOffset = 0;
  int warmup = 0;
  int iters = 1;
};

/**
 * The collective a (decoded, range-checked) request asks for, validated against the
 * communicator's size and rank: root and peers below nranks, extents that fit, buffers present.
 */
CollectiveSpec parseCollective(const Request& req, int nranks, int rank);

/** Bytes of the send / receive buffer the op reads or writes on this rank (0 = unused). */
size_t sendExtentBytes(const CollectiveSpec& s, int nranks, int rank);
size_t recvExtentBytes(const CollectiveSpec& s, int nranks, int rank);

/** Enqueues the op once on `stream`. May return ncclInProgress on non-blocking communicators. */
ncclResult_t enqueueCollective(const NcclApi& nccl, const CollectiveSpec& s, const void* send, void* recv,
                               int nranks, int rank, ncclComm_t comm, cudaStream_t stream);

}  // namespace cmesh
