/* Antialiased separable resampling of 8-bit images with Pillow's arithmetic, for fastload's CPU path.
 *
 * Why this exists: torchvision resizes a PIL image with Pillow's Image.resize, so fastload's CPU path must
 * give Pillow's pixels. Stock Pillow's resampler reads its vertical pass down columns (a cache miss per
 * tap) and works on 4-byte pixels; pillow-simd is fast but a from-source build. This is the same
 * algorithm -- coefficients of the filter stretched by the scale, computed in double and normalized to
 * 22-bit fixed point, a horizontal pass into an 8-bit intermediate, then a vertical pass, each sum
 * rounded by adding half and shifting, clamped to 0..255 -- so its pixels are Pillow's bit for bit
 * (integer sums do not depend on their order), written for packed 1- or 3-channel rows, with a vertical
 * pass that runs along rows (vectorized). It computes only a window of the output (a CenterCrop after
 * a Resize): each output pixel depends on its coefficients alone, so the window equals Pillow's crop of
 * the whole resize.
 *
 * No Python here: the caller releases the GIL around all of it.
 */
#ifndef FASTLOAD_RESAMPLE_H
#define FASTLOAD_RESAMPLE_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define RESAMPLE_BITS 22 /* 32 bits - 8 for the value - 2 for filters' negative lobes and overshoot */

/* PIL's resampling constants (Image.Resampling) */
enum { FILTER_LANCZOS = 1, FILTER_BILINEAR = 2, FILTER_BICUBIC = 3, FILTER_BOX = 4, FILTER_HAMMING = 5 };

static double filter_value(int filter, double x) {
    if (x < 0.0 && filter != FILTER_BOX && filter != FILTER_LANCZOS)
        x = -x;
    switch (filter) {
    case FILTER_BOX:
        return (x > -0.5 && x <= 0.5) ? 1.0 : 0.0;
    case FILTER_BILINEAR:
        return x < 1.0 ? 1.0 - x : 0.0;
    case FILTER_HAMMING:
        if (x == 0.0)
            return 1.0;
        if (x >= 1.0)
            return 0.0;
        x = x * M_PI;
        return sin(x) / x * (0.54f + 0.46f * cos(x));
    case FILTER_BICUBIC: /* a = -0.5 */
        if (x < 1.0)
            return ((-0.5 + 2.0) * x - (-0.5 + 3.0)) * x * x + 1;
        if (x < 2.0)
            return (((x - 5) * x + 8) * x - 4) * -0.5;
        return 0.0;
    case FILTER_LANCZOS: { /* sinc(x) * sinc(x / 3) on [-3, 3) */
        if (!(-3.0 <= x && x < 3.0))
            return 0.0;
        double a = x == 0.0 ? 1.0 : sin(x * M_PI) / (x * M_PI);
        double third = x / 3;
        double b = third == 0.0 ? 1.0 : sin(third * M_PI) / (third * M_PI);
        return a * b;
    }
    }
    return 0.0;
}

static double filter_support(int filter) {
    switch (filter) {
    case FILTER_BOX:
        return 0.5;
    case FILTER_BICUBIC:
        return 2.0;
    case FILTER_LANCZOS:
        return 3.0;
    default:
        return 1.0;
    }
}

/* The taps a resize of in_size pixels (the box in0..in1 of them, float as Pillow takes it) to out_size
 * pixels needs per output pixel: at most this many. */
static int resample_taps(int filter, float in0, float in1, int out_size) {
    double scale = (double)(in1 - in0) / out_size;
    double support = filter_support(filter) * (scale < 1.0 ? 1.0 : scale);
    return (int)ceil(support) * 2 + 1;
}

/* Coefficients of output pixels first..first+count-1 of such a resize: for each, the first input pixel
 * (start), how many it reads (length) and `taps` fixed-point weights (zero past length). */
