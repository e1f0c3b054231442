// A small JSON value, built and written only, for what the sidecar reports: reply results, hello,
// --probe. The sidecar never reads JSON (requests are binary, protocol.hpp), so there are no
// accessors. Integers keep full 64-bit precision (byte counts, handles); other numbers are doubles.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace cmesh {

class Json {
 public:
  Json() = default;
  Json(std::nullptr_t) {}
  Json(bool b) : type_(Type::Bool), bool_(b) {}
  Json(int v) : Json(static_cast<int64_t>(v)) {}
  Json(unsigned v) : Json(static_cast<int64_t>(v)) {}
  Json(int64_t v) : type_(Type::Number), isInt_(true), int_(v), num_(static_cast<double>(v)) {}
  Json(uint64_t v) : Json(static_cast<int64_t>(v)) {}
  Json(long long v) : Json(static_cast<int64_t>(v)) {}
  Json(unsigned long long v) : Json(static_cast<int64_t>(v)) {}
  Json(double v) : type_(Type::Number), num_(v) {}
  Json(const char* s) : type_(Type::String), str_(s) {}
  Json(std::string s) : type_(Type::String), str_(std::move(s)) {}

  static Json array() { Json j; j.type_ = Type::Array; return j; }
  static Json object() { Json j; j.type_ = Type::Object; return j; }

  /** Sets (or replaces) an object member; returns *this for chaining. */
  Json& set(const std::string& key, Json value);
  Json& push(Json value);

  std::string dump() const;

 private:
  enum class Type { Null, Bool, Number, String, Array, Object };

  void dumpTo(std::string& out) const;

  Type type_ = Type::Null;
  bool bool_ = false;
  bool isInt_ = false;
  int64_t int_ = 0;
  double num_ = 0;
  std::string str_;
  std::vector<Json> arr_;
  std::vector<std::pair<std::string, Json>> obj_;
};

}  // namespace cmesh
