#include "cmesh_sidecar/library_search.hpp"

#include <dlfcn.h>
#include <link.h>
#include <climits>
#include <cstdlib>
#include <glob.h>

#include <algorithm>
#include <cstdlib>

namespace cmesh {

namespace {

std::vector<std::string> expand(const std::string& pattern) {
  std::vector<std::string> out;
  glob_t g{};
  if (::glob(pattern.c_str(), 0, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; i++) out.emplace_back(g.gl_pathv[i]);
  }
  ::globfree(&g);
  // Newest version first: "libcudart.so.13" before "libcudart.so.12".
  std::sort(out.rbegin(), out.rend());
  return out;
}

// Python site directories where pip puts nvidia-* wheels (system, user, virtualenv, conda).
std::vector<std::string> pythonSiteRoots() {
  std::vector<std::string> roots = {"/usr/local/lib/python3*/dist-packages", "/usr/local/lib/python3*/site-packages",
                                    "/usr/lib/python3/dist-packages", "/usr/lib/python3*/site-packages",
                                    "/opt/conda/lib/python3*/site-packages"};
  if (const char* home = std::getenv("HOME")) roots.push_back(std::string(home) + "/.local/lib/python3*/site-packages");
  if (const char* venv = std::getenv("VIRTUAL_ENV")) roots.push_back(std::string(venv) + "/lib/python3*/site-packages");
  if (const char* conda = std::getenv("CONDA_PREFIX")) roots.push_back(std::string(conda) + "/lib/python3*/site-packages");
  return roots;
}

}  // namespace

std::vector<std::string> libraryCandidates(const std::string& explicitPath, const std::vector<std::string>& sonames,
                                           const std::vector<std::string>& wheelSubdirs,
                                           const std::vector<std::string>& extraGlobs) {
  if (!explicitPath.empty()) return {explicitPath};
  std::vector<std::string> out = sonames;
  for (const auto& pattern : extraGlobs)
    for (auto& p : expand(pattern)) out.push_back(p);
  for (const auto& root : pythonSiteRoots())
    for (const auto& sub : wheelSubdirs)
      for (auto& p : expand(root + "/" + sub)) out.push_back(p);
  std::vector<std::string> unique;
  for (auto& p : out)
    if (std::find(unique.begin(), unique.end(), p) == unique.end()) unique.push_back(p);
  return unique;
}

void* openLibrary(const std::string& path, std::string& error) {
  ::dlerror();
  void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = ::dlerror();
    error = e ? e : "dlopen failed";
  }
  return h;
}

std::string loadedPath(void* handle) {
  link_map* lm = nullptr;
  if (::dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0 || !lm || !lm->l_name) return "";
  char real[PATH_MAX];
  return ::realpath(lm->l_name, real) ? std::string(real) : std::string(lm->l_name);
}

void* findSymbol(void* handle, const char* name) { return ::dlsym(handle, name); }

}  // namespace cmesh
