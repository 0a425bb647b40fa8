/* DALI's per-sample numerics of the warp operators in native code: one function per step, each equal bit for
 * bit to the numpy/torch version it replaces, which stays as the fallback and the test's reference. Compiled
 * with -ffp-contract=off: each float32 product and sum is rounded on its own, as torch and numpy do them;
 * the multiply-adds OpenCV fuses are written as fmaf.
 *
 * warp_affine: DALI's WarpCPU sampler (warping.py `warp`: fn.warp_affine and fn.rotate). Why: in torch a
 * linear warp is four full-image gathers with their index clamps, inside masks and selects, then products,
 * sums and ConvertSat's float64 clip: two dozen full-image temporaries per sample.
 *
 *   warp_affine(src, dst, height, width, channels, in_type, out_h, out_w, out_type, matrix, linear,
 *               has_fill, fill)
 *     src: height * width * channels of in_type (C-contiguous HWC); height, width >= 1
 *     dst: writable, out_h * out_w * channels of out_type
 *     types: 'B' uint8, 'b' int8, 'H' uint16, 'h' int16, 'i' int32, 'f' float32
 *     matrix: 6 float32, the destination-to-source 2x3 matrix
 *     fill: the fill value already converted to in_type (used when has_fill), read as float32
 *   Each row's source points: the first column's ((m00 * 0.5 + m02) + m01 * (y + 0.5)), the next ones by
 *   adding m00 in float32, restarting every 256 columns from a checkpoint reached by adding 256 * m00. The
 *   float32 result is converted as DALI's ConvertSat: round (halves away from zero) and saturate; NaN gives 0
 *   (INT32_MIN for int32: what numpy's cast gives on x86).
 *
 * warp_perspective: OpenCV 5's float32 warpPerspective kernels as DALI's CPU fn.experimental.warp_perspective
 * calls them for uint8, uint16 and float32 images (remap.py `_warp_float`). Why: in numpy the source map alone
 * is a dozen full-image float64 temporaries (its fmaf emulation), then four gathers with border folding.
 *
 *   warp_perspective(src, dst, height, width, channels, type, out_h, out_w, matrix, linear, border, fill)
 *     src: height * width * channels of type ('B', 'H' or 'f'); dst: writable, out_h * out_w * channels
 *     matrix: 9 float32, destination to source
 *     border: 0 constant, 1 replicate, 2 reflect, 3 reflect_101, 4 wrap
 *     fill: channels values of type
 *
 * Vector versions (AVX2 + FMA, chosen at load time where the CPU has both): the linear rows of a three-channel
 * uint8 image, eight output pixels a step where their 2x2 blocks lie inside the image, and warp_affine's uint8
 * store. Each lane takes the scalar code's float32 steps in the same order, so the results are the same bits;
 * the rest runs the scalar code. set_vector(on) switches them (returns the previous setting), for the tests.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <immintrin.h>

/* Whether the AVX2 + FMA versions below run (set at load time where the CPU has both; set_vector switches them,
 * for the tests, which compare them with the scalar loops bit for bit). */
static int use_vector;

/* float -> int64 as x86's cvttss2si, which torch's and numpy's casts use: out of range and NaN give INT64_MIN. */
static inline int64_t to_i64(float f) {
    return (f >= -9223372036854775808.0f && f < 9223372036854775808.0f) ? (int64_t)f : INT64_MIN;
}

static inline int64_t clamp64(int64_t i, int64_t lo, int64_t hi) {
    return i < lo ? lo : (i > hi ? hi : i);
}

static Py_ssize_t type_size(int type) {
    switch (type) {
    case 'B': case 'b': return 1;
    case 'H': case 'h': return 2;
    case 'i': case 'f': return 4;
    default: return 0;
    }
}

/* C's roundf (halves away from zero) without the library call: v - truncf(v) is exact, so the tie test is;
 * infinities and NaN come back as they are. */
static inline float round_away(float v) {
    float t = truncf(v);
    float d = v - t;
    return fabsf(d) >= 0.5f ? t + copysignf(1.0f, v) : t;
}

/* ConvertSat of a float32 to an 8- or 16-bit type: round (halves away from zero), then clamp to [lo, hi]; NaN
 * gives 0. Clamped first to [lo - 1, hi + 1] (which keeps the result: rounding is monotonic) so that the
 * truncation fits an int32; v - trunc(v) is exact, so the tie test is. Written without branches and compiled
 * without trapping math (which changes no value, only whether a comparison with NaN may raise the invalid
 * flag), as _native.c's round_clamp, so that the compiler can turn the selects into vector blends. */
