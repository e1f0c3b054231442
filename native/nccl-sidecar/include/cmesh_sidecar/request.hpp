// What every handler shares: typed errors (the `code` goes on the wire), deadlines, responses,
// and argument readers that reject bad fields with a message naming the field.
#pragma once

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "cmesh_sidecar/json.hpp"

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

struct Response {
  Json header = Json::object();
  std::vector<uint8_t> payload;
};

// Argument readers: throw SidecarError(INVALID_ARGUMENT) naming the field and the allowed range.
int64_t requireInt(const Json& req, const char* key, int64_t min, int64_t max);
int64_t optionalInt(const Json& req, const char* key, int64_t fallback, int64_t min, int64_t max);
std::string requireString(const Json& req, const char* key);
std::string optionalString(const Json& req, const char* key, const std::string& fallback);

std::string toHex(const void* data, size_t n);
/** Decodes exactly `n` bytes of hex; false on bad length or digit. */
bool fromHex(const std::string& hex, void* out, size_t n);

}  // namespace cmesh
