#include "index/chain/detail/holder_copy.h"

#include <algorithm>
#include <cstddef>

#include "index/chain/detail/run.h"
#include "kvgate/core/thread_annotations.h"

#if defined(__x86_64__) && !defined(KVGATE_TSAN)
#define KVGATE_HOLDER_COPY_AVX2 1
#include <immintrin.h>
#endif

namespace kvgate::index::chain::detail {

// The vector kernel stores three dwords per holder straight into the answer.
static_assert(sizeof(HolderMatch) == 12 && offsetof(HolderMatch, device_depth) == 4 &&
              offsetof(HolderMatch, any_depth) == 8 && sizeof(HolderId) == 4);

namespace {

// One holder, into `out` and the counts; the scalar kernel, and the vector kernel's tail.
inline void copy_one(uint64_t word, uint32_t limit, HolderMatch& out, ClampedCopy& c) {
  const HolderEntry e = HolderEntry::unpack(word);
  c.max_any = std::max<uint32_t>(c.max_any, e.any);
  const uint32_t any = std::min<uint32_t>(e.any, limit);
  out = {HolderId(e.holder), std::min<uint32_t>(e.device, limit), any};
  c.zeros += any == 0;
  c.full += any == limit;
}

#ifdef KVGATE_HOLDER_COPY_AVX2

// Four holders a step. A packed entry is the dword pair [any << 16 | device, holder]; the answer
// wants the dword triple [holder, device, any]. Four entries make dwords 0..7 of their answers
// (H0 D0 A0 H1 D1 A1 H2 D2) and dwords 8..11 (A2 H3 D3 A3), gathered from
// hd = [D0 H0 D1 H1 D2 H2 D3 H3] and any = [A0 0 A1 0 A2 0 A3 0].
__attribute__((target("avx2"))) ClampedCopy copy_avx2(const Word* entries, size_t n, uint32_t limit,
                                                      HolderMatch* out) {
  const __m256i lim = _mm256_set1_epi32(static_cast<int>(limit));
  const __m256i device_mask = _mm256_set1_epi64x(0xffff);  // an entry's device, dword 0
  const __m256i low_dword = _mm256_set1_epi64x(0xffffffff);
  const __m256i hd_to_first = _mm256_setr_epi32(1, 0, 0, 3, 2, 0, 5, 4);
  const __m256i any_to_first = _mm256_setr_epi32(0, 0, 0, 0, 0, 2, 0, 0);
  const __m256i hd_to_last = _mm256_setr_epi32(0, 7, 6, 0, 0, 0, 0, 0);
  const __m256i any_to_last = _mm256_setr_epi32(4, 0, 0, 6, 0, 0, 0, 0);
  __m256i max_any = _mm256_setzero_si256();
  __m256i zeros = _mm256_setzero_si256();  // minus the count, per entry slot (dword 0)
  __m256i full = _mm256_setzero_si256();
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(entries + i));
    const __m256i any = _mm256_and_si256(_mm256_srli_epi32(w, 16), low_dword);
    const __m256i any_c = _mm256_min_epu32(any, lim);
    const __m256i dev_c = _mm256_min_epu32(_mm256_and_si256(w, device_mask), lim);
    max_any = _mm256_max_epu32(max_any, any);
    zeros = _mm256_add_epi32(
        zeros, _mm256_and_si256(_mm256_cmpeq_epi32(any_c, _mm256_setzero_si256()), low_dword));
    full = _mm256_add_epi32(full, _mm256_and_si256(_mm256_cmpeq_epi32(any_c, lim), low_dword));
    const __m256i hd = _mm256_blend_epi32(dev_c, w, 0b10101010);
    const __m256i first =
        _mm256_blend_epi32(_mm256_permutevar8x32_epi32(hd, hd_to_first),
                           _mm256_permutevar8x32_epi32(any_c, any_to_first), 0b00100100);
    const __m256i last =
        _mm256_blend_epi32(_mm256_permutevar8x32_epi32(hd, hd_to_last),
                           _mm256_permutevar8x32_epi32(any_c, any_to_last), 0b00001001);
    char* o = reinterpret_cast<char*>(out + i);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o), first);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(o + 32), _mm256_castsi256_si128(last));
  }
  alignas(32) uint32_t m[8], z[8], f[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(m), max_any);
  _mm256_store_si256(reinterpret_cast<__m256i*>(z), zeros);
  _mm256_store_si256(reinterpret_cast<__m256i*>(f), full);
  ClampedCopy c;
  for (int k = 0; k < 8; k += 2) {
    c.max_any = std::max(c.max_any, m[k]);
    c.zeros -= z[k];  // each match added -1
    c.full -= f[k];
  }
  for (; i < n; ++i) copy_one(entries[i].load(std::memory_order_relaxed), limit, out[i], c);
  return c;
}

bool cpu_has_avx2() {
  static const bool yes = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return yes;
}

#endif  // KVGATE_HOLDER_COPY_AVX2

}  // namespace

ClampedCopy copy_clamped_scalar(const Word* entries, size_t n, uint32_t limit, HolderMatch* out) {
  ClampedCopy c;
  for (size_t i = 0; i < n; ++i)
    copy_one(entries[i].load(std::memory_order_relaxed), limit, out[i], c);
  return c;
}

bool copy_clamped_is_vectorized() {
#ifdef KVGATE_HOLDER_COPY_AVX2
  return cpu_has_avx2();
#else
  return false;
#endif
}

ClampedCopy copy_clamped(const Word* entries, size_t n, uint32_t limit, HolderMatch* out) {
#ifdef KVGATE_HOLDER_COPY_AVX2
  if (cpu_has_avx2()) return copy_avx2(entries, n, limit, out);
#endif
  return copy_clamped_scalar(entries, n, limit, out);
}

}  // namespace kvgate::index::chain::detail