#pragma GCC push_options
#pragma GCC optimize("no-trapping-math")
static inline __attribute__((always_inline)) int32_t round_clamp(float v, int32_t lo, int32_t hi) {
    float below = (float)(lo - 1), above = (float)(hi + 1);
    float c = v < below ? below : v;
    c = c > above ? above : c;
    c = v == v ? c : 0.0f;
    int32_t t = (int32_t)c;
    float frac = c - (float)t;
    float size = frac < 0.0f ? -frac : frac;
    int32_t up = size >= 0.5f;
    t += (c > 0.0f ? 1 : -1) & -up;
    t = t < lo ? lo : t;
    return t > hi ? hi : t;
}

#define STORE_ROW(T, LO, HI)                                                                                 \
    static inline __attribute__((always_inline)) void store_row_##T(const float *in, T *out,                \
                                                                    Py_ssize_t count) {                     \
        for (Py_ssize_t i = 0; i < count; i++)                                                               \
            out[i] = (T)round_clamp(in[i], LO, HI);                                                          \
    }
STORE_ROW(uint8_t, 0, 255)
STORE_ROW(int8_t, -128, 127)
STORE_ROW(uint16_t, 0, 65535)
STORE_ROW(int16_t, -32768, 32767)
#pragma GCC pop_options

/* store_row_uint8_t eight values a step: round_clamp's steps per lane (clamp to [-1, 256], NaN to 0, truncate,
 * one away from zero where the dropped fraction is at least a half, clamp to [0, 255]); a row under eight values
 * scalar. */
__attribute__((target("avx2,fma")))
static void store_row_uint8_avx2(const float *in, uint8_t *out, Py_ssize_t count) {
    const __m256 below = _mm256_set1_ps(-1.0f), above = _mm256_set1_ps(256.0f), zero = _mm256_setzero_ps();
    const __m256 half = _mm256_set1_ps(0.5f), magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256i one = _mm256_set1_epi32(1), top = _mm256_set1_epi32(255);
    if (count < 8) {
        store_row_uint8_t(in, out, count);
        return;
    }
    for (Py_ssize_t step = 0; step < count; step += 8) {
        Py_ssize_t i = step + 8 <= count ? step : count - 8;  /* the last step overlaps: the same values again */
        __m256 v = _mm256_loadu_ps(in + i);
        __m256 c = _mm256_min_ps(_mm256_max_ps(v, below), above);
        c = _mm256_and_ps(c, _mm256_cmp_ps(v, v, _CMP_ORD_Q));
        __m256i t = _mm256_cvttps_epi32(c);
        __m256 size = _mm256_and_ps(_mm256_sub_ps(c, _mm256_cvtepi32_ps(t)), magnitude);
        __m256i up = _mm256_castps_si256(_mm256_cmp_ps(size, half, _CMP_GE_OQ));
        __m256i step = _mm256_blendv_epi8(_mm256_sub_epi32(_mm256_setzero_si256(), one), one,
                                          _mm256_castps_si256(_mm256_cmp_ps(c, zero, _CMP_GT_OQ)));
        t = _mm256_add_epi32(t, _mm256_and_si256(step, up));
        t = _mm256_min_epi32(_mm256_max_epi32(t, _mm256_setzero_si256()), top);
        __m128i words = _mm_packus_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
        _mm_storel_epi64((__m128i *)(out + i), _mm_packus_epi16(words, words));
    }
}

/* ConvertSat to int32: roundf, then clamped in double (the clamp to hi + 1 above does not fit an int32); NaN
 * gives INT32_MIN, what numpy's cast gives on x86. */
static inline __attribute__((always_inline)) void store_row_int32_t(const float *in, int32_t *out,
                                                                     Py_ssize_t count) {
    for (Py_ssize_t i = 0; i < count; i++) {
        double v = (double)round_away(in[i]);
        v = v < -2147483648.0 ? -2147483648.0 : (v > 2147483647.0 ? 2147483647.0 : v);
        out[i] = v != v ? INT32_MIN : (int32_t)v;
    }
}

static inline __attribute__((always_inline)) void store_row(const float *in, void *dst, Py_ssize_t count, int type) {
    switch (type) {
    case 'B':
        if (use_vector)
            store_row_uint8_avx2(in, dst, count);
        else
            store_row_uint8_t(in, dst, count);
        break;
    case 'b': store_row_int8_t(in, dst, count); break;
    case 'H': store_row_uint16_t(in, dst, count); break;
    case 'h': store_row_int16_t(in, dst, count); break;
    case 'i': store_row_int32_t(in, dst, count); break;
    default: memcpy(dst, in, count * sizeof(float)); break;
    }
}

/* Positions start + x * step as DALI reaches them (warping.py `_walk_row`). */
static void walk_row(float *out, float start, float step, Py_ssize_t count) {
    float tile_start = start, tile_step = 256.0f * step;
    for (Py_ssize_t begin = 0; begin < count; begin += 256) {
        Py_ssize_t end = begin + 256 < count ? begin + 256 : count;
        float s = tile_start;
        out[begin] = s;
        for (Py_ssize_t x = begin + 1; x < end; x++) {
            s = s + step;
            out[x] = s;
        }
        tile_start = tile_start + tile_step;
    }
}

