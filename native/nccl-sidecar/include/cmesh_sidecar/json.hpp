// A small JSON value and writer for what the sidecar reports: reply results, hello, --probe.
// The sidecar never parses JSON (requests are binary, protocol.hpp). Integers keep full 64-bit
// precision (byte counts, handles); other numbers are doubles.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace cmesh {

class Json {
 public:
  enum class Type { Null, Bool, Number, String, Array, Object };

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

  Type type() const { return type_; }
  bool isNull() const { return type_ == Type::Null; }
  bool isBool() const { return type_ == Type::Bool; }
  bool isNumber() const { return type_ == Type::Number; }
  bool isString() const { return type_ == Type::String; }
  bool isArray() const { return type_ == Type::Array; }
  bool isObject() const { return type_ == Type::Object; }
  /** True for a number with no fraction that fits in int64. */
  bool isInteger() const;

  bool asBool() const { return bool_; }
  double asDouble() const { return num_; }
  int64_t asInt() const { return isInt_ ? int_ : static_cast<int64_t>(num_); }
  const std::string& asString() const { return str_; }
  const std::vector<Json>& items() const { return arr_; }
  const std::vector<std::pair<std::string, Json>>& members() const { return obj_; }

  /** Object member lookup; nullptr when absent (or when this is not an object). */
  const Json* find(const std::string& key) const;
  /** Sets (or replaces) an object member; returns *this for chaining. */
  Json& set(const std::string& key, Json value);
  Json& push(Json value);

  std::string dump() const;

 private:
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
