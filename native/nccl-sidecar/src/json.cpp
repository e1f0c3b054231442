#include "cmesh_sidecar/json.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace cmesh {

namespace {
constexpr int kMaxDepth = 64;  // headers are flat; deep nesting is an attack or a bug
}

class JsonParser {
 public:
  explicit JsonParser(const std::string& s) : s_(s) {}

  Json parseDocument() {
    skipWs();
    Json v = parseValue(0);
    skipWs();
    if (pos_ != s_.size()) fail("trailing characters after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw JsonError("invalid JSON at byte " + std::to_string(pos_) + ": " + what);
  }
  void skipWs() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) pos_++;
  }
  bool consume(const char* lit) {
    size_t n = std::char_traits<char>::length(lit);
    if (s_.compare(pos_, n, lit) == 0) { pos_ += n; return true; }
    return false;
  }

  Json parseValue(int depth) {
    if (depth > kMaxDepth) fail("nesting deeper than 64");
    if (pos_ >= s_.size()) fail("unexpected end of input");
    char c = s_[pos_];
    if (c == '{') return parseObject(depth);
    if (c == '[') return parseArray(depth);
    if (c == '"') return Json(parseString());
    if (consume("true")) return Json(true);
    if (consume("false")) return Json(false);
    if (consume("null")) return Json();
    if (c == '-' || (c >= '0' && c <= '9')) return parseNumber();
    fail(std::string("unexpected character '") + c + "'");
  }

  Json parseObject(int depth) {
    Json obj = Json::object();
    pos_++;  // {
    skipWs();
    if (pos_ < s_.size() && s_[pos_] == '}') { pos_++; return obj; }
    for (;;) {
      skipWs();
      if (pos_ >= s_.size() || s_[pos_] != '"') fail("expected a string key");
      std::string key = parseString();
      skipWs();
      if (pos_ >= s_.size() || s_[pos_] != ':') fail("expected ':'");
      pos_++;
      skipWs();
      obj.set(key, parseValue(depth + 1));
      skipWs();
      if (pos_ < s_.size() && s_[pos_] == ',') { pos_++; continue; }
      if (pos_ < s_.size() && s_[pos_] == '}') { pos_++; return obj; }
      fail("expected ',' or '}'");
    }
  }

  Json parseArray(int depth) {
    Json arr = Json::array();
    pos_++;  // [
    skipWs();
    if (pos_ < s_.size() && s_[pos_] == ']') { pos_++; return arr; }
    for (;;) {
      skipWs();
      arr.push(parseValue(depth + 1));
      skipWs();
      if (pos_ < s_.size() && s_[pos_] == ',') { pos_++; continue; }
      if (pos_ < s_.size() && s_[pos_] == ']') { pos_++; return arr; }
      fail("expected ',' or ']'");
    }
  }

  static void appendUtf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) out += static_cast<char>(cp);
    else if (cp < 0x800) { out += static_cast<char>(0xC0 | (cp >> 6)); out += static_cast<char>(0x80 | (cp & 0x3F)); }
    else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  uint32_t parseHex4() {
    if (pos_ + 4 > s_.size()) fail("truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
      char h = s_[pos_++];
      v <<= 4;
      if (h >= '0' && h <= '9') v |= h - '0';
      else if (h >= 'a' && h <= 'f') v |= h - 'a' + 10;
      else if (h >= 'A' && h <= 'F') v |= h - 'A' + 10;
      else fail("bad hex digit in \\u escape");
    }
    return v;
  }

  std::string parseString() {
    pos_++;  // opening quote
    std::string out;
    for (;;) {
      if (pos_ >= s_.size()) fail("unterminated string");
      char c = s_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in string");
      if (c != '\\') { out += c; continue; }
      if (pos_ >= s_.size()) fail("unterminated escape");
      char e = s_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp = parseHex4();
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (!consume("\\u")) fail("unpaired surrogate");
            uint32_t lo = parseHex4();
            if (lo < 0xDC00 || lo > 0xDFFF) fail("bad low surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          appendUtf8(out, cp);
          break;
        }
        default: fail(std::string("bad escape '\\") + e + "'");
      }
    }
  }

  Json parseNumber() {
    size_t start = pos_;
    bool integral = true;
    if (s_[pos_] == '-') pos_++;
    if (pos_ >= s_.size() || !(s_[pos_] >= '0' && s_[pos_] <= '9')) fail("bad number");
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') pos_++;
    if (pos_ < s_.size() && s_[pos_] == '.') {
      integral = false;
      pos_++;
      if (pos_ >= s_.size() || !(s_[pos_] >= '0' && s_[pos_] <= '9')) fail("bad fraction");
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') pos_++;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      integral = false;
      pos_++;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) pos_++;
      if (pos_ >= s_.size() || !(s_[pos_] >= '0' && s_[pos_] <= '9')) fail("bad exponent");
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') pos_++;
    }
    std::string text = s_.substr(start, pos_ - start);
    if (integral) {
      errno = 0;
      char* end = nullptr;
      long long v = std::strtoll(text.c_str(), &end, 10);
      if (errno == 0) return Json(static_cast<int64_t>(v));
    }
    return Json(std::strtod(text.c_str(), nullptr));
  }

  const std::string& s_;
  size_t pos_ = 0;
};

Json Json::parse(const std::string& text) { return JsonParser(text).parseDocument(); }

bool Json::isInteger() const {
  if (type_ != Type::Number) return false;
  if (isInt_) return true;
  return std::isfinite(num_) && std::floor(num_) == num_ && std::fabs(num_) < 9.2e18;
}

const Json* Json::find(const std::string& key) const {
  if (type_ != Type::Object) return nullptr;
  for (const auto& kv : obj_)
    if (kv.first == key) return &kv.second;
  return nullptr;
}

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
