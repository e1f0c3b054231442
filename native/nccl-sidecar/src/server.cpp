#include "cmesh_sidecar/server.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace cmesh {

namespace {

/** Sends an ok reply (result JSON as the body, then the payload) or an error reply (the message as the body). */
bool sendReply(int fd, ReplyHeader h, const Response& resp, const std::string& errorMessage) {
  if (h.status != ErrorCode::Ok) {
    h.bodyLength = static_cast<uint32_t>(errorMessage.size());
    h.payloadLength = 0;
    return writeReply(fd, h, errorMessage, nullptr, 0);
  }
  std::string body = resp.result.dump();
  h.bodyLength = static_cast<uint32_t>(body.size());
  h.payloadLength = static_cast<uint32_t>(resp.payload.size());
  return writeReply(fd, h, body, resp.payload.data(), resp.payload.size());
}

}  // namespace

void Server::listen() {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (opts_.socketPath.size() >= sizeof addr.sun_path)
    throw std::runtime_error("socket path is " + std::to_string(opts_.socketPath.size()) + " bytes; the limit is " +
                             std::to_string(sizeof addr.sun_path - 1) + ": " + opts_.socketPath);
  std::memcpy(addr.sun_path, opts_.socketPath.c_str(), opts_.socketPath.size() + 1);
  // A stale socket file from a dead sidecar would make bind fail; never remove anything else.
  struct stat st{};
  if (::lstat(opts_.socketPath.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) throw std::runtime_error(opts_.socketPath + " exists and is not a socket");
    int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool live = ::connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    ::close(probe);
    if (live) throw std::runtime_error("another process is serving " + opts_.socketPath);
    ::unlink(opts_.socketPath.c_str());
  }
  listenFd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listenFd_ < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  if (::bind(listenFd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    throw std::runtime_error("bind " + opts_.socketPath + ": " + std::strerror(errno));
  if (::listen(listenFd_, 64) != 0) throw std::runtime_error(std::string("listen: ") + std::strerror(errno));
}

void Server::serve() {
  for (;;) {
    int fd = ::accept4(listenFd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      std::fprintf(stderr, "cmesh-nccl-sidecar: accept: %s\n", std::strerror(errno));
      return;
    }
    std::thread([this, fd] { serveConnection(fd); }).detach();
  }
}

Json Server::hello() const {
  Json h = runtime_.describe();
  h.set("protocol", kProtocolVersion).set("sidecarVersion", kSidecarVersion);
  h.set("pid", static_cast<int64_t>(::getpid()));
  h.set("available", runtime_.available());
  if (!runtime_.available()) h.set("reason", runtime_.unavailableReason());
  Json limits = Json::object();
  limits.set("maxFrameBytes", static_cast<int64_t>(opts_.maxFrameBytes));
  limits.set("defaultTimeoutMs", opts_.defaultTimeoutMs).set("maxTimeoutMs", opts_.maxTimeoutMs);
  limits.set("stallTimeoutMs", opts_.stallTimeoutMs);
  h.set("limits", limits);
  h.set("resources", runtime_.resources());
  Json ops = Json::array();
  for (uint16_t c = 1; c <= kMaxOpCode; c++) ops.push(opName(c));
  h.set("ops", ops);
  return h;
}

namespace {

/** One reply to write, in request order: ready, or waiting on an executor job. */
struct Outgoing {
  ReplyHeader h;
  Response resp;
  std::string error;
  Executor::JobPtr job;
  bool shutdown = false;
  bool end = false;  // the reader stopped: nothing follows
};

constexpr size_t kMaxQueuedRequests = 1024;

}  // namespace

void Server::serveConnection(int fd, bool exitOnShutdown) {
  const uint64_t owner = nextConnection_++;
  ProtocolLimits limits;
  limits.maxFrameBytes = opts_.maxFrameBytes;
  limits.maxTimeoutMs = static_cast<uint64_t>(opts_.maxTimeoutMs);
  FrameReader reader(fd, limits, opts_.stallTimeoutMs);
  Ordering order;

  // This thread reads requests and queues GPU work in order; a writer thread answers them in the
  // same order. `abort` alone is answered at once, from here, so it can interrupt a collective
  // that an earlier request of this connection is stuck in.
  std::mutex writeM;
  std::mutex qm;
  std::condition_variable qcv;
  std::deque<std::shared_ptr<Outgoing>> queue;
  auto push = [&](std::shared_ptr<Outgoing> o) {
    std::unique_lock<std::mutex> lk(qm);
    qcv.wait(lk, [&] { return queue.size() < kMaxQueuedRequests || o->end; });
    queue.push_back(std::move(o));
    qcv.notify_all();
  };
  std::thread writer([&] {
    bool broken = false;
    for (;;) {
      std::shared_ptr<Outgoing> o;
      {
        std::unique_lock<std::mutex> lk(qm);
        qcv.wait(lk, [&] { return !queue.empty(); });
        o = queue.front();
        queue.pop_front();
        qcv.notify_all();
      }
      if (o->end) break;
      if (o->job) {
        try {
          o->resp = executor_.wait(o->job, opts_.graceMs);
          o->h.status = ErrorCode::Ok;
        } catch (const SidecarError& e) {
          o->h.status = errorCodeOf(e.code());
          o->error = e.what();
        } catch (const std::exception& e) {
          o->h.status = ErrorCode::Internal;
          o->error = e.what();
        }
      }
      if (broken) continue;  // drain: later replies have nowhere to go
      bool ok;
      {
        std::lock_guard<std::mutex> lk(writeM);
        ok = sendReply(fd, o->h, o->resp, o->error);
      }
      if (!ok) {
        broken = true;
        ::shutdown(fd, SHUT_RDWR);  // ends the reader too
        continue;
      }
      if (o->shutdown) {
        if (exitOnShutdown) {
          ::unlink(opts_.socketPath.c_str());
          std::fprintf(stderr, "cmesh-nccl-sidecar: shutdown requested\n");
          std::fflush(stderr);
          ::_exit(0);
        }
        broken = true;
        ::shutdown(fd, SHUT_RDWR);
      }
    }
  });

  for (;;) {
    Frame frame;
    DecodeResult err;
    ReadStatus st = reader.read(frame, err);
    if (st == ReadStatus::Closed) break;
    if (st != ReadStatus::Ok) {
      auto o = std::make_shared<Outgoing>();
      bool fatal = st == ReadStatus::Stalled || st == ReadStatus::Fatal;
      // A stream that cannot be re-synchronised is dropped after saying why (this connection only).
      if (fatal) err.message += "; closing this connection";
      o->h.status = err.code == ErrorCode::Ok ? ErrorCode::Internal : err.code;
      o->h.idKnown = err.idKnown;
      if (err.idKnown) {
        o->h.id = frame.req.id;
        o->h.op = static_cast<uint16_t>(frame.req.op) <= kMaxOpCode ? static_cast<uint16_t>(frame.req.op) : 0;
      }
      o->error = err.message;
      push(o);
      if (fatal) break;
      continue;
    }
    const Request& req = frame.req;
    if (req.op == Op::Abort) {
      bool shutdown = false;
      ReplyHeader h;
      std::string errorMessage;
      Response resp = dispatch(frame, shutdown, h, errorMessage, owner);
      std::lock_guard<std::mutex> lk(writeM);
      if (!sendReply(fd, h, resp, errorMessage)) break;
      continue;
    }
    auto o = std::make_shared<Outgoing>();
    o->h.op = static_cast<uint16_t>(req.op);
    o->h.idKnown = true;
    o->h.id = req.id;
    if (req.op == Op::Ping || GpuRuntime::handles(req.op)) {
      o->job = submit(frame, owner, order);
    } else {
      o->resp = dispatch(frame, o->shutdown, o->h, o->error, owner);
    }
    bool stop = o->shutdown;
    push(o);
    if (stop) break;
  }
  // Gone (an agent restart) or stopping: abort this connection's communicators now, so a
  // collective of its own that hangs ends; the writer then drains its replies.
  runtime_.abortOwned(owner, "its connection closed");
  auto end = std::make_shared<Outgoing>();
  end->end = true;
  push(end);
  writer.join();
  order.conn->close();
  ::close(fd);
  releaseConnection(owner);
}

Executor::JobPtr Server::submit(Frame& frame, uint64_t owner, Ordering& order) {
  const Request req = frame.req;
  int64_t timeoutMs = req.timeoutMs ? static_cast<int64_t>(req.timeoutMs) : opts_.defaultTimeoutMs;
  Deadline deadline(timeoutMs);
  // Finished requests need no waiting for.
  order.since.erase(std::remove_if(order.since.begin(), order.since.end(), [](const Executor::JobPtr& j) { return j->finished(); }),
                    order.since.end());
  auto afterBarrier = [&] { return order.lastBarrier ? std::vector<Executor::JobPtr>{order.lastBarrier} : std::vector<Executor::JobPtr>{}; };
  auto barrier = [&](Executor::JobPtr job) {
    order.lastBarrier = job;
    order.since.clear();
    return job;
  };
  auto afterAll = [&] {
    std::vector<Executor::JobPtr> v = order.since;
    if (order.lastBarrier) v.push_back(order.lastBarrier);
    return v;
  };
  if (req.op == Op::Ping) {
    // Diagnostic: holds the executor for delayMs (as a long GPU call would), so clients can
    // check liveness and that timeouts are honoured.
    // It follows every earlier request of the connection: a ping answered says they are done.
    int64_t delayMs = req.delayMs;
    return barrier(order.conn->submit("ping", deadline, [deadline, delayMs] {
      int64_t wait = std::min(delayMs, std::max<int64_t>(deadline.leftMs(), 0));
      std::this_thread::sleep_for(std::chrono::milliseconds(wait));
      if (wait < delayMs)
        throw SidecarError(codes::kTimeout, "ping with delayMs " + std::to_string(delayMs) +
                                                " exceeded its timeout of " + std::to_string(deadline.budgetMs()) + " ms");
      Response r;
      r.result.set("delayedMs", delayMs);
      return r;
    }, afterAll()));
  }
  std::string label = std::string(opName(static_cast<uint16_t>(req.op))) + " (request " + std::to_string(req.id) + ")";
  GpuRuntime* rt = &runtime_;
  // The task owns its inputs: if the reply gives up waiting, nothing it frees is used.
  auto payload = std::make_shared<std::vector<uint8_t>>(std::move(frame.payload));
  if (req.op == Op::CommInitRank) {
    // A new communicator gets its own executor, which its init already runs on.
    std::string claim;
    try {
      claim = runtime_.claimInit(req, *payload, owner);
    } catch (const SidecarError& e) {
      return Executor::failed(label, deadline, e.code(), e.what());
    }
    auto exec = std::make_shared<Executor>();
    auto job = exec->submit(label, deadline, [rt, req, payload, deadline, owner, exec, claim] {
      return rt->commInitRank(req, *payload, deadline, owner, exec, claim);
    }, afterBarrier());
    order.since.push_back(job);
    return job;
  }
  auto task = [rt, req, payload, deadline, owner] { return rt->handle(req, *payload, deadline, owner); };
  if (req.op == Op::Collective || req.op == Op::Destroy || req.op == Op::AsyncError) {
    std::shared_ptr<Executor> exec = runtime_.executorOf(static_cast<int64_t>(req.comm), owner);
    if (!exec) exec = order.conn;  // an unknown handle: answered NOT_FOUND in order
    auto job = exec->submit(label, deadline, task, afterBarrier());
    order.since.push_back(job);
    return job;
  }
  return barrier(order.conn->submit(label, deadline, task, afterAll()));
}

void Server::releaseConnection(uint64_t owner) {
  // A client that went away (an agent restart) leaves nothing behind in a long-lived sidecar:
  // its communicators were aborted first (serveConnection), then its buffers are freed on the
  // GPU thread (a free before the abort would wait on the hung kernels).
  runtime_.abortOwned(owner, "its connection closed");
  if (!runtime_.ownsBuffers(owner)) return;
  GpuRuntime* rt = &runtime_;
  try {
    Deadline d(opts_.defaultTimeoutMs);
    executor_.run("release of a closed connection's buffers", d, opts_.graceMs, [rt, owner] { return rt->freeOwned(owner); });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cmesh-nccl-sidecar: releasing a closed connection's buffers: %s\n", e.what());
  }
}

Response Server::dispatch(Frame& frame, bool& shutdown, ReplyHeader& h, std::string& errorMessage, uint64_t owner) {
  // decodeRequest has validated the header: the op is known and every field it reads is in range.
  const Request req = frame.req;
  const std::string op = opName(static_cast<uint16_t>(req.op));
  h.op = static_cast<uint16_t>(req.op);
  h.idKnown = true;
  h.id = req.id;
  try {
    Response resp;
    if (req.op == Op::Hello) {
      resp.result = hello();
    } else if (req.op == Op::Shutdown) {
      shutdown = true;
    } else if (req.op == Op::Abort) {
      // On the connection thread, not queued behind the collective it has to interrupt.
      resp = runtime_.abort(req, owner);
    } else {
      throw SidecarError(codes::kUnknownOp, "unknown op " + std::to_string(h.op) + "; known ops: " + knownOps());
    }
    h.status = ErrorCode::Ok;
    return resp;
  } catch (const SidecarError& e) {
    h.status = errorCodeOf(e.code());
    errorMessage = e.what();
  } catch (const std::exception& e) {
    h.status = ErrorCode::Internal;
    errorMessage = e.what();
  }
  return Response{};
}

}  // namespace cmesh
