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

const char* kInlineOps[] = {"hello", "ping", "shutdown"};

Response errorResponse(const Json& id, const std::string& op, const std::string& code, const std::string& message) {
  Response r;
  r.header.set("id", id).set("ok", false);
  if (!op.empty()) r.header.set("op", op);
  Json err = Json::object();
  err.set("code", code).set("message", message);
  r.header.set("error", err);
  return r;
}

bool send(int fd, const Response& r) {
  return writeFrame(fd, r.header.dump(), r.payload.data(), r.payload.size());
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
    std::thread([this, fd] { handleConnection(fd); }).detach();
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
  for (const char* o : kInlineOps) ops.push(o);
  for (const char* o : {"getUniqueId", "commInitRank", "alloc", "free", "memset", "copyIn", "copyOut", "collective",
                        "asyncError", "abort", "destroy"})
    ops.push(o);
  h.set("ops", ops);
  return h;
}

void Server::handleConnection(int fd) {
  FrameReader reader(fd, opts_.maxFrameBytes, opts_.stallTimeoutMs);
  for (;;) {
    Frame frame;
    std::string err;
    ReadStatus st = reader.read(frame, err);
    if (st == ReadStatus::Closed) break;
    if (st == ReadStatus::Malformed) {
      if (!send(fd, errorResponse(Json(), "", codes::kBadFrame, err))) break;
      continue;
    }
    if (st == ReadStatus::Stalled || st == ReadStatus::Fatal) {
      // The stream cannot be re-synchronised: say why, then drop this connection only.
      send(fd, errorResponse(Json(), "", st == ReadStatus::Stalled ? codes::kTimeout : codes::kBadFrame,
                             err + "; closing this connection"));
      break;
    }
    bool shutdown = false;
    Response resp = dispatch(frame, shutdown);
    if (!send(fd, resp)) break;
    if (shutdown) {
      ::unlink(opts_.socketPath.c_str());
      std::fprintf(stderr, "cmesh-nccl-sidecar: shutdown requested\n");
      std::fflush(stderr);
      ::_exit(0);
    }
  }
  ::close(fd);
}

Response Server::dispatch(Frame& frame, bool& shutdown) {
  Json req;
  try {
    req = Json::parse(frame.header);
  } catch (const JsonError& e) {
    return errorResponse(Json(), "", codes::kBadFrame, std::string("header is not JSON: ") + e.what());
  }
  if (!req.isObject()) return errorResponse(Json(), "", codes::kBadFrame, "header must be a JSON object");
  const Json* idField = req.find("id");
  if (!idField || !idField->isInteger() || idField->asInt() < 0)
    return errorResponse(Json(), "", codes::kBadFrame, "header needs 'id', a non-negative integer");
  Json id = *idField;
  const Json* opField = req.find("op");
  if (!opField || !opField->isString()) return errorResponse(id, "", codes::kBadFrame, "header needs 'op', a string");
  std::string op = opField->asString();

  try {
    int64_t timeoutMs = optionalInt(req, "timeoutMs", opts_.defaultTimeoutMs, 1, opts_.maxTimeoutMs);
    Deadline deadline(timeoutMs);
    Response resp;
    if (op == "hello") {
      resp.header = hello();
    } else if (op == "shutdown") {
      shutdown = true;
    } else if (op == "ping") {
      // Diagnostic: holds the executor for delayMs (as a long GPU call would), so clients can
      // check liveness and that timeouts are honoured.
      int64_t delayMs = optionalInt(req, "delayMs", 0, 0, opts_.maxTimeoutMs);
      resp = executor_.run("ping", deadline, opts_.graceMs, [deadline, delayMs] {
        int64_t wait = std::min(delayMs, std::max<int64_t>(deadline.leftMs(), 0));
        std::this_thread::sleep_for(std::chrono::milliseconds(wait));
        if (wait < delayMs)
          throw SidecarError(codes::kTimeout, "ping with delayMs " + std::to_string(delayMs) +
                                                  " exceeded its timeout of " + std::to_string(deadline.budgetMs()) +
                                                  " ms");
        Response r;
        r.header.set("delayedMs", delayMs);
        return r;
      });
    } else if (GpuRuntime::handles(op)) {
      std::string label = op + " (request " + std::to_string(id.asInt()) + ")";
      GpuRuntime* rt = &runtime_;
      // The task owns its inputs: if this connection gives up waiting, nothing it frees is used.
      auto payload = std::make_shared<std::vector<uint8_t>>(std::move(frame.payload));
      resp = executor_.run(label, deadline, opts_.graceMs,
                           [rt, op, req, payload, deadline] { return rt->handle(op, req, *payload, deadline); });
    } else {
      std::string known;
      for (const auto& o : hello().find("ops")->items()) known += (known.empty() ? "" : ", ") + o.asString();
      return errorResponse(id, op, codes::kUnknownOp, "unknown op '" + op + "'; known ops: " + known);
    }
    resp.header.set("id", id).set("ok", true).set("op", op);
    return resp;
  } catch (const SidecarError& e) {
    return errorResponse(id, op, e.code(), e.what());
  } catch (const std::exception& e) {
    return errorResponse(id, op, codes::kInternal, e.what());
  }
}

}  // namespace cmesh
