// What every handler shares: typed errors (the `code` goes on the wire), deadlines, responses,
// and range checks that reject bad fields with a message naming the field.
#pragma once

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "cmesh_sidecar/json.hpp"
#include "cmesh_sidecar/protocol.hpp"

namespace cmesh {

/** Error codes on the wire (README.md, "Errors"). */
namespace codes {
constexpr const char* kBadFrame = "BAD_FRAME";
constexpr const char* kUnknownOp = "UNKNOWN_OP";
constexpr const char* kInvalidArgument = "INVALID_ARGUMENT";
constexpr const char* kUnavailable = "UNAVAILABLE";
constexpr const char* kNotFound = "NOT_FOUND";
constexpr const char* kTimeout = "TIMEOUT";
constexpr const char* kAborted = "ABORTED";
constexpr const char* kCudaError = "CUDA_ERROR";
constexpr const char* kNcclError = "NCCL_ERROR";
constexpr const char* kInternal = "INTERNAL";
}  // namespace codes

class SidecarError : public std::runtime_error {
 public:
  SidecarError(std::string code, const std::string& message) : std::runtime_error(message), code_(std::move(code)) {}
  const std::string& code() const { return code_; }

 private:
  std::string code_;
};

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;
  explicit Deadline(int64_t budgetMs) : budgetMs_(budgetMs), at_(Clock::now() + std::chrono::milliseconds(budgetMs)) {}
  bool expired() const { return Clock::now() >= at_; }
  int64_t leftMs() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(at_ - Clock::now()).count();
  }
  int64_t budgetMs() const { return budgetMs_; }
  Clock::time_point at() const { return at_; }

 private:
  int64_t budgetMs_;
  Clock::time_point at_;
};

/** A successful reply: `result` goes out as the body (a JSON object the sidecar writes), then `payload`. */
struct Response {
  Json result = Json::object();
  std::vector<uint8_t> payload;
};

/**
 * Throws SidecarError(INVALID_ARGUMENT) "field 'key' = v is outside [min, max]" unless min <= v <= max.
 * For checks that need the sidecar's state (device count, a communicator's size); the header's own
 * ranges are checked by decodeRequest.
 */
void checkField(const char* key, int64_t v, int64_t min, int64_t max);

std::string toHex(const void* data, size_t n);

}  // namespace cmesh
