#include "cmesh_sidecar/collective.hpp"

#include <limits>

#include "cmesh_sidecar/request.hpp"

namespace cmesh {

CollectiveSpec parseCollective(const Request& req, int nranks, int rank) {
  // decodeRequest has checked the codes and the header's own ranges.
  CollectiveSpec s;
  const char* name = collectiveName(req.collective);
  const DtypeInfo* dt = dtypeInfo(req.dtype);
  const char* redOp = redOpName(req.redOp);
  if (!name || !dt || !redOp) throw SidecarError(codes::kInvalidArgument, "collective, dtype or redOp code unknown");
  s.kind = static_cast<CollKind>(req.collective);
  s.name = name;
  s.dtype = dt->code;
  s.dtypeName = dt->name;
  s.elementBytes = dt->bytes;
  s.redOp = req.redOp;

  // n·c bytes (the largest extent) must fit: count × element size × nranks <= kMaxBytes.
  const int64_t maxCount = static_cast<int64_t>(kMaxBytes / dt->bytes / static_cast<uint64_t>(nranks > 0 ? nranks : 1));
  checkField("count", static_cast<int64_t>(req.count), 0, maxCount);
  s.count = static_cast<size_t>(req.count);
  checkField("root", req.root, 0, nranks - 1);
  s.root = static_cast<int>(req.root);
  if (s.kind == CollKind::SendRecv || s.kind == CollKind::Send) {
    if (req.sendPeer == kNoPeer) throw SidecarError(codes::kInvalidArgument, s.name + " needs field 'sendPeer'");
    checkField("sendPeer", req.sendPeer, 0, nranks - 1);
    s.sendPeer = req.sendPeer;
  }
  if (s.kind == CollKind::SendRecv || s.kind == CollKind::Recv) {
    if (req.recvPeer == kNoPeer) throw SidecarError(codes::kInvalidArgument, s.name + " needs field 'recvPeer'");
    checkField("recvPeer", req.recvPeer, 0, nranks - 1);
    s.recvPeer = req.recvPeer;
  }
  s.sendBuf = static_cast<int64_t>(req.sendBuf);
  s.recvBuf = static_cast<int64_t>(req.recvBuf);
  s.sendOffset = static_cast<size_t>(req.offset);
  s.recvOffset = static_cast<size_t>(req.recvOffset);
  s.warmup = static_cast<int>(req.warmup);
  s.iters = static_cast<int>(req.iters);

  if (sendExtentBytes(s, nranks, rank) > 0 && s.sendBuf == 0)
    throw SidecarError(codes::kInvalidArgument, s.name + " on rank " + std::to_string(rank) + " needs 'sendBuf'");
  if (recvExtentBytes(s, nranks, rank) > 0 && s.recvBuf == 0)
    throw SidecarError(codes::kInvalidArgument, s.name + " on rank " + std::to_string(rank) + " needs 'recvBuf'");
  return s;
}

size_t sendExtentBytes(const CollectiveSpec& s, int nranks, int rank) {
  size_t one = s.count * s.elementBytes;
  switch (s.kind) {
    case CollKind::AllReduce: case CollKind::Reduce: case CollKind::AllGather:
    case CollKind::SendRecv: case CollKind::Send: case CollKind::Gather:
      return one;
    case CollKind::Broadcast: return rank == s.root ? one : 0;  // NCCL reads sendbuff on the root only
    case CollKind::ReduceScatter: case CollKind::AllToAll: return one * nranks;
    case CollKind::Scatter: return rank == s.root ? one * nranks : 0;
    case CollKind::Recv: return 0;
  }
  return 0;
}

size_t recvExtentBytes(const CollectiveSpec& s, int nranks, int rank) {
  size_t one = s.count * s.elementBytes;
  switch (s.kind) {
    case CollKind::AllReduce: case CollKind::Broadcast: case CollKind::ReduceScatter:
    case CollKind::SendRecv: case CollKind::Recv: case CollKind::Scatter:
      return one;
    case CollKind::Reduce: return rank == s.root ? one : 0;
    case CollKind::AllGather: case CollKind::AllToAll: return one * nranks;
    case CollKind::Gather: return rank == s.root ? one * nranks : 0;
    case CollKind::Send: return 0;
  }
  return 0;
}

ncclResult_t enqueueCollective(const NcclApi& n, const CollectiveSpec& s, const void* send, void* recv, int nranks,
                               int rank, ncclComm_t comm, cudaStream_t stream) {
  const size_t one = s.count * s.elementBytes;
  const auto* sendBytes = static_cast<const char*>(send);
  auto* recvBytes = static_cast<char*>(recv);
  // Grouped P2P: ncclGroupEnd's result is the group's; a failure inside still needs the group closed.
  auto grouped = [&](auto&& body) -> ncclResult_t {
    ncclResult_t r = n.groupStart();
    if (r != kNcclSuccess) return r;
    ncclResult_t inner = body();
    ncclResult_t end = n.groupEnd();
    return inner != kNcclSuccess ? inner : end;
  };
  switch (s.kind) {
    case CollKind::AllReduce: return n.allReduce(send, recv, s.count, s.dtype, s.redOp, comm, stream);
    case CollKind::Broadcast: return n.broadcast(send, recv, s.count, s.dtype, s.root, comm, stream);
    case CollKind::Reduce: return n.reduce(send, recv, s.count, s.dtype, s.redOp, s.root, comm, stream);
    case CollKind::AllGather: return n.allGather(send, recv, s.count, s.dtype, comm, stream);
    case CollKind::ReduceScatter: return n.reduceScatter(send, recv, s.count, s.dtype, s.redOp, comm, stream);
    case CollKind::SendRecv:
      return grouped([&] {
        ncclResult_t r = n.send(send, s.count, s.dtype, s.sendPeer, comm, stream);
        return r != kNcclSuccess ? r : n.recv(recv, s.count, s.dtype, s.recvPeer, comm, stream);
      });
    case CollKind::Send: return n.send(send, s.count, s.dtype, s.sendPeer, comm, stream);
    case CollKind::Recv: return n.recv(recv, s.count, s.dtype, s.recvPeer, comm, stream);
    case CollKind::Gather:
      return grouped([&] {
        if (rank == s.root)
          for (int r = 0; r < nranks; r++) {
            ncclResult_t e = n.recv(recvBytes + r * one, s.count, s.dtype, r, comm, stream);
            if (e != kNcclSuccess) return e;
          }
        return n.send(send, s.count, s.dtype, s.root, comm, stream);
      });
    case CollKind::Scatter:
      return grouped([&] {
        if (rank == s.root)
          for (int r = 0; r < nranks; r++) {
            ncclResult_t e = n.send(sendBytes + r * one, s.count, s.dtype, r, comm, stream);
            if (e != kNcclSuccess) return e;
          }
        return n.recv(recv, s.count, s.dtype, s.root, comm, stream);
      });
    case CollKind::AllToAll:
      return grouped([&] {
        for (int r = 0; r < nranks; r++) {
          ncclResult_t e = n.send(sendBytes + r * one, s.count, s.dtype, r, comm, stream);
          if (e == kNcclSuccess) e = n.recv(recvBytes + r * one, s.count, s.dtype, r, comm, stream);
          if (e != kNcclSuccess) return e;
        }
        return kNcclSuccess;
      });
  }
  return kNcclInvalidArgument;
}

}  // namespace cmesh