/* walk_row of the x and the y positions in one loop: the same sums, the two dependent chains side by side. */
static inline __attribute__((always_inline)) void walk_rows(float *out_x, float *out_y, float start_x,
                                                            float start_y, float step_x, float step_y,
                                                            Py_ssize_t count) {
    float tile_x = start_x, tile_y = start_y, tile_step_x = 256.0f * step_x, tile_step_y = 256.0f * step_y;
    for (Py_ssize_t begin = 0; begin < count; begin += 256) {
        Py_ssize_t end = begin + 256 < count ? begin + 256 : count;
        float a = tile_x, b = tile_y;
        out_x[begin] = a;
        out_y[begin] = b;
        for (Py_ssize_t x = begin + 1; x < end; x++) {
            a = a + step_x;
            b = b + step_y;
            out_x[x] = a;
            out_y[x] = b;
        }
        tile_x = tile_x + tile_step_x;
        tile_y = tile_y + tile_step_y;
    }
}

typedef struct {
    const void *src;
    Py_ssize_t height, width, channels;
    int type, has_fill;
    float fill;
} Source;

/* Where warping.py's `tap` reads: the offset of the pixel at the clamped indices, or -1 for the fill value
 * (outside the image, when there is one). */
static inline Py_ssize_t tap_offset(const Source *s, int64_t iy, int64_t ix) {
    if (s->has_fill && !(iy >= 0 && iy < s->height && ix >= 0 && ix < s->width))
        return -1;
    int64_t y = clamp64(iy, 0, s->height - 1), x = clamp64(ix, 0, s->width - 1);
    return (y * s->width + x) * s->channels;
}

/* One output row's float32 values for an input of type T: nearest, or the two products and sums per row of
 * the 2x2 block, then the blend of the rows, each rounded on its own. */
#define AFFINE_ROW(T)                                                                                        \
    static inline __attribute__((always_inline)) void affine_row_##T(const Source *s, const float *sx,       \
                                                                     const float *sy, Py_ssize_t out_w,   \
                                                                     int linear, float *row) {            \
        const T *src = s->src;                                                                               \
        const Py_ssize_t channels = s->channels;                                                             \
        const float fill = s->fill;                                                                          \
        for (Py_ssize_t x = 0; x < out_w; x++) {                                                             \
            float *out = row + x * channels;                                                                 \
            if (!linear) {                                                                                   \
                Py_ssize_t o = tap_offset(s, to_i64(floorf(sy[x])), to_i64(floorf(sx[x])));                 \
                for (Py_ssize_t c = 0; c < channels; c++)                                                    \
                    out[c] = o < 0 ? fill : (float)src[o + c];                                               \
                continue;                                                                                    \
            }                                                                                                \
            float fx = sx[x] - 0.5f, fy = sy[x] - 0.5f;                                                      \
            float x0f = floorf(fx), y0f = floorf(fy);                                                        \
            float qx = fx - x0f, qy = fy - y0f;                                                              \
            float px = 1.0f - qx;                                                                            \
            int64_t x0 = to_i64(x0f), y0 = to_i64(y0f);                                                      \
            Py_ssize_t o00, o01, o10, o11;                                                                   \
            if (x0 >= 0 && x0 < s->width - 1 && y0 >= 0 && y0 < s->height - 1) { /* the block inside */    \
                o00 = (y0 * s->width + x0) * channels;                                                       \
                o01 = o00 + channels;                                                                        \
                o10 = o00 + s->width * channels;                                                             \
                o11 = o10 + channels;                                                                        \
                for (Py_ssize_t c = 0; c < channels; c++) {                                                  \
                    float a = (float)src[o00 + c] * px, b = (float)src[o01 + c] * qx;                        \
                    float top = a + b;                                                                       \
                    a = (float)src[o10 + c] * px;                                                            \
                    b = (float)src[o11 + c] * qx;                                                            \
                    float bottom = a + b;                                                                    \
                    float d = (bottom - top) * qy;                                                           \
                    out[c] = top + d;                                                                        \
                }                                                                                            \
                continue;                                                                                    \
            }                                                                                                \
            o00 = tap_offset(s, y0, x0);                                                                     \
            o01 = tap_offset(s, y0, x0 + 1);                                                                 \
            o10 = tap_offset(s, y0 + 1, x0);                                                                 \
            o11 = tap_offset(s, y0 + 1, x0 + 1);                                                             \
            for (Py_ssize_t c = 0; c < channels; c++) {                                                      \
                float t00 = o00 < 0 ? fill : (float)src[o00 + c], t01 = o01 < 0 ? fill : (float)src[o01 + c]; \
                float t10 = o10 < 0 ? fill : (float)src[o10 + c], t11 = o11 < 0 ? fill : (float)src[o11 + c]; \
                float a = t00 * px, b = t01 * qx;                                                            \
                float top = a + b;                                                                           \
                a = t10 * px;                                                                                \
                b = t11 * qx;                                                                                \
                float bottom = a + b;                                                                        \
                float d = (bottom - top) * qy;                                                               \
                out[c] = top + d;                                                                            \
            }                                                                                                \
        }                                                                                                    \
    }
