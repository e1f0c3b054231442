// Elementwise reduction kernels, dst[i] = dst[i] op src[i], with exactly the semantics of
// libs/collectives/src/reduce/kernels.ts (the TypeScript fallback):
//  - integers wrap like fixed-width ints (done in unsigned arithmetic: no signed-overflow UB);
//  - float MIN/MAX: take src when src < dst or src is NaN, so NaN propagates from either side
//    and ties (-0 vs +0) keep dst, as the TS loop does;
//  - float16/bfloat16: decode to float32, operate in float32, round to nearest even.
// Each translation unit that includes this file compiles its own copy (anonymous namespace) for
// its target flags; the loops are written branch-free so g++ -O3 vectorises them. No restrict:
// dst and src may be the same array, and g++ adds the run-time overlap check itself.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "dtypes.h"

#if defined(__F16C__) && defined(__AVX2__)
#include <immintrin.h>
#define CMESH_F16C 1
#endif

namespace cmesh {
namespace {

inline uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// binary16 -> float32, exact. Normals and subnormals by one exact multiply (the 5-bit exponent
// lands in the float's exponent field, 2^112 rebiases it); Inf/NaN keep their payload.
inline float f16_decode(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t em = h & 0x7fffu;
  uint32_t finite = bits_of(float_of(em << 13) * 0x1p112f);
  uint32_t special = 0x7f800000u | (em << 13);
  return float_of((em >= 0x7c00u ? special : finite) | sign);
}

// float32 -> binary16, round to nearest even (same bits as f32BitsToF16Bits in tensor/half.ts):
// overflow -> Inf, NaN -> quiet NaN keeping the top payload bits, subnormals rounded by adding
// 0.5f (whose ulp is 2^-24, the binary16 subnormal step).
inline uint16_t f16_encode(float f) {
  uint32_t x = bits_of(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t a = x & 0x7fffffffu;
  uint32_t sub = bits_of(float_of(a) + 0.5f) - 0x3f000000u;
  uint32_t nrm = (a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13;  // rebias by (15-127)<<23, round
  uint32_t big = a > 0x7f800000u ? (0x7e00u | ((a & 0x7fffffu) >> 13)) : 0x7c00u;
  uint32_t o = a < 0x38800000u ? sub : nrm;
  o = a >= 0x47800000u ? big : o;
  return static_cast<uint16_t>(o | sign);
}

inline float bf16_decode(uint16_t h) { return float_of(static_cast<uint32_t>(h) << 16); }

inline uint16_t bf16_encode(float f) {
  uint32_t x = bits_of(f);
  uint32_t nan = (x >> 16) | 0x40u;
  uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  return static_cast<uint16_t>((x & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

template <int OP>
struct FloatOp;
template <>
struct FloatOp<SUM> {
  template <class F>
  static F apply(F a, F b) { return a + b; }
};
template <>
struct FloatOp<PRODUCT> {
  template <class F>
  static F apply(F a, F b) { return a * b; }
};
template <>
struct FloatOp<MIN> {
  template <class F>
  static F apply(F a, F b) { return ((b < a) | (b != b)) ? b : a; }
};
template <>
struct FloatOp<MAX> {
  template <class F>
  static F apply(F a, F b) { return ((b > a) | (b != b)) ? b : a; }
};

template <int OP>
struct IntOp;
template <>
struct IntOp<SUM> {
  template <class T>
  static T apply(T a, T b) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  }
};
template <>
struct IntOp<PRODUCT> {
  template <class T>
  static T apply(T a, T b) {
    // widen to at least unsigned int so the multiply cannot overflow a signed int
    using U = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  }
};
template <>
struct IntOp<MIN> {
  template <class T>
  static T apply(T a, T b) { return b < a ? b : a; }
};
template <>
struct IntOp<MAX> {
  template <class T>
  static T apply(T a, T b) { return b > a ? b : a; }
};
template <>
struct IntOp<BAND> {
  template <class T>
  static T apply(T a, T b) { return static_cast<T>(a & b); }
};
template <>
struct IntOp<BOR> {
  template <class T>
  static T apply(T a, T b) { return static_cast<T>(a | b); }
};
template <>
struct IntOp<BXOR> {
  template <class T>
  static T apply(T a, T b) { return static_cast<T>(a ^ b); }
};

template <class T, class O>
void reduce_plain(void* dv, const void* sv, size_t n) {
  T* d = static_cast<T*>(dv);
  const T* s = static_cast<const T*>(sv);
  for (size_t i = 0; i < n; i++) d[i] = O::apply(d[i], s[i]);
}

#ifdef CMESH_F16C
template <int OP>
inline __m256 vec_op(__m256 a, __m256 b);
template <>
inline __m256 vec_op<SUM>(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
template <>
inline __m256 vec_op<PRODUCT>(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
template <>
inline __m256 vec_op<MIN>(__m256 a, __m256 b) {
  __m256 take = _mm256_or_ps(_mm256_cmp_ps(b, a, _CMP_LT_OQ), _mm256_cmp_ps(b, b, _CMP_UNORD_Q));
  return _mm256_blendv_ps(a, b, take);
}
template <>
inline __m256 vec_op<MAX>(__m256 a, __m256 b) {
  __m256 take = _mm256_or_ps(_mm256_cmp_ps(b, a, _CMP_GT_OQ), _mm256_cmp_ps(b, b, _CMP_UNORD_Q));
  return _mm256_blendv_ps(a, b, take);
}
constexpr int kRne = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
#endif

#ifdef CMESH_F16C
// bfloat16 <-> float32 by hand in AVX2 (g++'s own vectorisation of the scalar code is ~2x slower
// here: it widens and narrows through lane-crossing shuffles); same bits as bf16_encode.
inline __m256 bf16x8_decode(const uint16_t* p) {
  __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

inline void bf16x8_encode(__m256 f, uint16_t* p) {
  __m256i x = _mm256_castps_si256(f);
  __m256i hi = _mm256_srli_epi32(x, 16);
  __m256i rounded = _mm256_srli_epi32(
      _mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), _mm256_and_si256(hi, _mm256_set1_epi32(1))), 16);
  __m256i nan = _mm256_or_si256(hi, _mm256_set1_epi32(0x40));
  __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
  __m256i r = _mm256_blendv_epi8(rounded, nan, is_nan);
  __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), packed);
}
#endif

template <int OP>
void reduce_bf16(void* dv, const void* sv, size_t n) {
  uint16_t* d = static_cast<uint16_t*>(dv);
  const uint16_t* s = static_cast<const uint16_t*>(sv);
  size_t i = 0;
#ifdef CMESH_F16C
  for (; i + 8 <= n; i += 8) bf16x8_encode(vec_op<OP>(bf16x8_decode(d + i), bf16x8_decode(s + i)), d + i);
#endif
  for (; i < n; i++) d[i] = bf16_encode(FloatOp<OP>::apply(bf16_decode(d[i]), bf16_decode(s[i])));
}

template <int OP>
void reduce_f16(void* dv, const void* sv, size_t n) {
  uint16_t* d = static_cast<uint16_t*>(dv);
  const uint16_t* s = static_cast<const uint16_t*>(sv);
  size_t i = 0;
#ifdef CMESH_F16C
  // vcvtph2ps/vcvtps2ph round the same way as f16_decode/f16_encode (exact; nearest even).
  for (; i + 8 <= n; i += 8) {
    __m256 a = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(d + i)));
    __m256 b = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), _mm256_cvtps_ph(vec_op<OP>(a, b), kRne));
  }
#endif
  for (; i < n; i++) d[i] = f16_encode(FloatOp<OP>::apply(f16_decode(d[i]), f16_decode(s[i])));
}

// Division for ReduceOp.AVG. TS divides in double and rounds to float32; float32 division gives
// the same bits when the divisor is exact in float32 (double rounding is innocuous for /), and
// is faster, so use it then.
inline bool exact_in_float(double w) { return static_cast<double>(static_cast<float>(w)) == w; }

void div_f32(void* tv, size_t n, double w) {
  float* t = static_cast<float*>(tv);
  if (exact_in_float(w)) {
    const float wf = static_cast<float>(w);
    for (size_t i = 0; i < n; i++) t[i] = t[i] / wf;
  } else {
    for (size_t i = 0; i < n; i++) t[i] = static_cast<float>(static_cast<double>(t[i]) / w);
  }
}

void div_f64(void* tv, size_t n, double w) {
  double* t = static_cast<double*>(tv);
  for (size_t i = 0; i < n; i++) t[i] = t[i] / w;
}

template <float (*Decode)(uint16_t), uint16_t (*Encode)(float)>
void div_half_portable(uint16_t* t, size_t n, double w) {
  if (exact_in_float(w)) {
    const float wf = static_cast<float>(w);
    for (size_t i = 0; i < n; i++) t[i] = Encode(Decode(t[i]) / wf);
  } else {
    for (size_t i = 0; i < n; i++) t[i] = Encode(static_cast<float>(static_cast<double>(Decode(t[i])) / w));
  }
}

void div_f16(void* tv, size_t n, double w) {
  uint16_t* t = static_cast<uint16_t*>(tv);
  size_t i = 0;
#ifdef CMESH_F16C
  if (exact_in_float(w)) {
    const __m256 wv = _mm256_set1_ps(static_cast<float>(w));
    for (; i + 8 <= n; i += 8) {
      __m256 a = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(t + i)));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(t + i), _mm256_cvtps_ph(_mm256_div_ps(a, wv), kRne));
    }
  }
