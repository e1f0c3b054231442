#include "cmesh_sidecar/request.hpp"

namespace cmesh {

namespace {
std::string range(int64_t min, int64_t max) { return "[" + std::to_string(min) + ", " + std::to_string(max) + "]"; }
}  // namespace

int64_t requireInt(const Json& req, const char* key, int64_t min, int64_t max) {
  const Json* v = req.find(key);
  if (!v) throw SidecarError(codes::kInvalidArgument, std::string("missing field '") + key + "'");
  if (!v->isInteger())
    throw SidecarError(codes::kInvalidArgument, std::string("field '") + key + "' must be an integer, got " + v->dump());
  int64_t x = v->asInt();
  if (x < min || x > max)
    throw SidecarError(codes::kInvalidArgument,
                       std::string("field '") + key + "' = " + std::to_string(x) + " is outside " + range(min, max));
  return x;
}

int64_t optionalInt(const Json& req, const char* key, int64_t fallback, int64_t min, int64_t max) {
  const Json* v = req.find(key);
  if (!v || v->isNull()) return fallback;
  return requireInt(req, key, min, max);
}

std::string requireString(const Json& req, const char* key) {
  const Json* v = req.find(key);
  if (!v) throw SidecarError(codes::kInvalidArgument, std::string("missing field '") + key + "'");
  if (!v->isString())
    throw SidecarError(codes::kInvalidArgument, std::string("field '") + key + "' must be a string, got " + v->dump());
  return v->asString();
}

std::string optionalString(const Json& req, const char* key, const std::string& fallback) {
  const Json* v = req.find(key);
  if (!v || v->isNull()) return fallback;
  return requireString(req, key);
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

bool fromHex(const std::string& hex, void* out, size_t n) {
  if (hex.size() != n * 2) return false;
  auto* p = static_cast<uint8_t*>(out);
  for (size_t i = 0; i < n; i++) {
    int v = 0;
    for (int k = 0; k < 2; k++) {
      char c = hex[2 * i + k];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= c - '0';
      else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
      else return false;
    }
    p[i] = static_cast<uint8_t>(v);
  }
  return true;
}

}  // namespace cmesh