AFFINE_ROW(uint8_t)
AFFINE_ROW(int8_t)
AFFINE_ROW(uint16_t)
AFFINE_ROW(int16_t)
AFFINE_ROW(int32_t)
AFFINE_ROW(float)

/* Eight pixels' 2x2 taps in a three-channel uint8 image, read by 32-bit gathers: the top row's at the pixel (its
 * channels the low three bytes), the bottom row's a byte before (its channels the high three), so that no read
 * passes the image's last byte. Shared by affine_row_u8c3_avx2 and perspective_row_u8c3_avx2. */
typedef struct {
    __m256i g00, g01, g10, g11;
} Taps8;

/* Whether every lane's 2x2 block, its top-left tap at (x0, y0), lies inside the image. */
__attribute__((target("avx2,fma")))
static inline int taps_inside(__m256 x0, __m256 y0, __m256 x_end, __m256 y_end) {
    const __m256 zero = _mm256_setzero_ps();
    __m256 inside = _mm256_and_ps(_mm256_and_ps(_mm256_cmp_ps(x0, zero, _CMP_GE_OQ),
                                                _mm256_cmp_ps(x0, x_end, _CMP_LT_OQ)),
                                  _mm256_and_ps(_mm256_cmp_ps(y0, zero, _CMP_GE_OQ),
                                                _mm256_cmp_ps(y0, y_end, _CMP_LT_OQ)));
    return _mm256_movemask_ps(inside) == 0xff;
}

__attribute__((target("avx2,fma")))
static inline Taps8 gather_taps(const uint8_t *src, __m256 x0, __m256 y0, __m256i stride) {
    const __m256i three = _mm256_set1_epi32(3);
    __m256i o00 = _mm256_add_epi32(_mm256_mullo_epi32(_mm256_cvtps_epi32(y0), stride),
                                   _mm256_mullo_epi32(_mm256_cvtps_epi32(x0), three));
    __m256i o10 = _mm256_sub_epi32(_mm256_add_epi32(o00, stride), _mm256_set1_epi32(1));
    Taps8 t;
    t.g00 = _mm256_i32gather_epi32((const int *)src, o00, 1);
    t.g01 = _mm256_i32gather_epi32((const int *)src, _mm256_add_epi32(o00, three), 1);
    t.g10 = _mm256_i32gather_epi32((const int *)src, o10, 1);
    t.g11 = _mm256_i32gather_epi32((const int *)src, _mm256_add_epi32(o10, three), 1);
    return t;
}

/* Channel c of the four taps as float32: p[0] top-left, p[1] top-right, p[2] bottom-left, p[3] bottom-right. */
__attribute__((target("avx2,fma")))
static inline void tap_channel(const Taps8 *t, int c, __m256 p[4]) {
    const __m256i low = _mm256_set1_epi32(0xff);
    __m128i top_shift = _mm_cvtsi32_si128(8 * c), bottom_shift = _mm_cvtsi32_si128(8 * c + 8);
    p[0] = _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srl_epi32(t->g00, top_shift), low));
    p[1] = _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srl_epi32(t->g01, top_shift), low));
    p[2] = _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srl_epi32(t->g10, bottom_shift), low));
    p[3] = _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srl_epi32(t->g11, bottom_shift), low));
}

/* affine_row_uint8_t of a three-channel image, linear, eight output pixels a step where their 2x2 blocks all lie
 * inside the image: the same float32 products and sums in the same order, one pixel per lane, the taps read by
 * 32-bit gathers (the top row's at the pixel, its channels the low three bytes; the bottom row's a byte before,
 * its channels the high three, so that no read passes the image's last byte). Other steps and the last columns
 * run the scalar loop. Needs the image under 2**31 bytes and its sides under 2**24 (exact in float32). */
