#include "cmesh_sidecar/collective.hpp"

#include <limits>

#include "cmesh_sidecar/request.hpp"

namespace cmesh {

namespace {

struct DtypeInfo {
  const char* name;
  int nccl;
  size_t bytes;
};
const DtypeInfo kDtypes[] = {
    {"int8", kNcclInt8, 1},       {"uint8", kNcclUint8, 1},     {"int32", kNcclInt32, 4},
    {"uint32", kNcclUint32, 4},   {"int64", kNcclInt64, 8},     {"uint64", kNcclUint64, 8},
    {"float16", kNcclFloat16, 2}, {"float32", kNcclFloat32, 4}, {"float64", kNcclFloat64, 8},
    {"bfloat16", kNcclBfloat16, 2},
};

struct RedOpInfo {
  const char* name;
  int nccl;
};
const RedOpInfo kRedOps[] = {{"sum", kNcclSum}, {"product", kNcclProd}, {"prod", kNcclProd}, {"max", kNcclMax}, {"min", kNcclMin}, {"avg", kNcclAvg}};

struct KindInfo {
  const char* name;
  CollKind kind;
  bool reduces;
  bool rooted;
};
const KindInfo kKinds[] = {
    {"allReduce", CollKind::AllReduce, true, false},   {"broadcast", CollKind::Broadcast, false, true},
    {"reduce", CollKind::Reduce, true, true},          {"allGather", CollKind::AllGather, false, false},
    {"reduceScatter", CollKind::ReduceScatter, true, false}, {"sendRecv", CollKind::SendRecv, false, false},
    {"send", CollKind::Send, false, false},            {"recv", CollKind::Recv, false, false},
    {"gather", CollKind::Gather, false, true},         {"scatter", CollKind::Scatter, false, true},
    {"allToAll", CollKind::AllToAll, false, false},
};

std::string kindNames() {
  std::string s;
  for (const auto& k : kKinds) s += (s.empty() ? "" : ", ") + std::string(k.name);
  return s;
}

}  // namespace

CollectiveSpec parseCollective(const Json& req, int nranks, int rank) {
  CollectiveSpec s;
  s.name = requireString(req, "collective");
  const KindInfo* kind = nullptr;
  for (const auto& k : kKinds)
    if (s.name == k.name) kind = &k;
  if (!kind)
    throw SidecarError(codes::kInvalidArgument, "unknown collective '" + s.name + "'; known: " + kindNames());
  s.kind = kind->kind;

  s.dtypeName = optionalString(req, "dtype", "float32");
  const DtypeInfo* dt = nullptr;
  for (const auto& d : kDtypes)
    if (s.dtypeName == d.name) dt = &d;
  if (!dt) throw SidecarError(codes::kInvalidArgument, "unknown dtype '" + s.dtypeName + "'");
  s.dtype = dt->nccl;
  s.elementBytes = dt->bytes;

  std::string op = optionalString(req, "redOp", "sum");
  const RedOpInfo* ro = nullptr;
  for (const auto& r : kRedOps)
    if (op == r.name) ro = &r;
  if (!ro) throw SidecarError(codes::kInvalidArgument, "unknown redOp '" + op + "' (sum, product, max, min, avg)");
  s.redOp = ro->nccl;

  const int64_t maxCount = std::numeric_limits<int64_t>::max() / 16 / (nranks > 0 ? nranks : 1);
  s.count = static_cast<size_t>(requireInt(req, "count", 0, maxCount));
  s.root = kind->rooted ? static_cast<int>(requireInt(req, "root", 0, nranks - 1))
                        : static_cast<int>(optionalInt(req, "root", 0, 0, nranks - 1));
  if (s.kind == CollKind::SendRecv || s.kind == CollKind::Send)
    s.sendPeer = static_cast<int>(requireInt(req, "sendPeer", 0, nranks - 1));
  if (s.kind == CollKind::SendRecv || s.kind == CollKind::Recv)
    s.recvPeer = static_cast<int>(requireInt(req, "recvPeer", 0, nranks - 1));
  s.sendBuf = optionalInt(req, "sendBuf", 0, 0, std::numeric_limits<int64_t>::max());
  s.recvBuf = optionalInt(req, "recvBuf", 0, 0, std::numeric_limits<int64_t>::max());
  s.sendOffset = static_cast<size_t>(optionalInt(req, "sendOffset", 0, 0, std::numeric_limits<int64_t>::max() / 2));
  s.recvOffset = static_cast<size_t>(optionalInt(req, "recvOffset", 0, 0, std::numeric_limits<int64_t>::max() / 2));
  s.warmup = static_cast<int>(optionalInt(req, "warmup", 0, 0, 1000000));
  s.iters = static_cast<int>(optionalInt(req, "iters", 1, 1, 1000000));

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
