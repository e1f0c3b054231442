#include "cmesh_sidecar/json.hpp"

#include <cmath>
#include <cstdio>

namespace cmesh {

Json& Json::set(const std::string& key, Json value) {
  if (type_ == Type::Null) type_ = Type::Object;
  for (auto& kv : obj_)
    if (kv.first == key) { kv.second = std::move(value); return *this; }
  obj_.emplace_back(key, std::move(value));
  return *this;
}

Json& Json::push(Json value) {
  if (type_ == Type::Null) type_ = Type::Array;
  arr_.push_back(std::move(value));
  return *this;
}

static void dumpString(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

void Json::dumpTo(std::string& out) const {
  switch (type_) {
    case Type::Null: out += "null"; break;
    case Type::Bool: out += bool_ ? "true" : "false"; break;
    case Type::Number:
      if (isInt_) out += std::to_string(int_);
      else if (!std::isfinite(num_)) out += "null";  // JSON has no NaN/Inf
      else {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.17g", num_);
        out += buf;
      }
      break;
    case Type::String: dumpString(out, str_); break;
    case Type::Array: {
      out += '[';
      for (size_t i = 0; i < arr_.size(); i++) {
        if (i) out += ',';
        arr_[i].dumpTo(out);
      }
      out += ']';
      break;
    }
    case Type::Object: {
      out += '{';
      for (size_t i = 0; i < obj_.size(); i++) {
        if (i) out += ',';
        dumpString(out, obj_[i].first);
        out += ':';
        obj_[i].second.dumpTo(out);
      }
      out += '}';
      break;
    }
  }
}

std::string Json::dump() const {
  std::string out;
  dumpTo(out);
  return out;
}

}  // namespace cmesh