__attribute__((target("avx2,fma")))
static void affine_row_u8c3_avx2(const Source *s, const float *sx, const float *sy, Py_ssize_t out_w, float *row) {
    const uint8_t *src = s->src;
    const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
    const __m256 x_end = _mm256_set1_ps((float)(s->width - 1)), y_end = _mm256_set1_ps((float)(s->height - 1));
    const __m256i stride = _mm256_set1_epi32((int)(s->width * 3));
    float lanes[3][8] __attribute__((aligned(32)));
    Py_ssize_t x = 0;
    for (; x + 8 <= out_w; x += 8) {
        __m256 fx = _mm256_sub_ps(_mm256_loadu_ps(sx + x), half), fy = _mm256_sub_ps(_mm256_loadu_ps(sy + x), half);
        __m256 x0f = _mm256_floor_ps(fx), y0f = _mm256_floor_ps(fy);
        if (!taps_inside(x0f, y0f, x_end, y_end)) {
            affine_row_uint8_t(s, sx + x, sy + x, 8, 1, row + x * 3);
            continue;
        }
        __m256 qx = _mm256_sub_ps(fx, x0f), qy = _mm256_sub_ps(fy, y0f);
        __m256 px = _mm256_sub_ps(one, qx);
        Taps8 taps = gather_taps(src, x0f, y0f, stride);
        for (int c = 0; c < 3; c++) {
            __m256 p[4];
            tap_channel(&taps, c, p);
            __m256 top = _mm256_add_ps(_mm256_mul_ps(p[0], px), _mm256_mul_ps(p[1], qx));
            __m256 bottom = _mm256_add_ps(_mm256_mul_ps(p[2], px), _mm256_mul_ps(p[3], qx));
            _mm256_store_ps(lanes[c], _mm256_add_ps(top, _mm256_mul_ps(_mm256_sub_ps(bottom, top), qy)));
        }
        float *out = row + x * 3;
        for (int i = 0; i < 8; i++) {
            out[3 * i] = lanes[0][i];
            out[3 * i + 1] = lanes[1][i];
            out[3 * i + 2] = lanes[2][i];
        }
    }
    if (x < out_w)
        affine_row_uint8_t(s, sx + x, sy + x, out_w - x, 1, row + x * 3);
}

/* Whether affine_row_u8c3_avx2 computes a row of this image. */
static int affine_vector(const Source *s, int linear) {
    return use_vector && linear && s->type == 'B' && s->channels == 3 && s->height < (1 << 24)
           && s->width < (1 << 24) && s->height * s->width * 3 < ((Py_ssize_t)1 << 31);
}

/* The AVX2 clone rounds (floorf, roundf) in one instruction each; every result is the same. */
__attribute__((target_clones("avx2", "default")))
static void affine(const Source *s, void *dst, int out_type, Py_ssize_t out_h, Py_ssize_t out_w, const float *m,
                   int linear, float *sx, float *sy, float *row) {
    Py_ssize_t row_len = out_w * s->channels;
    int vector = affine_vector(s, linear);
    for (Py_ssize_t y = 0; y < out_h; y++) {
        float ys = (float)y + 0.5f;
        float ax = m[0] * 0.5f, ay = m[3] * 0.5f;
        ax = ax + m[2];
        ay = ay + m[5];
        float bx = m[1] * ys, by = m[4] * ys;
        if (use_vector)
            walk_rows(sx, sy, ax + bx, ay + by, m[0], m[3], out_w);
        else {
            walk_row(sx, ax + bx, m[0], out_w);
            walk_row(sy, ay + by, m[3], out_w);
        }
        switch (s->type) {
        case 'B':
            if (vector)
                affine_row_u8c3_avx2(s, sx, sy, out_w, row);
            else
                affine_row_uint8_t(s, sx, sy, out_w, linear, row);
            break;
        case 'b': affine_row_int8_t(s, sx, sy, out_w, linear, row); break;
        case 'H': affine_row_uint16_t(s, sx, sy, out_w, linear, row); break;
        case 'h': affine_row_int16_t(s, sx, sy, out_w, linear, row); break;
        case 'i': affine_row_int32_t(s, sx, sy, out_w, linear, row); break;
        default: affine_row_float(s, sx, sy, out_w, linear, row); break;
        }
        store_row(row, (char *)dst + y * row_len * type_size(out_type), row_len, out_type);
    }
}

static PyObject *warp_affine(PyObject *self, PyObject *args) {
    Py_buffer src, dst, matrix;
    Py_ssize_t height, width, channels, out_h, out_w;
    int in_type, out_type, linear, has_fill;
    double fill;
    if (!PyArg_ParseTuple(args, "y*w*nnnCnnCy*ppd", &src, &dst, &height, &width, &channels, &in_type, &out_h,
                          &out_w, &out_type, &matrix, &linear, &has_fill, &fill))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t in_size = type_size(in_type), out_size = type_size(out_type);
    if (in_size == 0 || out_size == 0) {
        PyErr_SetString(PyExc_ValueError, "warp_affine: the types are among 'B', 'b', 'H', 'h', 'i', 'f'");
    } else if (height < 1 || width < 1 || channels < 1 || out_h < 0 || out_w < 0) {
        PyErr_SetString(PyExc_ValueError, "warp_affine: bad shape");
    } else if (src.len != in_size * height * width * channels || dst.len != out_size * out_h * out_w * channels
               || matrix.len != 6 * (Py_ssize_t)sizeof(float)) {
        PyErr_SetString(PyExc_ValueError, "warp_affine: a buffer's size does not match the shapes");
    } else {
        float *scratch = PyMem_RawMalloc((2 + channels) * (out_w > 0 ? out_w : 1) * sizeof(float));
        if (scratch == NULL) {
            PyErr_NoMemory();
        } else {
            Source s = {src.buf, height, width, channels, in_type, has_fill, (float)fill};
            const float *m = matrix.buf;
            Py_BEGIN_ALLOW_THREADS
            affine(&s, dst.buf, out_type, out_h, out_w, m, linear, scratch, scratch + out_w,
                   scratch + 2 * out_w);
            Py_END_ALLOW_THREADS
            PyMem_RawFree(scratch);
            result = Py_NewRef(Py_None);
        }
    }
    PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
    PyBuffer_Release(&matrix);
    return result;
}

