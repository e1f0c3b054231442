#include <cstring>

#include "harness.hpp"

namespace harness {
std::vector<Case>& registry() {
  static std::vector<Case> cases;
  return cases;
}
int failures = 0;
}  // namespace harness

int main(int argc, char** argv) {
  const char* only = argc > 1 ? argv[1] : nullptr;
  int ran = 0;
  for (const auto& c : harness::registry()) {
    if (only && std::strcmp(only, c.suite) != 0) continue;
    int before = harness::failures;
    std::fprintf(stderr, "[ RUN  ] %s.%s\n", c.suite, c.name);
    c.fn();
    std::fprintf(stderr, "[ %s ] %s.%s\n", harness::failures == before ? " OK " : "FAIL", c.suite, c.name);
    ran++;
  }
  if (ran == 0) {
    std::fprintf(stderr, "no tests in suite '%s'\n", only ? only : "");
    return 1;
  }
  std::fprintf(stderr, "%d test(s), %d failed check(s)\n", ran, harness::failures);
  return harness::failures == 0 ? 0 : 1;
}
