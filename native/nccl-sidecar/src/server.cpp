#include "cmesh_sidecar/server.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
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

bool sendError(int fd, const DecodeResult& err, const Request& req, bool idKnown) {
  ReplyHeader h;
  h.status = err.code == ErrorCode::Ok ? ErrorCode::Internal : err.code;
  h.idKnown = idKnown;
  if (idKnown) {
    h.id = req.id;
    h.op = static_cast<uint16_t>(req.op) <= kMaxOpCode ? static_cast<uint16_t>(req.op) : 0;
  }
  return sendReply(fd, h, Response{}, err.message);
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
  Json ops = Json::array();
  for (uint16_t c = 1; c <= kMaxOpCode; c++) ops.push(opName(c));
  h.set("ops", ops);
  return h;
}

void Server::serveConnection(int fd, bool exitOnShutdown) {
  ProtocolLimits limits;
  limits.maxFrameBytes = opts_.maxFrameBytes;
  limits.maxTimeoutMs = static_cast<uint64_t>(opts_.maxTimeoutMs);
  FrameReader reader(fd, limits, opts_.stallTimeoutMs);
  for (;;) {
    Frame frame;
    DecodeResult err;
    ReadStatus st = reader.read(frame, err);
    if (st == ReadStatus::Closed) break;
    if (st == ReadStatus::Malformed) {
      if (!sendError(fd, err, frame.req, err.idKnown)) break;
      continue;
    }
    if (st == ReadStatus::Stalled || st == ReadStatus::Fatal) {
      // The stream cannot be re-synchronised: say why, then drop this connection only.
      err.message += "; closing this connection";
      sendError(fd, err, frame.req, err.idKnown);
      break;
    }
    bool shutdown = false;
    ReplyHeader h;
    std::string errorMessage;
    Response resp = dispatch(frame, shutdown, h, errorMessage);
    if (!sendReply(fd, h, resp, errorMessage)) break;
    if (shutdown) {
      if (!exitOnShutdown) break;
      ::unlink(opts_.socketPath.c_str());
      std::fprintf(stderr, "cmesh-nccl-sidecar: shutdown requested\n");
      std::fflush(stderr);
      ::_exit(0);
    }
  }
  ::close(fd);
}

Response Server::dispatch(Frame& frame, bool& shutdown, ReplyHeader& h, std::string& errorMessage) {
  // decodeRequest has validated the header: the op is known and every field it reads is in range.
  const Request req = frame.req;
  const std::string op = opName(static_cast<uint16_t>(req.op));
  h.op = static_cast<uint16_t>(req.op);
  h.idKnown = true;
  h.id = req.id;
  try {
    int64_t timeoutMs = req.timeoutMs ? static_cast<int64_t>(req.timeoutMs) : opts_.defaultTimeoutMs;
    Deadline deadline(timeoutMs);
    Response resp;
    if (req.op == Op::Hello) {
      resp.result = hello();
    } else if (req.op == Op::Shutdown) {
      shutdown = true;
    } else if (req.op == Op::Ping) {
      // Diagnostic: holds the executor for delayMs (as a long GPU call would), so clients can
      // check liveness and that timeouts are honoured.
      int64_t delayMs = req.delayMs;
      resp = executor_.run("ping", deadline, opts_.graceMs, [deadline, delayMs] {
        int64_t wait = std::min(delayMs, std::max<int64_t>(deadline.leftMs(), 0));
        std::this_thread::sleep_for(std::chrono::milliseconds(wait));
        if (wait < delayMs)
          throw SidecarError(codes::kTimeout, "ping with delayMs " + std::to_string(delayMs) +
                                                  " exceeded its timeout of " + std::to_string(deadline.budgetMs()) +
                                                  " ms");
        Response r;
        r.result.set("delayedMs", delayMs);
        return r;
      });
    } else if (GpuRuntime::handles(req.op)) {
      std::string label = op + " (request " + std::to_string(req.id) + ")";
      GpuRuntime* rt = &runtime_;
      // The task owns its inputs: if this connection gives up waiting, nothing it frees is used.
      auto payload = std::make_shared<std::vector<uint8_t>>(std::move(frame.payload));
      resp = executor_.run(label, deadline, opts_.graceMs,
                           [rt, req, payload, deadline] { return rt->handle(req, *payload, deadline); });
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
