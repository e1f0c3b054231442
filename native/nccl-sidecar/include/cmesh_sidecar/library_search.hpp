// Where shared libraries are looked for: an explicit path wins; otherwise sonames (the dynamic
// loader's own search) and then glob patterns for CUDA toolkits and Python wheels.
#pragma once

#include <string>
#include <vector>

namespace cmesh {

/** Ordered, de-duplicated candidates. With an explicit path only that path is tried. */
std::vector<std::string> libraryCandidates(const std::string& explicitPath, const std::vector<std::string>& sonames,
                                           const std::vector<std::string>& wheelSubdirs,
                                           const std::vector<std::string>& extraGlobs);

/** dlopen(RTLD_NOW|RTLD_LOCAL); on failure `error` holds dlerror(). */
void* openLibrary(const std::string& path, std::string& error);

/** The real path of the file a handle came from ("" when unknown): sonames and links collapse. */
std::string loadedPath(void* handle);

/** dlsym; nullptr when absent. */
void* findSymbol(void* handle, const char* name);

}  // namespace cmesh
