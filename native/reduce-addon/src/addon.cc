// Node-API entry points over the kernels in kernels.h. Works on the typed arrays' own memory
// (napi_get_buffer_info gives the pointer): no copies, no allocation per call.
//
//   reduceInto(dst, src, dtypeCode, opCode)  dst = dst op src, elementwise
//   divide(t, dtypeCode, divisor)            t = t / divisor (ReduceOp.AVG's last step)
//   isa                                      "avx2+f16c" or "generic": the kernel set picked at load
//   isas                                     the kernel sets this CPU can run
//   selectIsa(name)                          switch kernel sets (tests run every set); returns name
//
// The TS wrapper (libs/collectives/src/reduce/native.ts) validates dtype/op/length with the
// library's typed errors first; the checks here only keep bad calls from touching memory.
#include <napi.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "dtypes.h"

namespace cmesh {
namespace {

const KernelSet* g_kernels = &kGenericKernels;

const KernelSet* pick_kernels() {
#ifdef CMESH_HAVE_AVX2_TU
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c")) return &kAvx2Kernels;
#endif
  return &kGenericKernels;
}

constexpr size_t kElementSize[NUM_DTYPES] = {4, 8, 1, 1, 4, 8, 2, 2};

napi_value throw_type_error(napi_env env, const char* msg) {
  napi_throw_type_error(env, "ERR_CMESH_NATIVE_REDUCE", msg);
  return nullptr;
}

struct View {
  void* data;
  size_t bytes;
};

// Any ArrayBufferView, as raw bytes. napi_get_buffer_info costs about half of
// napi_get_typedarray_info (no typed-array kind probing), which matters for small calls. The
// element type is the caller's promise (native.ts checks it); here only memory safety is checked:
// whole, aligned elements.
bool get_view(napi_env env, napi_value v, int dtype, View* out, const char* what) {
  if (napi_get_buffer_info(env, v, &out->data, &out->bytes) != napi_ok) {
    throw_type_error(env, what);
    return false;
  }
  const size_t size = kElementSize[dtype];
  if (out->bytes % size != 0 || reinterpret_cast<uintptr_t>(out->data) % size != 0) {
    throw_type_error(env, "array is not made of whole, aligned elements of the dtype");
    return false;
  }
  return true;
}

bool get_int(napi_env env, napi_value v, int32_t* out) { return napi_get_value_int32(env, v, out) == napi_ok; }

napi_value ReduceInto(napi_env env, napi_callback_info info) {
  size_t argc = 4;
  napi_value argv[4];
  if (napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr) != napi_ok || argc < 4) {
    return throw_type_error(env, "reduceInto(dst, src, dtypeCode, opCode) needs 4 arguments");
  }
  int32_t dtype, op;
  if (!get_int(env, argv[2], &dtype) || dtype < 0 || dtype >= NUM_DTYPES) return throw_type_error(env, "bad dtype code");
  if (!get_int(env, argv[3], &op) || op < 0 || op >= NUM_OPS) return throw_type_error(env, "bad op code");
  ReduceFn fn = g_kernels->reduce[dtype][op];
  if (fn == nullptr) return throw_type_error(env, "op is not defined for this dtype");
  View d, s;
  if (!get_view(env, argv[0], dtype, &d, "dst must be a typed array")) return nullptr;
  if (!get_view(env, argv[1], dtype, &s, "src must be a typed array")) return nullptr;
  if (d.bytes != s.bytes) return throw_type_error(env, "dst and src lengths differ");
  if (d.bytes != 0) fn(d.data, s.data, d.bytes / kElementSize[dtype]);
  return nullptr;
}

napi_value Divide(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  if (napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr) != napi_ok || argc < 3) {
    return throw_type_error(env, "divide(t, dtypeCode, divisor) needs 3 arguments");
  }
  int32_t dtype;
  if (!get_int(env, argv[1], &dtype) || dtype < 0 || dtype >= NUM_DTYPES) return throw_type_error(env, "bad dtype code");
  double divisor;
  if (napi_get_value_double(env, argv[2], &divisor) != napi_ok) return throw_type_error(env, "divisor must be a number");
  DivFn fn = g_kernels->div[dtype];
  if (fn == nullptr) return throw_type_error(env, "divide needs a floating dtype");
  View t;
  if (!get_view(env, argv[0], dtype, &t, "t must be a typed array")) return nullptr;
  if (t.bytes != 0) fn(t.data, t.bytes / kElementSize[dtype], divisor);
  return nullptr;
}

std::vector<const KernelSet*> runnable_sets() {
  std::vector<const KernelSet*> sets;
  const KernelSet* best = pick_kernels();
  if (best != &kGenericKernels) sets.push_back(best);
  sets.push_back(&kGenericKernels);
  return sets;
}

napi_value SelectIsa(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  char name[32] = {0};
  size_t len = 0;
  if (napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr) != napi_ok || argc < 1 ||
      napi_get_value_string_utf8(env, argv[0], name, sizeof name, &len) != napi_ok) {
    return throw_type_error(env, "selectIsa(name) needs a string");
  }
  for (const KernelSet* set : runnable_sets()) {
    if (std::strcmp(set->name, name) == 0) {
      g_kernels = set;
      napi_value out;
      napi_create_string_utf8(env, set->name, NAPI_AUTO_LENGTH, &out);
      return out;
    }
  }
  return throw_type_error(env, "this CPU cannot run the requested kernel set");
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  g_kernels = pick_kernels();
  exports.Set("isa", Napi::String::New(env, g_kernels->name));
  Napi::Array isas = Napi::Array::New(env);
  for (const KernelSet* set : runnable_sets()) isas.Set(isas.Length(), Napi::String::New(env, set->name));
  exports.Set("isas", isas);
  // Plain napi callbacks (no Napi::CallbackInfo wrapper) keep the per-call cost minimal.
  napi_value fn;
  napi_create_function(env, "reduceInto", NAPI_AUTO_LENGTH, ReduceInto, nullptr, &fn);
  exports.Set("reduceInto", Napi::Value(env, fn));
  napi_create_function(env, "divide", NAPI_AUTO_LENGTH, Divide, nullptr, &fn);
  exports.Set("divide", Napi::Value(env, fn));
  napi_create_function(env, "selectIsa", NAPI_AUTO_LENGTH, SelectIsa, nullptr, &fn);
  exports.Set("selectIsa", Napi::Value(env, fn));
  return exports;
}

}  // namespace
}  // namespace cmesh

static Napi::Object InitModule(Napi::Env env, Napi::Object exports) { return cmesh::Init(env, exports); }

NODE_API_MODULE(cmesh_reduce, InitModule)