#endif
  div_half_portable<f16_decode, f16_encode>(t + i, n - i, w);
}

void div_bf16(void* tv, size_t n, double w) {
  uint16_t* t = static_cast<uint16_t*>(tv);
  size_t i = 0;
#ifdef CMESH_F16C
  if (exact_in_float(w)) {
    const __m256 wv = _mm256_set1_ps(static_cast<float>(w));
    for (; i + 8 <= n; i += 8) bf16x8_encode(_mm256_div_ps(bf16x8_decode(t + i), wv), t + i);
  }
#endif
  div_half_portable<bf16_decode, bf16_encode>(t + i, n - i, w);
}

template <class T>
void fill_float_ops(ReduceFn* row) {
  row[SUM] = reduce_plain<T, FloatOp<SUM>>;
  row[PRODUCT] = reduce_plain<T, FloatOp<PRODUCT>>;
  row[MIN] = reduce_plain<T, FloatOp<MIN>>;
  row[MAX] = reduce_plain<T, FloatOp<MAX>>;
}

template <class T>
void fill_int_ops(ReduceFn* row) {
  row[SUM] = reduce_plain<T, IntOp<SUM>>;
  row[PRODUCT] = reduce_plain<T, IntOp<PRODUCT>>;
  row[MIN] = reduce_plain<T, IntOp<MIN>>;
  row[MAX] = reduce_plain<T, IntOp<MAX>>;
  row[BAND] = reduce_plain<T, IntOp<BAND>>;
  row[BOR] = reduce_plain<T, IntOp<BOR>>;
  row[BXOR] = reduce_plain<T, IntOp<BXOR>>;
}