static void resample_coefficients(int filter, int in_size, float in0, float in1, int out_size, int first,
                                  int count, int taps, int *start, int *length, int32_t *weights) {
    double scale = (double)(in1 - in0) / out_size;
    double filterscale = scale < 1.0 ? 1.0 : scale;
    double support = filter_support(filter) * filterscale;
    double ss = 1.0 / filterscale;
    for (int i = 0; i < count; i++) {
        int xx = first + i;
        double center = in0 + (xx + 0.5) * scale;
        int xmin = (int)(center - support + 0.5);
        if (xmin < 0)
            xmin = 0;
        int xmax = (int)(center + support + 0.5);
        if (xmax > in_size)
            xmax = in_size;
        xmax -= xmin;
        double total = 0.0; /* summed in the order Pillow sums, then each weight divided by it */
        for (int x = 0; x < xmax; x++)
            total += filter_value(filter, (x + xmin - center + 0.5) * ss);
        int32_t *k = weights + (size_t)i * taps;
        for (int x = 0; x < taps; x++) {
            double v = 0.0;
            if (x < xmax) {
                v = filter_value(filter, (x + xmin - center + 0.5) * ss);
                if (total != 0.0)
                    v /= total;
            }
            k[x] = v < 0 ? (int32_t)(-0.5 + v * (1 << RESAMPLE_BITS)) : (int32_t)(0.5 + v * (1 << RESAMPLE_BITS));
        }
        start[i] = xmin;
        length[i] = xmax;
    }
}

/* resample_coefficients for one axis, with the starts made relative to the first input pixel read, which
 * is returned; *span gets how many input pixels the outputs read from there. */
static int resample_axis(int filter, int in_size, float in0, float in1, int out_size, int first, int count, int taps,
                         int *start, int *length, int32_t *weights, int *span) {
    resample_coefficients(filter, in_size, in0, in1, out_size, first, count, taps, start, length, weights);
    int origin = start[0];
    *span = start[count - 1] + length[count - 1] - origin;
    for (int i = 0; i < count; i++)
        start[i] -= origin;
    return origin;
}

static inline uint8_t resample_clip(int32_t sum) {
    int32_t v = sum >> RESAMPLE_BITS;
    return v < 0 ? 0 : v > 255 ? 255 : (uint8_t)v;
}

/* One row of a 3-channel horizontal pass. */
static void resample_row_rgb_scalar(const uint8_t *restrict row, uint8_t *restrict dst, int count, int taps,
                                    const int *start, const int *length, const int32_t *weights) {
    const int32_t half = 1 << (RESAMPLE_BITS - 1);
    for (int i = 0; i < count; i++) {
        const uint8_t *p = row + (size_t)start[i] * 3;
        const int32_t *k = weights + (size_t)i * taps;
        int32_t s0 = half, s1 = half, s2 = half;
        for (int x = 0; x < length[i]; x++) {
            s0 += p[3 * x] * k[x];
            s1 += p[3 * x + 1] * k[x];
            s2 += p[3 * x + 2] * k[x];
        }
        dst[3 * i] = resample_clip(s0);
        dst[3 * i + 1] = resample_clip(s1);
        dst[3 * i + 2] = resample_clip(s2);
    }
}

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
/* The same with each pixel's channels as one 4-lane vector (pmovzxbd, pmulld): the fourth lane reads the
 * next byte and is dropped, so `row` must be readable one byte past its end. */
__attribute__((target("sse4.1")))
static void resample_row_rgb_sse41(const uint8_t *restrict row, uint8_t *restrict dst, int count, int taps,
                                   const int *start, const int *length, const int32_t *weights) {
    const __m128i half = _mm_set1_epi32(1 << (RESAMPLE_BITS - 1));
    for (int i = 0; i < count; i++) {
        const uint8_t *p = row + (size_t)start[i] * 3;
        const int32_t *k = weights + (size_t)i * taps;
        __m128i sum = half;
        for (int x = 0; x < length[i]; x++) {
            int32_t bytes;
            memcpy(&bytes, p + 3 * x, sizeof bytes);
            __m128i pixel = _mm_cvtepu8_epi32(_mm_cvtsi32_si128(bytes));
            sum = _mm_add_epi32(sum, _mm_mullo_epi32(pixel, _mm_set1_epi32(k[x])));
        }
        int32_t lanes[4];
        _mm_storeu_si128((__m128i *)lanes, sum);
        dst[3 * i] = resample_clip(lanes[0]);
        dst[3 * i + 1] = resample_clip(lanes[1]);
        dst[3 * i + 2] = resample_clip(lanes[2]);
    }
}