/* ----------------------------------------------------------------------------------------- perspective */

static inline int64_t floor_mod(int64_t a, int64_t n) {
    int64_t r = a % n;
    return r < 0 ? r + n : r;
}

/* OpenCV's borderInterpolate as remap.py's `_border` computes it; -1 (the fill value) for constant outside. */
static inline int64_t border_index(int64_t i, int64_t extent, int mode) {
    switch (mode) {
    case 0: return i >= 0 && i < extent ? i : -1;
    case 1: return clamp64(i, 0, extent - 1);
    case 4: return floor_mod(i, extent);
    default: break;
    }
    if (extent == 1)
        return 0;
    if (mode == 2) {
        int64_t folded = floor_mod(i, 2 * extent);
        return folded < extent ? folded : 2 * extent - 1 - folded;
    }
    int64_t period = 2 * extent - 2;
    int64_t magnitude = i == INT64_MIN ? INT64_MIN : (i < 0 ? -i : i);  /* numpy's abs wraps at INT64_MIN */
    int64_t folded = floor_mod(magnitude, period);
    return folded < extent ? folded : period - folded;
}

typedef struct {
    const void *src;
    Py_ssize_t height, width, channels;
    int type, border;
    const void *fill;
} Image;

/* remap.py's `_taps` at one point: the pixel (border folded), or the fill value where the border says so. */
static inline Py_ssize_t tap_index(const Image *s, int64_t iy, int64_t ix) {
    int64_t by = border_index(iy, s->height, s->border), bx = border_index(ix, s->width, s->border);
    if (by < 0 || bx < 0)
        return -1;
    return (by * s->width + bx) * s->channels;
}

/* remap.py's `_to_type` of one value: rint (halves to even), clamped to the type's range; NaN gives 0 (numpy's
 * cast on x86). float32 values are kept as they are. */
static inline float keep(float v) {
    return v;
}

static inline uint8_t to_uint8(float v) {
    float r = rintf(v);
    r = r < 0.0f ? 0.0f : (r > 255.0f ? 255.0f : r);
    return r == r ? (uint8_t)(int32_t)r : 0;
}

static inline uint16_t to_uint16(float v) {
    float r = rintf(v);
    r = r < 0.0f ? 0.0f : (r > 65535.0f ? 65535.0f : r);
    return r == r ? (uint16_t)(int32_t)r : 0;
}

/* One output pixel of the linear kernel for an image of type T: each tap the pixel at its offset or the fill
 * value (offset -1), interpolated p0 + a (p1 - p0) in one rounding along x, then y. */
#define BLEND(T, STORE)                                                                                      \
    static inline __attribute__((always_inline)) void blend_##T(                                             \
        const Image *s, Py_ssize_t i00, Py_ssize_t i01, Py_ssize_t i10, Py_ssize_t i11, float ax, float ay,  \
        T *out) {                                                                                            \
        const T *src = s->src, *fill = s->fill;                                                              \
        for (Py_ssize_t c = 0; c < s->channels; c++) {                                                       \
            float p00 = i00 < 0 ? (float)fill[c] : (float)src[i00 + c];                                      \
            float p01 = i01 < 0 ? (float)fill[c] : (float)src[i01 + c];                                      \
            float p10 = i10 < 0 ? (float)fill[c] : (float)src[i10 + c];                                      \
            float p11 = i11 < 0 ? (float)fill[c] : (float)src[i11 + c];                                      \
            float top = fmaf(ax, p01 - p00, p00), bottom = fmaf(ax, p11 - p10, p10);                         \
            out[c] = STORE(fmaf(ay, bottom - top, top));                                                     \
        }                                                                                                    \
    }
BLEND(uint8_t, to_uint8)
BLEND(uint16_t, to_uint16)
BLEND(float, keep)

/* One output pixel of perspective: its source point (OpenCV's vector loop's products below column `vector`, its
 * scalar loop's after), then the nearest pixel or the linear blend, or the fill value. */
