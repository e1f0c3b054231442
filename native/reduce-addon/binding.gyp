# Native reduction kernels for @cmesh/collectives (see README.md). Two static libraries compile the
# same kernel templates twice: once for baseline x86-64 and once with AVX2+F16C; the addon picks
# one at load time from the CPU's feature bits. No -ffast-math: results must equal the TS kernels.
{
  "target_defaults": {
    "cflags_cc!": ["-fno-exceptions"],
    "cflags_cc": ["-std=gnu++17", "-fno-exceptions", "-O3", "-ffp-contract=off", "-fno-math-errno"],
    "defines": ["NAPI_DISABLE_CPP_EXCEPTIONS", "NAPI_VERSION=8"],
    "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
  },
  "targets": [
    {
      "target_name": "kernels_generic",
      "type": "static_library",
      "sources": ["src/kernels_generic.cc"],
    },
    {
      "target_name": "kernels_avx2",
      "type": "static_library",
      "conditions": [
        ["target_arch=='x64'", {
          "sources": ["src/kernels_avx2.cc"],
          "cflags_cc": ["-mavx2", "-mf16c"],
        }],
      ],
    },
    {
      "target_name": "cmesh_reduce",
      "sources": ["src/addon.cc"],
      "dependencies": ["kernels_generic", "kernels_avx2"],
      "conditions": [
        ["target_arch=='x64'", {"defines": ["CMESH_HAVE_AVX2_TU"]}],
      ],
    },
  ],
}
