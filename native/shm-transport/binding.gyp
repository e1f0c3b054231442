# Shared-memory segments and doorbells for the same-host data plane of @cmesh/collectives
# (see README.md). Linux only: memfd_create, /proc/<pid>/fd and pipes.
{
  "targets": [
    {
      "target_name": "cmesh_shm",
      "sources": ["src/addon.cc"],
      "cflags_cc!": ["-fno-exceptions"],
      "cflags_cc": ["-std=gnu++17", "-fno-exceptions", "-O2"],
      "defines": ["NAPI_DISABLE_CPP_EXCEPTIONS", "NAPI_VERSION=8"],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
    },
  ],
}
