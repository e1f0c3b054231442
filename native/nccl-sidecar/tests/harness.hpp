// A tiny test harness: TEST(suite, name) registers a case; CHECK* record failures and go on.
// cmesh-sidecar-tests SUITE runs one suite (ctest runs each as its own test).
#pragma once

#include <cstdio>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace harness {

struct Case {
  const char* suite;
  const char* name;
  std::function<void()> fn;
};
std::vector<Case>& registry();
extern int failures;

struct Register {
  Register(const char* suite, const char* name, std::function<void()> fn) {
    registry().push_back({suite, name, std::move(fn)});
  }
};

inline void fail(const char* file, int line, const std::string& what) {
  failures++;
  std::fprintf(stderr, "  FAILED %s:%d: %s\n", file, line, what.c_str());
}

template <typename A, typename B>
void checkEq(const A& a, const B& b, const char* as, const char* bs, const char* file, int line) {
  if (!(a == b)) {
    std::ostringstream o;
    o << as << " == " << bs << " (got " << a << " vs " << b << ")";
    fail(file, line, o.str());
  }
}

}  // namespace harness

#define HARNESS_CAT2(a, b) a##b
#define HARNESS_CAT(a, b) HARNESS_CAT2(a, b)
#define TEST(suite, name)                                                                            \
  static void suite##_##name();                                                                      \
  static harness::Register HARNESS_CAT(reg_, __LINE__)(#suite, #name, suite##_##name);               \
  static void suite##_##name()
#define CHECK(cond) \
  do { if (!(cond)) harness::fail(__FILE__, __LINE__, #cond); } while (0)
#define CHECK_EQ(a, b) harness::checkEq((a), (b), #a, #b, __FILE__, __LINE__)
#define CHECK_CONTAINS(haystack, needle)                                                                  \
  do {                                                                                                    \
    std::string h_ = (haystack);                                                                          \
    if (h_.find(needle) == std::string::npos)                                                             \
      harness::fail(__FILE__, __LINE__, std::string(#haystack) + " contains \"" + (needle) + "\" (got \"" + h_ + "\")"); \
  } while (0)