KernelSet make_kernel_set(const char* name) {
  KernelSet k{};
  k.name = name;
  fill_float_ops<float>(k.reduce[F32]);
  fill_float_ops<double>(k.reduce[F64]);
  fill_int_ops<int8_t>(k.reduce[I8]);
  fill_int_ops<uint8_t>(k.reduce[U8]);
  fill_int_ops<int32_t>(k.reduce[I32]);
  fill_int_ops<int64_t>(k.reduce[I64]);
  k.reduce[F16][SUM] = reduce_f16<SUM>;
  k.reduce[F16][PRODUCT] = reduce_f16<PRODUCT>;
  k.reduce[F16][MIN] = reduce_f16<MIN>;
  k.reduce[F16][MAX] = reduce_f16<MAX>;
  k.reduce[BF16][SUM] = reduce_bf16<SUM>;
  k.reduce[BF16][PRODUCT] = reduce_bf16<PRODUCT>;
  k.reduce[BF16][MIN] = reduce_bf16<MIN>;
  k.reduce[BF16][MAX] = reduce_bf16<MAX>;
  k.div[F32] = div_f32;
  k.div[F64] = div_f64;
  k.div[F16] = div_f16;
  k.div[BF16] = div_bf16;
  return k;
}

}  // namespace
}  // namespace cmesh