static inline __attribute__((always_inline)) void perspective_pixel(const Image *s, void *dst, Py_ssize_t out_w,
                                                                    const float *m, int linear, Py_ssize_t y,
                                                                    Py_ssize_t x, Py_ssize_t vector,
                                                                    const float *r, const float *c) {
    Py_ssize_t channels = s->channels, size = type_size(s->type);
    float xf = (float)x, X, Y, W;
    if (x < vector) {
        W = fmaf(m[6], xf, c[2]);
        X = fmaf(m[0], xf, c[0]);
        Y = fmaf(m[3], xf, c[1]);
    } else {
        W = fmaf(xf, m[6], r[2]) + m[8];
        X = fmaf(xf, m[0], r[0]) + m[2];
        Y = fmaf(xf, m[3], r[1]) + m[5];
    }
    float sx = X / W, sy = Y / W;
    Py_ssize_t o = (y * out_w + x) * channels;
    if (!linear) {
        Py_ssize_t index = tap_index(s, to_i64(rintf(sy)), to_i64(rintf(sx)));
        const char *from = index < 0 ? (const char *)s->fill : (const char *)s->src + index * size;
        memcpy((char *)dst + o * size, from, channels * size);
        return;
    }
    int64_t ix = to_i64(floorf(sx)), iy = to_i64(floorf(sy));
    if (s->border == 0 && (ix < -1 || ix >= s->width || iy < -1 || iy >= s->height)) {
        memcpy((char *)dst + o * size, s->fill, channels * size);
        return;
    }
    float ax = sx - (float)ix, ay = sy - (float)iy;
    Py_ssize_t i00, i01, i10, i11;
    if (ix >= 0 && ix < s->width - 1 && iy >= 0 && iy < s->height - 1) {  /* inside: every border agrees */
        i00 = (iy * s->width + ix) * channels;
        i01 = i00 + channels;
        i10 = i00 + s->width * channels;
        i11 = i10 + channels;
    } else {
        i00 = tap_index(s, iy, ix);
        i01 = tap_index(s, iy, ix + 1);
        i10 = tap_index(s, iy + 1, ix);
        i11 = tap_index(s, iy + 1, ix + 1);
    }
    if (s->type == 'B')
        blend_uint8_t(s, i00, i01, i10, i11, ax, ay, (uint8_t *)dst + o);
    else if (s->type == 'H')
        blend_uint16_t(s, i00, i01, i10, i11, ax, ay, (uint16_t *)dst + o);
    else
        blend_float(s, i00, i01, i10, i11, ax, ay, (float *)dst + o);
}

/* perspective's row of a three-channel uint8 image, linear, eight pixels a step below column `vector` where their
 * 2x2 blocks all lie inside the image: the same fmaf, division, floor and blend per lane, the taps gathered as
 * affine_row_u8c3_avx2 does, the result rounded (rint) and clamped as to_uint8. The other pixels as before. */
__attribute__((target("avx2,fma")))
static void perspective_row_u8c3_avx2(const Image *s, uint8_t *dst, Py_ssize_t out_w, const float *m, Py_ssize_t y,
                                      Py_ssize_t vector, const float *r, const float *c) {
    const uint8_t *src = s->src;
    const __m256 zero = _mm256_setzero_ps(), top_value = _mm256_set1_ps(255.0f);
    const __m256 x_end = _mm256_set1_ps((float)(s->width - 1)), y_end = _mm256_set1_ps((float)(s->height - 1));
    const __m256 m0 = _mm256_set1_ps(m[0]), m3 = _mm256_set1_ps(m[3]), m6 = _mm256_set1_ps(m[6]);
    const __m256 cx = _mm256_set1_ps(c[0]), cy = _mm256_set1_ps(c[1]), cw = _mm256_set1_ps(c[2]);
    const __m256i stride = _mm256_set1_epi32((int)(s->width * 3));
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    int32_t lanes[3][8] __attribute__((aligned(32)));
    Py_ssize_t x = 0;
    for (; x + 8 <= vector; x += 8) {
        __m256 xf = _mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_set1_epi32((int)x), iota));
        __m256 W = _mm256_fmadd_ps(m6, xf, cw), X = _mm256_fmadd_ps(m0, xf, cx), Y = _mm256_fmadd_ps(m3, xf, cy);
        __m256 sx = _mm256_div_ps(X, W), sy = _mm256_div_ps(Y, W);
        __m256 fx = _mm256_floor_ps(sx), fy = _mm256_floor_ps(sy);
        if (!taps_inside(fx, fy, x_end, y_end)) {
            for (Py_ssize_t i = x; i < x + 8; i++)
                perspective_pixel(s, dst, out_w, m, 1, y, i, vector, r, c);
            continue;
        }
        __m256 ax = _mm256_sub_ps(sx, fx), ay = _mm256_sub_ps(sy, fy);
        Taps8 taps = gather_taps(src, fx, fy, stride);
        for (int k = 0; k < 3; k++) {
            __m256 p[4];
            tap_channel(&taps, k, p);
            __m256 top = _mm256_fmadd_ps(ax, _mm256_sub_ps(p[1], p[0]), p[0]);
            __m256 bottom = _mm256_fmadd_ps(ax, _mm256_sub_ps(p[3], p[2]), p[2]);
            __m256 v = _mm256_fmadd_ps(ay, _mm256_sub_ps(bottom, top), top);
            v = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            v = _mm256_min_ps(_mm256_max_ps(v, zero), top_value);
            _mm256_store_si256((__m256i *)lanes[k], _mm256_cvtps_epi32(v));
        }
        uint8_t *out = dst + (y * out_w + x) * 3;
        for (int i = 0; i < 8; i++) {
            out[3 * i] = (uint8_t)lanes[0][i];
            out[3 * i + 1] = (uint8_t)lanes[1][i];
            out[3 * i + 2] = (uint8_t)lanes[2][i];
        }
    }
    for (; x < out_w; x++)
        perspective_pixel(s, dst, out_w, m, 1, y, x, vector, r, c);
}

