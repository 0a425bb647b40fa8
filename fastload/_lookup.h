/* Packed RGB uint8 levels -> three float32 planes by each channel's table (table[c][x]: torchvision's value of
 * level x, computed by torch's ops, so the lookup is exact), one row at a time: the last step of a float
 * sample, shared by fastload._normalize (the Pillow route) and fastload._jpeg (the native sample).
 * lookup_row_best picks the AVX2 gathers where the CPU has them. No Python here. */
#ifndef FASTLOAD_LOOKUP_H
#define FASTLOAD_LOOKUP_H

#include <stddef.h>
#include <stdint.h>

typedef void (*lookup_fn)(const uint8_t *, float *, float *, float *, ptrdiff_t, const float *);

static void lookup_row(const uint8_t *restrict row, float *restrict red, float *restrict green,
                       float *restrict blue, ptrdiff_t width, const float *restrict table) {
    const float *t0 = table, *t1 = table + 256, *t2 = table + 512;
    for (ptrdiff_t x = 0; x < width; x++) {
        red[x] = t0[row[3 * x]];
        green[x] = t1[row[3 * x + 1]];
        blue[x] = t2[row[3 * x + 2]];
    }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_GATHER 1

/* lookup_row with AVX2 gathers, 8 pixels at a time (twice the scalar loop's speed: 224 x 224 in about
 * 27 us instead of 50): two 16-byte loads hold 8 packed RGB pixels (bytes 0..23), a byte shuffle picks
 * each channel's 8 levels, and a gather reads their values from the channel's table. */
__attribute__((target("avx2")))
static void lookup_row_avx2(const uint8_t *restrict row, float *restrict red, float *restrict green,
                            float *restrict blue, ptrdiff_t width, const float *restrict table) {
    const __m128i r_lo = _mm_setr_epi8(0, 3, 6, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m128i r_hi = _mm_setr_epi8(-1, -1, -1, -1, -1, -1, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m128i g_lo = _mm_setr_epi8(1, 4, 7, 10, 13, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m128i g_hi = _mm_setr_epi8(-1, -1, -1, -1, -1, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m128i b_lo = _mm_setr_epi8(2, 5, 8, 11, 14, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m128i b_hi = _mm_setr_epi8(-1, -1, -1, -1, -1, 9, 12, 15, -1, -1, -1, -1, -1, -1, -1, -1);
    ptrdiff_t x = 0;
    for (; x + 8 <= width; x += 8) {
        const uint8_t *p = row + 3 * x;
        __m128i lo = _mm_loadu_si128((const __m128i *)p), hi = _mm_loadu_si128((const __m128i *)(p + 8));
        __m128i r = _mm_or_si128(_mm_shuffle_epi8(lo, r_lo), _mm_shuffle_epi8(hi, r_hi));
        __m128i g = _mm_or_si128(_mm_shuffle_epi8(lo, g_lo), _mm_shuffle_epi8(hi, g_hi));
        __m128i b = _mm_or_si128(_mm_shuffle_epi8(lo, b_lo), _mm_shuffle_epi8(hi, b_hi));
        _mm256_storeu_ps(red + x, _mm256_i32gather_ps(table, _mm256_cvtepu8_epi32(r), 4));
        _mm256_storeu_ps(green + x, _mm256_i32gather_ps(table + 256, _mm256_cvtepu8_epi32(g), 4));
        _mm256_storeu_ps(blue + x, _mm256_i32gather_ps(table + 512, _mm256_cvtepu8_epi32(b), 4));
    }
    lookup_row(row + 3 * x, red + x, green + x, blue + x, width - x, table);
}
#endif


/* The row converter for this CPU. */
static lookup_fn lookup_row_best(void) {
#ifdef HAVE_GATHER
    if (__builtin_cpu_supports("avx2"))
        return lookup_row_avx2;
#endif
    return lookup_row;
}

#endif
