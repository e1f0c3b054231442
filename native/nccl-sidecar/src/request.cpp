#include "cmesh_sidecar/request.hpp"

namespace cmesh {

namespace {
std::string range(int64_t min, int64_t max) { return "[" + std::to_string(min) + ", " + std::to_string(max) + "]"; }
}  // namespace

void checkField(const char* key, int64_t v, int64_t min, int64_t max) {
  if (v < min || v > max)
    throw SidecarError(codes::kInvalidArgument,
                       std::string("field '") + key + "' = " + std::to_string(v) + " is outside " + range(min, max));
}

std::string toHex(const void* data, size_t n) {
  static const char* digits = "0123456789abcdef";
  const auto* p = static_cast<const uint8_t*>(data);
  std::string out(n * 2, '0');
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = digits[p[i] >> 4];
    out[2 * i + 1] = digits[p[i] & 15];
  }
  return out;
}

}  // namespace cmesh