/* fmaf is correctly rounded with or without the FMA instruction: the clone only makes it one instruction. */
__attribute__((target_clones("fma", "default")))
static void perspective(const Image *s, void *dst, Py_ssize_t out_h, Py_ssize_t out_w, const float *m, int linear) {
    Py_ssize_t vector = out_w - out_w % 16;  /* OpenCV's AVX2 loop: 16 columns a step; the rest scalar */
    int rows_in_vector = use_vector && linear && s->type == 'B' && s->channels == 3 && s->height < (1 << 24)
                         && s->width < (1 << 24) && s->height * s->width * 3 < ((Py_ssize_t)1 << 31);
    for (Py_ssize_t y = 0; y < out_h; y++) {
        float yf = (float)y;
        float r[3] = {yf * m[1], yf * m[4], yf * m[7]};
        float c[3] = {r[0] + m[2], r[1] + m[5], r[2] + m[8]};
        if (rows_in_vector) {
            perspective_row_u8c3_avx2(s, dst, out_w, m, y, vector, r, c);
            continue;
        }
        for (Py_ssize_t x = 0; x < out_w; x++)
            perspective_pixel(s, dst, out_w, m, linear, y, x, vector, r, c);
    }
}

static PyObject *warp_perspective(PyObject *self, PyObject *args) {
    Py_buffer src, dst, matrix, fill;
    Py_ssize_t height, width, channels, out_h, out_w;
    int type, linear, border;
    if (!PyArg_ParseTuple(args, "y*w*nnnCnny*piy*", &src, &dst, &height, &width, &channels, &type, &out_h,
                          &out_w, &matrix, &linear, &border, &fill))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t size = type == 'B' || type == 'H' || type == 'f' ? type_size(type) : 0;
    if (size == 0) {
        PyErr_SetString(PyExc_ValueError, "warp_perspective: the type is one of 'B', 'H', 'f'");
    } else if (height < 1 || width < 1 || channels < 1 || out_h < 0 || out_w < 0 || border < 0 || border > 4) {
        PyErr_SetString(PyExc_ValueError, "warp_perspective: bad shape or border");
    } else if (src.len != size * height * width * channels || dst.len != size * out_h * out_w * channels
               || matrix.len != 9 * (Py_ssize_t)sizeof(float) || fill.len != size * channels) {
        PyErr_SetString(PyExc_ValueError, "warp_perspective: a buffer's size does not match the shapes");
    } else {
        Image s = {src.buf, height, width, channels, type, border, fill.buf};
        const float *m = matrix.buf;
        Py_BEGIN_ALLOW_THREADS
        perspective(&s, dst.buf, out_h, out_w, m, linear);
        Py_END_ALLOW_THREADS
        result = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
    PyBuffer_Release(&matrix);
    PyBuffer_Release(&fill);
    return result;
}

static PyObject *set_vector(PyObject *self, PyObject *arg) {
    int on = PyObject_IsTrue(arg);
    if (on < 0)
        return NULL;
    int was = use_vector;
    __builtin_cpu_init();
    use_vector = on && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return PyBool_FromLong(was);
}

static PyMethodDef methods[] = {
    {"set_vector", set_vector, METH_O,
     "Whether the AVX2 + FMA versions run (where the CPU has them); returns the previous setting."},
    {"warp_affine", warp_affine, METH_VARARGS, "DALI's WarpCPU sampler on one HWC image (see the file)."},
    {"warp_perspective", warp_perspective, METH_VARARGS,
     "OpenCV's float32 warpPerspective as DALI's CPU operator calls it, on one HWC image (see the file)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native_warp", NULL, -1, methods};

PyMODINIT_FUNC PyInit__native_warp(void) {
    __builtin_cpu_init();
    use_vector = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return PyModule_Create(&module);
}