/* Two rows at once (one 8-lane vector: a pixel of each), sharing each weight's broadcast. */
__attribute__((target("avx2")))
static void resample_rows_rgb_avx2(const uint8_t *restrict row0, const uint8_t *restrict row1,
                                   uint8_t *restrict dst0, uint8_t *restrict dst1, int count, int taps,
                                   const int *start, const int *length, const int32_t *weights) {
    const __m256i half = _mm256_set1_epi32(1 << (RESAMPLE_BITS - 1));
    for (int i = 0; i < count; i++) {
        size_t at = (size_t)start[i] * 3;
        const int32_t *k = weights + (size_t)i * taps;
        __m256i sum = half;
        for (int x = 0; x < length[i]; x++) {
            int32_t a, b;
            memcpy(&a, row0 + at + 3 * x, sizeof a);
            memcpy(&b, row1 + at + 3 * x, sizeof b);
            __m256i pixels = _mm256_cvtepu8_epi32(_mm_unpacklo_epi32(_mm_cvtsi32_si128(a), _mm_cvtsi32_si128(b)));
            sum = _mm256_add_epi32(sum, _mm256_mullo_epi32(pixels, _mm256_set1_epi32(k[x])));
        }
        /* >> 22 and saturate to 0..255 (resample_clip), then each row's three channels */
        sum = _mm256_srai_epi32(sum, RESAMPLE_BITS);
        __m128i words = _mm_packs_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
        uint8_t bytes[16];
        _mm_storeu_si128((__m128i *)bytes, _mm_packus_epi16(words, words));
        memcpy(dst0 + 3 * i, bytes, 3);
        memcpy(dst1 + 3 * i, bytes + 4, 3);
    }
}

__attribute__((target("avx2"))) static inline __m256i pixel_pair(const uint8_t *a, const uint8_t *b) {
    int32_t x, y;
    memcpy(&x, a, sizeof x);
    memcpy(&y, b, sizeof y);
    return _mm256_cvtepu8_epi32(_mm_unpacklo_epi32(_mm_cvtsi32_si128(x), _mm_cvtsi32_si128(y)));
}

__attribute__((target("avx2"))) static inline void store_pair(__m256i sum, uint8_t *dst0, uint8_t *dst1) {
    sum = _mm256_srai_epi32(sum, RESAMPLE_BITS);
    __m128i words = _mm_packs_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
    uint8_t bytes[16];
    _mm_storeu_si128((__m128i *)bytes, _mm_packus_epi16(words, words));
    memcpy(dst0, bytes, 3);
    memcpy(dst1, bytes + 4, 3);
}

/* Four rows at once: two pairs, each weight broadcast once for both. */
__attribute__((target("avx2")))
static void resample_4rows_rgb_avx2(const uint8_t *const rows[4], uint8_t *const dsts[4], int count, int taps,
                                    const int *start, const int *length, const int32_t *weights) {
    const __m256i half = _mm256_set1_epi32(1 << (RESAMPLE_BITS - 1));
    for (int i = 0; i < count; i++) {
        size_t at = (size_t)start[i] * 3;
        const int32_t *k = weights + (size_t)i * taps;
        __m256i low = half, high = half;
        for (int x = 0; x < length[i]; x++) {
            __m256i weight = _mm256_set1_epi32(k[x]);
            size_t byte = at + 3 * (size_t)x;
            low = _mm256_add_epi32(low, _mm256_mullo_epi32(pixel_pair(rows[0] + byte, rows[1] + byte), weight));
            high = _mm256_add_epi32(high, _mm256_mullo_epi32(pixel_pair(rows[2] + byte, rows[3] + byte), weight));
        }
        store_pair(low, dsts[0] + 3 * i, dsts[1] + 3 * i);
        store_pair(high, dsts[2] + 3 * i, dsts[3] + 3 * i);
    }
}
#endif

static void resample_row_rgb(const uint8_t *restrict row, uint8_t *restrict dst, int count, int taps,
                             const int *start, const int *length, const int32_t *weights) {
#if defined(__x86_64__) || defined(__i386__)
    if (__builtin_cpu_supports("sse4.1")) {
        resample_row_rgb_sse41(row, dst, count, taps, start, length, weights);
        return;
    }
#endif
    resample_row_rgb_scalar(row, dst, count, taps, start, length, weights);
}

/* out[y][i] for rows 0..rows-1 of `in` (row stride in_stride bytes), count output pixels of `channels`;
 * for 3 channels `in` must be readable one byte past its last row's end. */
static void resample_horizontal(const uint8_t *in, size_t in_stride, int rows, int channels, uint8_t *out,
                                size_t out_stride, int count, int taps, const int *start, const int *length,
                                const int32_t *weights) {
    const int32_t half = 1 << (RESAMPLE_BITS - 1);
    int y = 0;
#if defined(__x86_64__) || defined(__i386__)
    if (channels == 3 && __builtin_cpu_supports("avx2")) {
        for (; y + 3 < rows; y += 4) {
            const uint8_t *four[4];
            uint8_t *dsts[4];
            for (int r = 0; r < 4; r++) {
                four[r] = in + (size_t)(y + r) * in_stride;
                dsts[r] = out + (size_t)(y + r) * out_stride;
            }
            resample_4rows_rgb_avx2(four, dsts, count, taps, start, length, weights);
        }
        for (; y + 1 < rows; y += 2)
            resample_rows_rgb_avx2(in + (size_t)y * in_stride, in + (size_t)(y + 1) * in_stride,
                                   out + (size_t)y * out_stride, out + (size_t)(y + 1) * out_stride, count, taps,
                                   start, length, weights);
    }
#endif
    for (; y < rows; y++) {
        const uint8_t *row = in + (size_t)y * in_stride;
        uint8_t *dst = out + (size_t)y * out_stride;
        if (channels == 3) {
            resample_row_rgb(row, dst, count, taps, start, length, weights);
        } else {
            for (int i = 0; i < count; i++) {
                const uint8_t *p = row + start[i];
                const int32_t *k = weights + (size_t)i * taps;
                int32_t s = half;
                for (int x = 0; x < length[i]; x++)
                    s += p[x] * k[x];
                dst[i] = resample_clip(s);
            }
        }
    }
}


#if defined(__x86_64__) || defined(__i386__)
/* One output row of the vertical pass, 8 values at a time summed in a register over all taps. Returns how
 * many values it did (a multiple of 8); the caller does the rest. */
__attribute__((target("avx2")))
static size_t resample_column_avx2(const uint8_t *in, size_t in_stride, size_t values, uint8_t *dst, int first,
                                   int length, const int32_t *k) {
    const __m256i half = _mm256_set1_epi32(1 << (RESAMPLE_BITS - 1));
    size_t v = 0;
    for (; v + 8 <= values; v += 8) {
        __m256i sum = half;
        for (int y = 0; y < length; y++) {
            __m128i bytes = _mm_loadl_epi64((const __m128i *)(in + (size_t)(first + y) * in_stride + v));
            sum = _mm256_add_epi32(sum, _mm256_mullo_epi32(_mm256_cvtepu8_epi32(bytes), _mm256_set1_epi32(k[y])));
        }
        /* >> 22, then saturate to 0..255: what resample_clip does, 8 at a time */
        sum = _mm256_srai_epi32(sum, RESAMPLE_BITS);
        __m128i words = _mm_packs_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
        _mm_storel_epi64((__m128i *)(dst + v), _mm_packus_epi16(words, words));
    }
    return v;
}
#endif

/* Output rows 0..count-1 from the rows of `in` (stride in_stride), each row `values` bytes wide;
 * `sums` is scratch of `values` int32. */
static void resample_vertical(const uint8_t *in, size_t in_stride, size_t values, uint8_t *out, size_t out_stride,
                              int count, int taps, const int *start, const int *length, const int32_t *weights,
                              int32_t *sums) {
    const int32_t half = 1 << (RESAMPLE_BITS - 1);
#if defined(__x86_64__) || defined(__i386__)
    int avx2 = __builtin_cpu_supports("avx2");
#endif
    for (int i = 0; i < count; i++) {
        const int32_t *k = weights + (size_t)i * taps;
        uint8_t *dst = out + (size_t)i * out_stride;
        size_t done = 0;
#if defined(__x86_64__) || defined(__i386__)
        if (avx2)
            done = resample_column_avx2(in, in_stride, values, dst, start[i], length[i], k);
#endif
        for (size_t v = done; v < values; v++)
            sums[v] = half;
        for (int y = 0; y < length[i]; y++) {
            const uint8_t *row = in + (size_t)(start[i] + y) * in_stride;
            for (size_t v = done; v < values; v++)
                sums[v] += row[v] * k[y];
        }
        for (size_t v = done; v < values; v++)
            dst[v] = resample_clip(sums[v]);
    }
}

#endif
