/* DALI's per-sample numerics of the colour, effects and filter operators in native code (one function per step,
 * each equal bit for bit to the torch/numpy version it replaces, which stays as the fallback and the test's
 * reference). Why: in torch each of these steps is a dozen full-image temporaries (a float copy, one product
 * and one sum per term, the rounding's four passes, a float64 clip); here it is one pass with the GIL released.
 * Compiled with -ffp-contract=off: every float32 product and sum is rounded on its own, as torch and numpy do.
 *
 * Element types: 'B' uint8 or 'f' float32. A float32 value stored to uint8 is ConvertSat: C's round (halves
 * away from zero), clamped to [0, 255], NaN giving 0 (what numpy's cast of a clipped NaN gives on x86).
 *
 *   linear_color(src, dst, count, in_type, out_type, matrix, offset)
 *     count RGB pixels; out[k] = ((in[0] * m[k][0] + in[1] * m[k][1]) + in[2] * m[k][2]) + offset
 *     matrix: 9 float32, row-major (colour.py's _linear_color)
 *   scale_shift(src, dst, count, in_type, out_type, multiplier, addend)
 *     count values; out = in * multiplier + addend (colour.py's brightness_contrast)
 *   sample(src, dst, height, width, channels, type, src_x, src_y, fill, linear)
 *     src_x, src_y: out_h * out_w float32 source points; dst: out_h * out_w * channels of `type`
 *     nearest: the pixel the point falls in; linear: between pixel centres; taps outside read `fill`
 *     (effects.py's sample_at)
 *   water(src, dst, height, width, channels, type, (ampl_x, ampl_y, freq_x, freq_y, phase_x, phase_y), fill, linear)
 *     sample at (x + ampl_x sinf(freq_x y + phase_x), y + ampl_y cosf(freq_y x + phase_y)), float32, same size
 *   sphere(src, dst, height, width, channels, type, fill, linear)
 *     sample at the pixel centres pushed out radially (effects.py's sphere_points), same size
 *   correlate(src, dst, outer, extent, inner, in_type, window, scale)
 *     one 1-D pass along the middle axis of an (outer, extent, inner) array to float32: the window's taps
 *     summed first to last from 0.0f, reflect-101 borders, times `scale` unless it is None (filters.py's
 *     correlate_axis)
 *   grid_mask(src, dst, height, width, channels, type, ca, sa, sx, sy, ratio)
 *     HWC; the pixels remap.py's grid_keep drops multiplied by zero (ca, sa, sx, sy: its float32 constants)
 *   blur_hwc(src, dst, height, width, channels, in_type, out_type, window_h, window_w)
 *     correlate along W with window_w, then along H with window_h (unscaled), to out_type: filters.py's separable
 *     and _finish on an HWC image, in one pass over its rows
 *   to_uint8(src, dst, count)
 *     float32 to uint8 by ConvertSat (engine's convert_sat)
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* The whole module is compiled without trapping math (no value changes: only whether a comparison with NaN may
 * raise the invalid flag), so that the compiler may turn float selects into vector blends. */
#pragma GCC optimize("no-trapping-math")

/* The loops are also built for AVX2, chosen at load time where the processor has it: wider vectors, the same
 * values (IEEE float32 operations one by one either way; no fused multiply-adds, -ffp-contract=off). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define VECTOR_LOOP __attribute__((target_clones("avx2", "default")))
#else
#define VECTOR_LOOP
#endif

/* C's round of a float clamped to [0, 255]; NaN gives 0. Clamping first keeps the result (rounding is monotonic;
 * a NaN fails the first comparison); for 0 <= c <= 255, c - trunc(c) is exact, so the half test is exact. */
static inline uint8_t sat_u8(float v) {
    float c = v > 0.0f ? v : 0.0f;
    c = c < 255.0f ? c : 255.0f;
    int32_t t = (int32_t)c;
    t += (c - (float)t) >= 0.5f;
    return (uint8_t)t;
}

/* sat_u8 on a run of values, 16 at a time with SSE2 where there is SSE2 (the compiler turns the scalar one into
 * branches): maxps(v, 0) gives 0 for NaN (it returns its second operand then), as sat_u8 does. */
static void floats_to_u8(const float *in, uint8_t *out, Py_ssize_t count) {
    Py_ssize_t i = 0;
#ifdef __SSE2__
    const __m128 zero = _mm_setzero_ps(), top = _mm_set1_ps(255.0f), half = _mm_set1_ps(0.5f);
    for (; i + 16 <= count; i += 16) {
        __m128i t[4];
        for (int j = 0; j < 4; j++) {
            __m128 c = _mm_min_ps(_mm_max_ps(_mm_loadu_ps(in + i + 4 * j), zero), top);
            __m128i whole = _mm_cvttps_epi32(c);
            __m128 up = _mm_cmpge_ps(_mm_sub_ps(c, _mm_cvtepi32_ps(whole)), half);
            t[j] = _mm_sub_epi32(whole, _mm_castps_si128(up));  /* up is -1 where true */
        }
        __m128i lo = _mm_packs_epi32(t[0], t[1]), hi = _mm_packs_epi32(t[2], t[3]);
        _mm_storeu_si128((__m128i *)(out + i), _mm_packus_epi16(lo, hi));
    }
#endif
    for (; i < count; i++)
        out[i] = sat_u8(in[i]);
}

static inline float load(const void *buf, int type, Py_ssize_t i) {
    return type == 'B' ? (float)((const uint8_t *)buf)[i] : ((const float *)buf)[i];
}

static inline void store(void *buf, int type, Py_ssize_t i, float v) {
    if (type == 'B')
        ((uint8_t *)buf)[i] = sat_u8(v);
    else
        ((float *)buf)[i] = v;
}

static Py_ssize_t type_size(int type) {
    return type == 'B' ? 1 : (type == 'f' ? 4 : 0);
}

static int check_types(const char *name, int a, int b) {
    if (type_size(a) == 0 || type_size(b) == 0) {
        PyErr_Format(PyExc_ValueError, "%s: the types are 'B' (uint8) or 'f' (float32)", name);
        return 0;
    }
    return 1;
}

static int check_sizes(const char *name, int ok) {
    if (!ok)
        PyErr_Format(PyExc_ValueError, "%s: a buffer's size does not match the shapes", name);
    return ok;
}

/* ------------------------------------------------------------------------------------------- linear_color */

/* The matrix is read into locals (a uint8 store could alias it otherwise) so that the loop vectorises. */
#define LINEAR(TI, TO, STORE)                                                                                       \
    VECTOR_LOOP                                                                                                     \
    static void linear_##TI##_##TO(const TI *restrict in, TO *restrict out, Py_ssize_t count,                       \
                                   const float *m, float offset) {                                                  \
        const float m0 = m[0], m1 = m[1], m2 = m[2], m3 = m[3], m4 = m[4], m5 = m[5], m6 = m[6], m7 = m[7],         \
                    m8 = m[8];                                                                                      \
        for (Py_ssize_t i = 0; i < count; i++) {                                                                    \
            float r = (float)in[3 * i], g = (float)in[3 * i + 1], b = (float)in[3 * i + 2];                         \
            float a0 = r * m0, a1 = r * m3, a2 = r * m6;                                                            \
            a0 = a0 + g * m1;                                                                                       \
            a1 = a1 + g * m4;                                                                                       \
            a2 = a2 + g * m7;                                                                                       \
            a0 = a0 + b * m2;                                                                                       \
            a1 = a1 + b * m5;                                                                                       \
            a2 = a2 + b * m8;                                                                                       \
            out[3 * i] = STORE(a0 + offset);                                                                        \
            out[3 * i + 1] = STORE(a1 + offset);                                                                    \
            out[3 * i + 2] = STORE(a2 + offset);                                                                    \
        }                                                                                                           \
    }
#define AS_IS(v) (v)
LINEAR(uint8_t, float, AS_IS)
LINEAR(float, float, AS_IS)

/* To uint8 through a float32 block: both halves vectorise (one loop converting as it goes does not). */
#define LINEAR_U8(TI)                                                                                               \
    static void linear_##TI##_uint8_t(const TI *in, uint8_t *out, Py_ssize_t count, const float *m,                 \
                                      float offset) {                                                               \
        float block[3 * 512];                                                                                       \
        for (Py_ssize_t i = 0; i < count; i += 512) {                                                               \
            Py_ssize_t n = count - i < 512 ? count - i : 512;                                                       \
            linear_##TI##_float(in + 3 * i, block, n, m, offset);                                                   \
            floats_to_u8(block, out + 3 * i, 3 * n);                                                                \
        }                                                                                                           \
    }
LINEAR_U8(uint8_t)
LINEAR_U8(float)

static PyObject *linear_color(PyObject *self, PyObject *args) {
    Py_buffer src, dst, matrix;
    Py_ssize_t count;
    int in_type, out_type;
    float offset;
    if (!PyArg_ParseTuple(args, "y*w*nCCy*f", &src, &dst, &count, &in_type, &out_type, &matrix, &offset))
        return NULL;
    PyObject *result = NULL;
    if (!check_types("linear_color", in_type, out_type)) {
    } else if (count < 0) {
        PyErr_SetString(PyExc_ValueError, "linear_color: count is negative");
    } else if (check_sizes("linear_color", src.len == type_size(in_type) * 3 * count
                           && dst.len == type_size(out_type) * 3 * count
                           && matrix.len == (Py_ssize_t)sizeof(float) * 9)) {
        const float *m = matrix.buf;
        Py_BEGIN_ALLOW_THREADS
        if (in_type == 'B' && out_type == 'B')
            linear_uint8_t_uint8_t(src.buf, dst.buf, count, m, offset);
        else if (in_type == 'B')
            linear_uint8_t_float(src.buf, dst.buf, count, m, offset);
        else if (out_type == 'B')
            linear_float_uint8_t(src.buf, dst.buf, count, m, offset);
        else
            linear_float_float(src.buf, dst.buf, count, m, offset);
        Py_END_ALLOW_THREADS
        result = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
    PyBuffer_Release(&matrix);
    return result;
}

/* -------------------------------------------------------------------------------------------- scale_shift */

#define AFFINE(TI, TO, STORE)                                                                                       \
    VECTOR_LOOP                                                                                                     \
    static void affine_##TI##_##TO(const TI *in, TO *out, Py_ssize_t count, float mul, float add) {                 \
        for (Py_ssize_t i = 0; i < count; i++)                                                                      \
            out[i] = STORE((float)in[i] * mul + add);                                                               \
    }
AFFINE(uint8_t, float, AS_IS)
AFFINE(float, float, AS_IS)

#define AFFINE_U8(TI)                                                                                               \
    static void affine_##TI##_uint8_t(const TI *in, uint8_t *out, Py_ssize_t count, float mul, float add) {         \
        float block[2048];                                                                                          \
        for (Py_ssize_t i = 0; i < count; i += 2048) {                                                              \
            Py_ssize_t n = count - i < 2048 ? count - i : 2048;                                                     \
            affine_##TI##_float(in + i, block, n, mul, add);                                                        \
            floats_to_u8(block, out + i, n);                                                                        \
        }                                                                                                           \
    }
AFFINE_U8(uint8_t)
AFFINE_U8(float)

static PyObject *scale_shift(PyObject *self, PyObject *args) {
    Py_buffer src, dst;
    Py_ssize_t count;
    int in_type, out_type;
    float mul, add;
    if (!PyArg_ParseTuple(args, "y*w*nCCff", &src, &dst, &count, &in_type, &out_type, &mul, &add))
        return NULL;
    PyObject *result = NULL;
    if (!check_types("scale_shift", in_type, out_type)) {
    } else if (count < 0) {
        PyErr_SetString(PyExc_ValueError, "scale_shift: count is negative");
    } else if (check_sizes("scale_shift", src.len == type_size(in_type) * count
                           && dst.len == type_size(out_type) * count)) {
        Py_BEGIN_ALLOW_THREADS
        if (in_type == 'B' && out_type == 'B')
            affine_uint8_t_uint8_t(src.buf, dst.buf, count, mul, add);
        else if (in_type == 'B')
            affine_uint8_t_float(src.buf, dst.buf, count, mul, add);
        else if (out_type == 'B')
            affine_float_uint8_t(src.buf, dst.buf, count, mul, add);
        else
            affine_float_float(src.buf, dst.buf, count, mul, add);
        Py_END_ALLOW_THREADS
        result = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
    return result;
}

/* ------------------------------------------------------------------------------------------------- sample */

/* floor(v) as an index in [-2, extent + 1]: every value outside (NaN included) reads the fill, as do the
 * ones torch's long conversion gives them. */
static inline Py_ssize_t cell(float v, Py_ssize_t extent) {
    float f = floorf(v);
    if (!(f >= -2.0f))
        return -2;
    if (f > (float)(extent + 1))
        return extent + 1;
    return (Py_ssize_t)f;
}

/* The samplers index pixels with int32 and compare coordinates in float32: sides up to 2**24 (exact in float32),
 * fewer than 2**31 pixels. */
static int small_image(Py_ssize_t height, Py_ssize_t width) {
    return height <= (1 << 24) && width <= (1 << 24) && height * width <= INT32_MAX;
}

/* Nearest: each output pixel a copy of the pixel its point falls in, or the fill (already of the type). The
 * pixel indices of a run of points first, in a vector loop (floors, bounds, int32 index; -1 outside: the
 * image has fewer than 2**31 pixels), then the copies. */
#define NEAREST(T)                                                                                                  \
    VECTOR_LOOP                                                                                                     \
    static void nearest_##T(const T *src, T *dst, Py_ssize_t height, Py_ssize_t width, Py_ssize_t channels,         \
                            const float *xs, const float *ys, Py_ssize_t count, T fill) {                           \
        int32_t index[256];                                                                                         \
        const float h = (float)height, w = (float)width;                                                            \
        const int32_t w32 = (int32_t)width;                                                                         \
        for (Py_ssize_t i0 = 0; i0 < count; i0 += 256) {                                                            \
            const int32_t n = (int32_t)(count - i0 < 256 ? count - i0 : 256);                                       \
            for (int32_t j = 0; j < n; j++) {                                                                       \
                const float fy = floorf(ys[i0 + j]), fx = floorf(xs[i0 + j]);                                       \
                const int inside = (fy >= 0.0f) & (fy < h) & (fx >= 0.0f) & (fx < w);                               \
                const int32_t y = (int32_t)(inside ? fy : 0.0f), x = (int32_t)(inside ? fx : 0.0f);                 \
                index[j] = inside ? y * w32 + x : -1;                                                               \
            }                                                                                                       \
            T *out = dst + i0 * channels;                                                                           \
            for (int32_t j = 0; j < n; j++, out += channels) {                                                      \
                if (index[j] >= 0) {                                                                                \
                    const T *in = src + (Py_ssize_t)index[j] * channels;                                            \
                    for (Py_ssize_t c = 0; c < channels; c++)                                                       \
                        out[c] = in[c];                                                                             \
                } else {                                                                                            \
                    for (Py_ssize_t c = 0; c < channels; c++)                                                       \
                        out[c] = fill;                                                                              \
                }                                                                                                   \
            }                                                                                                       \
        }                                                                                                           \
    }
NEAREST(uint8_t)
NEAREST(float)

VECTOR_LOOP
static void sample_run(const void *src, void *dst, Py_ssize_t height, Py_ssize_t width, Py_ssize_t channels,
                       int type, const float *xs, const float *ys, Py_ssize_t count, float fill, int linear) {
    if (!linear) {
        if (type == 'B')
            nearest_uint8_t(src, dst, height, width, channels, xs, ys, count, sat_u8(fill));
        else
            nearest_float(src, dst, height, width, channels, xs, ys, count, fill);
        return;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        float fx = xs[i] - 0.5f, fy = ys[i] - 0.5f;
        float qx = fx - floorf(fx), qy = fy - floorf(fy);
        float px = 1.0f - qx;
        Py_ssize_t y0 = cell(fy, height), x0 = cell(fx, width);
        int in_y0 = y0 >= 0 && y0 < height, in_y1 = y0 + 1 >= 0 && y0 + 1 < height;
        int in_x0 = x0 >= 0 && x0 < width, in_x1 = x0 + 1 >= 0 && x0 + 1 < width;
        for (Py_ssize_t c = 0; c < channels; c++) {
            float t00 = in_y0 && in_x0 ? load(src, type, (y0 * width + x0) * channels + c) : fill;
            float t01 = in_y0 && in_x1 ? load(src, type, (y0 * width + x0 + 1) * channels + c) : fill;
            float t10 = in_y1 && in_x0 ? load(src, type, ((y0 + 1) * width + x0) * channels + c) : fill;
            float t11 = in_y1 && in_x1 ? load(src, type, ((y0 + 1) * width + x0 + 1) * channels + c) : fill;
            float top = t00 * px + t01 * qx;
            float bottom = t10 * px + t11 * qx;
            store(dst, type, i * channels + c, top + (bottom - top) * qy);
        }
    }
}

static PyObject *sample(PyObject *self, PyObject *args) {
    Py_buffer src, dst, xs, ys;
    Py_ssize_t height, width, channels;
    int type, linear;
    float fill;
    if (!PyArg_ParseTuple(args, "y*w*nnnCy*y*fp", &src, &dst, &height, &width, &channels, &type, &xs, &ys, &fill,
                          &linear))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t count = xs.len / (Py_ssize_t)sizeof(float);
    if (!check_types("sample", type, type)) {
    } else if (height < 0 || width < 0 || channels < 1 || !small_image(height, width)) {
        PyErr_SetString(PyExc_ValueError, "sample: bad shape");
    } else if (check_sizes("sample", src.len == type_size(type) * height * width * channels
                           && xs.len % (Py_ssize_t)sizeof(float) == 0 && ys.len == xs.len
                           && dst.len == type_size(type) * count * channels)) {
        Py_BEGIN_ALLOW_THREADS
        sample_run(src.buf, dst.buf, height, width, channels, type, xs.buf, ys.buf, count, fill, linear);
        Py_END_ALLOW_THREADS
        result = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
    PyBuffer_Release(&xs);
    PyBuffer_Release(&ys);
    return result;
}

/* fn.water and fn.sphere: each output row's source points made here (as effects.py's water_points and
 * sphere_points make them, in float32 op by op), then sampled as above. */
VECTOR_LOOP
static int displace(const void *src, void *dst, Py_ssize_t height, Py_ssize_t width, Py_ssize_t channels, int type,
                    const float *waves, float fill, int linear) {
    float *xs = PyMem_RawMalloc(sizeof(float) * (2 * width + 1));
    if (xs == NULL)
        return -1;
    float *ys = xs + width;
    float *wave_x = NULL, *wave_y = NULL;
    if (waves != NULL) { /* water: ampl * sinf(freq * i + phase), the C library's sinf/cosf as DALI calls them */
        wave_x = PyMem_RawMalloc(sizeof(float) * (height + width + 1));
        if (wave_x == NULL) {
            PyMem_RawFree(xs);
            return -1;
        }
        wave_y = wave_x + height;
        for (Py_ssize_t y = 0; y < height; y++)
            wave_x[y] = waves[0] * sinf(waves[2] * (float)y + waves[4]);
        for (Py_ssize_t x = 0; x < width; x++)
            wave_y[x] = waves[1] * cosf(waves[3] * (float)x + waves[5]);
    }
    const float mid_x = (float)(width * 0.5), mid_y = (float)(height * 0.5);
    const float d = (float)(int64_t)(mid_x > mid_y ? mid_x : mid_y);
    char *out = dst;
    for (Py_ssize_t y = 0; y < height; y++) {
        if (waves != NULL) { /* water: x + ampl_x sin(...) of the row, y + ampl_y cos(...) of the column */
            const float wave = wave_x[y], row = (float)y;
            for (int32_t x = 0; x < (int32_t)width; x++) { /* an int32 index: the conversion vectorises */
                xs[x] = (float)x + wave;
                ys[x] = row + wave_y[x];
            }
        } else { /* sphere: the pixel centre pushed out radially */
            const float ty = ((float)y + 0.5f) - mid_y;
            Py_ssize_t x = 0;
#ifdef __SSE2__
            /* four at a time: sqrtps is correctly rounded, as sqrtf (which the compiler keeps scalar for errno) */
            const __m128 half = _mm_set1_ps(0.5f), mx = _mm_set1_ps(mid_x), my = _mm_set1_ps(mid_y);
            const __m128 vty = _mm_set1_ps(ty), tyty = _mm_set1_ps(ty * ty), dv = _mm_set1_ps(d);
            for (; x + 4 <= width; x += 4) {
                const int32_t i = (int32_t)x;
                const __m128 tx = _mm_sub_ps(_mm_add_ps(_mm_cvtepi32_ps(_mm_setr_epi32(i, i + 1, i + 2, i + 3)),
                                                        half), mx);
                const __m128 rad = _mm_div_ps(_mm_sqrt_ps(_mm_add_ps(_mm_mul_ps(tx, tx), tyty)), dv);
                _mm_storeu_ps(xs + x, _mm_add_ps(mx, _mm_mul_ps(rad, tx)));
                _mm_storeu_ps(ys + x, _mm_add_ps(my, _mm_mul_ps(rad, vty)));
            }
#endif
            for (; x < width; x++) {
                const float tx = ((float)x + 0.5f) - mid_x;
                const float rad = sqrtf(tx * tx + ty * ty) / d;
                xs[x] = mid_x + rad * tx;
                ys[x] = mid_y + rad * ty;
            }
        }
        sample_run(src, out + y * width * channels * type_size(type), height, width, channels, type, xs, ys, width,
                   fill, linear);
    }
    PyMem_RawFree(wave_x);
    PyMem_RawFree(xs);
    return 0;
}

static PyObject *displacement(PyObject *args, int water) {
    Py_buffer src, dst;
    Py_ssize_t height, width, channels;
    int type, linear, ok;
    float fill, waves[6]; /* ampl_x, ampl_y, freq_x, freq_y, phase_x, phase_y */
    if (water)
        ok = PyArg_ParseTuple(args, "y*w*nnnC(ffffff)fp", &src, &dst, &height, &width, &channels, &type, &waves[0],
                              &waves[1], &waves[2], &waves[3], &waves[4], &waves[5], &fill, &linear);
    else
        ok = PyArg_ParseTuple(args, "y*w*nnnCfp", &src, &dst, &height, &width, &channels, &type, &fill, &linear);
    if (!ok)
        return NULL;
    PyObject *result = NULL;
    const char *name = water ? "water" : "sphere";
    if (!check_types(name, type, type)) {
    } else if (height < 0 || width < 0 || channels < 1 || !small_image(height, width)) {
        PyErr_Format(PyExc_ValueError, "%s: bad shape", name);
    } else if (check_sizes(name, src.len == type_size(type) * height * width * channels && dst.len == src.len)) {
        int failed;
        Py_BEGIN_ALLOW_THREADS
        failed = displace(src.buf, dst.buf, height, width, channels, type, water ? waves : NULL, fill, linear);
        Py_END_ALLOW_THREADS
        result = failed ? PyErr_NoMemory() : Py_NewRef(Py_None);
    }
    PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
    return result;
}

static PyObject *water(PyObject *self, PyObject *args) { return displacement(args, 1); }

static PyObject *sphere(PyObject *self, PyObject *args) { return displacement(args, 0); }

/* ---------------------------------------------------------------------------------------------- correlate */

static inline Py_ssize_t reflect_101(Py_ssize_t i, Py_ssize_t extent) {
    if (extent == 1)
        return 0;
    Py_ssize_t period = 2 * extent - 2;
    Py_ssize_t folded = (i < 0 ? -i : i) % period;
    return folded < extent ? folded : period - folded;
}

/* Positions whose window lies inside the axis read shifted runs of the (extent * inner) slab, so a whole run of
 * them is one vectorisable loop per tap; the border positions read through reflect-101 indices. Each value is
 * still 0.0f + tap products added first tap to last. */
#define CORRELATE(TI)                                                                                               \
    VECTOR_LOOP                                                                                                     \
    static void correlate_##TI(const TI *in, float *out, Py_ssize_t outer, Py_ssize_t extent, Py_ssize_t inner,     \
                               const float *w, Py_ssize_t size, const Py_ssize_t *index, int scaled,                \
                               float scale) {                                                                       \
        Py_ssize_t radius = (size - 1) / 2;                                                                         \
        Py_ssize_t lo = radius < extent ? radius : extent, hi = extent - (size - 1 - radius);                       \
        if (hi < lo)                                                                                                \
            hi = lo;                                                                                                \
        for (Py_ssize_t o = 0; o < outer; o++) {                                                                    \
            const TI *slab = in + o * extent * inner;                                                               \
            float *dst = out + o * extent * inner;                                                                  \
            for (Py_ssize_t p = 0; p < extent; p++) {                                                               \
                if (p == lo && hi > lo)                                                                             \
                    p = hi; /* the inside positions: below */                                                       \
                if (p >= extent)                                                                                    \
                    break;                                                                                          \
                float *row_out = dst + p * inner;                                                                   \
                for (Py_ssize_t v = 0; v < inner; v++) {                                                            \
                    float acc = 0.0f;                                                                               \
                    for (Py_ssize_t k = 0; k < size; k++)                                                           \
                        acc = acc + w[k] * (float)slab[index[p * size + k] * inner + v];                            \
                    row_out[v] = acc;                                                                               \
                }                                                                                                   \
            }                                                                                                       \
            if (hi > lo) {                                                                                          \
                float *run = dst + lo * inner;                                                                      \
                Py_ssize_t n = (hi - lo) * inner;                                                                   \
                for (Py_ssize_t j0 = 0; j0 < n; j0 += 1024) { /* a chunk stays in the L1 cache over the taps */     \
                    Py_ssize_t j1 = n - j0 < 1024 ? n : j0 + 1024;                                                  \
                    for (Py_ssize_t j = j0; j < j1; j++)                                                            \
                        run[j] = 0.0f;                                                                              \
                    for (Py_ssize_t k = 0; k < size; k++) {                                                         \
                        const TI *src = slab + (lo - radius + k) * inner;                                           \
                        const float wk = w[k];                                                                      \
                        for (Py_ssize_t j = j0; j < j1; j++)                                                        \
                            run[j] = run[j] + wk * (float)src[j];                                                   \
                    }                                                                                               \
                }                                                                                                   \
            }                                                                                                       \
            if (scaled)                                                                                             \
                for (Py_ssize_t j = 0; j < extent * inner; j++)                                                     \
                    dst[j] = dst[j] * scale;                                                                        \
        }                                                                                                           \
    }
CORRELATE(uint8_t)
CORRELATE(float)

static PyObject *correlate(PyObject *self, PyObject *args) {
    Py_buffer src, dst, window;
    Py_ssize_t outer, extent, inner;
    int in_type;
    PyObject *scale_obj;
    if (!PyArg_ParseTuple(args, "y*w*nnnCy*O", &src, &dst, &outer, &extent, &inner, &in_type, &window, &scale_obj))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t *index = NULL;
    Py_ssize_t size = window.len / (Py_ssize_t)sizeof(float);
    int scaled = scale_obj != Py_None;
    float scale = scaled ? (float)PyFloat_AsDouble(scale_obj) : 1.0f;
    if (scaled && PyErr_Occurred()) {
    } else if (!check_types("correlate", in_type, 'f')) {
    } else if (outer < 0 || extent < 0 || inner < 0 || size < 1) {
        PyErr_SetString(PyExc_ValueError, "correlate: bad shape or an empty window");
    } else if (check_sizes("correlate", window.len % (Py_ssize_t)sizeof(float) == 0
                           && src.len == type_size(in_type) * outer * extent * inner
                           && dst.len == (Py_ssize_t)sizeof(float) * outer * extent * inner)) {
        Py_ssize_t radius = (size - 1) / 2;
        index = PyMem_RawMalloc(sizeof(Py_ssize_t) * (extent * size + 1));
        if (index == NULL) {
            PyErr_NoMemory();
        } else {
            Py_BEGIN_ALLOW_THREADS
            for (Py_ssize_t p = 0; p < extent; p++)
                for (Py_ssize_t k = 0; k < size; k++)
                    index[p * size + k] = reflect_101(p - radius + k, extent);
            if (in_type == 'B')
                correlate_uint8_t(src.buf, dst.buf, outer, extent, inner, window.buf, size, index, scaled, scale);
            else
                correlate_float(src.buf, dst.buf, outer, extent, inner, window.buf, size, index, scaled, scale);
            Py_END_ALLOW_THREADS
            result = Py_NewRef(Py_None);
        }
    }
    PyMem_RawFree(index);
    PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
    PyBuffer_Release(&window);
    return result;
}

/* -------------------------------------------------------------------------------------------- grid_mask */

/* Each pixel kept where either rotated grid coordinate's fraction reaches the ratio (remap.py's grid_keep, op by
 * op: fx = (-sx + y * -sa) + x * ca, fy = (-sy + y * ca) + x * sa), else multiplied by zero (as the torch
 * version multiplies by its mask: a float keeps a zero's sign, a NaN or an infinity gives NaN). */
/* An integer times 0 or 1 is a bit mask; a float is multiplied by zero (its sign kept, NaN from a NaN). */
#define MASKED_uint8_t(v, keep) ((uint8_t)((v) & (uint8_t)-(keep)))
#define MASKED_float(v, keep) ((keep) ? (v) : (v) * 0.0f)
#define GRID(T)                                                                                                 \
    VECTOR_LOOP                                                                                                 \
    static void grid_##T(const T *restrict src, T *restrict dst, Py_ssize_t height, Py_ssize_t width,           \
                         Py_ssize_t channels, float ca, float sa, float sx, float sy, float ratio,              \
                         uint8_t *restrict keep) {                                                              \
        for (Py_ssize_t y = 0; y < height; y++) {                                                               \
            const float row_x = -sx + (float)y * -sa, row_y = -sy + (float)y * ca;                              \
            for (int32_t x = 0; x < (int32_t)width; x++) { /* the row's mask first: one vector loop */          \
                const float fx = row_x + (float)x * ca, fy = row_y + (float)x * sa;                             \
                keep[x] = ((fx - floorf(fx)) >= ratio) | ((fy - floorf(fy)) >= ratio);                          \
            }                                                                                                   \
            const T *in = src + y * width * channels;                                                           \
            T *out = dst + y * width * channels;                                                                \
            if (channels == 3) /* RGB: a known channel count, unrolled */                                      \
                for (Py_ssize_t x = 0; x < width; x++)                                                          \
                    for (int c = 0; c < 3; c++)                                                                 \
                        out[x * 3 + c] = MASKED_##T(in[x * 3 + c], keep[x]);                                    \
            else                                                                                                \
                for (Py_ssize_t x = 0; x < width; x++)                                                          \
                    for (Py_ssize_t c = 0; c < channels; c++)                                                   \
                        out[x * channels + c] = MASKED_##T(in[x * channels + c], keep[x]);                      \
        }                                                                                                       \
    }
GRID(uint8_t)
GRID(float)

static PyObject *grid_mask(PyObject *self, PyObject *args) {
    Py_buffer src, dst;
    Py_ssize_t height, width, channels;
    int type;
    float ca, sa, sx, sy, ratio;
    if (!PyArg_ParseTuple(args, "y*w*nnnCfffff", &src, &dst, &height, &width, &channels, &type, &ca, &sa, &sx, &sy,
                          &ratio))
        return NULL;
    PyObject *result = NULL;
    if (!check_types("grid_mask", type, type)) {
    } else if (height < 0 || width < 0 || channels < 0 || width > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "grid_mask: bad shape");
    } else if (check_sizes("grid_mask", src.len == type_size(type) * height * width * channels
                           && dst.len == src.len)) {
        uint8_t *keep = PyMem_RawMalloc(width + 1);
        if (keep == NULL) {
            PyErr_NoMemory();
        } else {
            Py_BEGIN_ALLOW_THREADS
            if (type == 'B')
                grid_uint8_t(src.buf, dst.buf, height, width, channels, ca, sa, sx, sy, ratio, keep);
            else
                grid_float(src.buf, dst.buf, height, width, channels, ca, sa, sx, sy, ratio, keep);
            Py_END_ALLOW_THREADS
            PyMem_RawFree(keep);
            result = Py_NewRef(Py_None);
        }
    }
    PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
    return result;
}

/* ------------------------------------------------------------------------------------------- blur_hwc */

static Py_ssize_t *reflect_table(Py_ssize_t extent, Py_ssize_t size) {
    Py_ssize_t *index = PyMem_RawMalloc(sizeof(Py_ssize_t) * (extent * size + 1));
    if (index != NULL)
        for (Py_ssize_t p = 0; p < extent; p++)
            for (Py_ssize_t k = 0; k < size; k++)
                index[p * size + k] = reflect_101(p - (size - 1) / 2 + k, extent);
    return index;
}

/* Both passes of a 2-D HWC convolution (filters.py's separable: the row pass, then the column pass, unscaled)
 * row by row: the row passes of the input rows an output row reads are kept in size_h slots (a slot still
 * holding one of them is kept, the others are reused), and each output row sums its rows in tap order and is
 * stored at once. The same values as the two whole-image passes, with the image read once. */
VECTOR_LOOP
static void blur_rows(const void *src, void *dst, Py_ssize_t height, Py_ssize_t width, Py_ssize_t channels,
                      int in_type, int out_type, const float *wh, Py_ssize_t size_h, const float *ww,
                      Py_ssize_t size_w, const Py_ssize_t *index_h, const Py_ssize_t *index_w, float *slots,
                      Py_ssize_t *tags, Py_ssize_t *slot_of, char *kept, float *acc) {
    const Py_ssize_t row_len = width * channels;
    for (Py_ssize_t k = 0; k < size_h; k++)
        tags[k] = -1;
    for (Py_ssize_t y = 0; y < height; y++) {
        const Py_ssize_t *rows = index_h + y * size_h;
        for (Py_ssize_t s = 0; s < size_h; s++) { /* the slots that already hold a row this output row reads */
            kept[s] = 0;
            for (Py_ssize_t k = 0; k < size_h; k++)
                kept[s] |= tags[s] == rows[k];
        }
        for (Py_ssize_t k = 0; k < size_h; k++) {
            Py_ssize_t slot = -1;
            for (Py_ssize_t s = 0; s < size_h && slot < 0; s++)
                if (tags[s] == rows[k])
                    slot = s;
            if (slot < 0) { /* a slot no row of this output row is in (there are as many slots as taps) */
                for (Py_ssize_t s = 0; s < size_h && slot < 0; s++)
                    if (!kept[s])
                        slot = s;
                const float *row = (const float *)src + rows[k] * row_len;
                if (in_type == 'B') { /* the row to float32 once (exact), not once per tap */
                    const uint8_t *bytes = (const uint8_t *)src + rows[k] * row_len;
                    for (Py_ssize_t j = 0; j < row_len; j++)
                        acc[j] = (float)bytes[j];
                    row = acc;
                }
                correlate_float(row, slots + slot * row_len, 1, width, channels, ww, size_w, index_w, 0, 1.0f);
                tags[slot] = rows[k];
                kept[slot] = 1;
            }
            slot_of[k] = slot;
        }
        float *out = out_type == 'B' ? acc : (float *)dst + y * row_len;
        for (Py_ssize_t j = 0; j < row_len; j++)
            out[j] = 0.0f;
        for (Py_ssize_t k = 0; k < size_h; k++) {
            const float *in = slots + slot_of[k] * row_len;
            const float wk = wh[k];
            for (Py_ssize_t j = 0; j < row_len; j++)
                out[j] = out[j] + wk * in[j];
        }
        if (out_type == 'B')
            floats_to_u8(acc, (uint8_t *)dst + y * row_len, row_len);
    }
}

static PyObject *blur_hwc(PyObject *self, PyObject *args) {
    Py_buffer src, dst, window_h, window_w;
    Py_ssize_t height, width, channels;
    int in_type, out_type;
    if (!PyArg_ParseTuple(args, "y*w*nnnCCy*y*", &src, &dst, &height, &width, &channels, &in_type, &out_type,
                          &window_h, &window_w))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t size_h = window_h.len / (Py_ssize_t)sizeof(float), size_w = window_w.len / (Py_ssize_t)sizeof(float);
    Py_ssize_t count = height * width * channels;
    if (!check_types("blur_hwc", in_type, out_type)) {
    } else if (height < 0 || width < 0 || channels < 1 || size_h < 1 || size_w < 1) {
        PyErr_SetString(PyExc_ValueError, "blur_hwc: bad shape or an empty window");
    } else if (check_sizes("blur_hwc", window_h.len % (Py_ssize_t)sizeof(float) == 0
                           && window_w.len % (Py_ssize_t)sizeof(float) == 0
                           && src.len == type_size(in_type) * count && dst.len == type_size(out_type) * count)) {
        Py_ssize_t *index_h = reflect_table(height, size_h), *index_w = reflect_table(width, size_w);
        Py_ssize_t *tags = PyMem_RawMalloc(sizeof(Py_ssize_t) * 2 * size_h);
        char *kept = PyMem_RawMalloc(size_h);
        float *slots = PyMem_RawMalloc(sizeof(float) * (size_h + 1) * (width * channels + 1));
        if (index_h == NULL || index_w == NULL || tags == NULL || kept == NULL || slots == NULL) {
            PyErr_NoMemory();
        } else {
            Py_BEGIN_ALLOW_THREADS
            blur_rows(src.buf, dst.buf, height, width, channels, in_type, out_type, window_h.buf, size_h,
                      window_w.buf, size_w, index_h, index_w, slots, tags, tags + size_h, kept,
                      slots + size_h * width * channels);
            Py_END_ALLOW_THREADS
            result = Py_NewRef(Py_None);
        }
        PyMem_RawFree(kept);
        PyMem_RawFree(index_h);
        PyMem_RawFree(index_w);
        PyMem_RawFree(tags);
        PyMem_RawFree(slots);
    }
    PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
    PyBuffer_Release(&window_h);
    PyBuffer_Release(&window_w);
    return result;
}

/* ----------------------------------------------------------------------------------------------- to_uint8 */

static PyObject *to_uint8(PyObject *self, PyObject *args) {
    Py_buffer src, dst;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "y*w*n", &src, &dst, &count))
        return NULL;
    PyObject *result = NULL;
    if (count < 0) {
        PyErr_SetString(PyExc_ValueError, "to_uint8: count is negative");
    } else if (check_sizes("to_uint8", src.len == (Py_ssize_t)sizeof(float) * count && dst.len == count)) {
        Py_BEGIN_ALLOW_THREADS
        floats_to_u8(src.buf, dst.buf, count);
        Py_END_ALLOW_THREADS
        result = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
    return result;
}

static PyMethodDef methods[] = {
    {"linear_color", linear_color, METH_VARARGS, "A 3x3 colour matrix and an offset on RGB pixels."},
    {"scale_shift", scale_shift, METH_VARARGS, "in * multiplier + addend on every value."},
    {"sample", sample, METH_VARARGS, "An image read at float32 source points (nearest or linear)."},
    {"water", water, METH_VARARGS, "fn.water: an image displaced by two waves (nearest or linear)."},
    {"sphere", sphere, METH_VARARGS, "fn.sphere: an image seen through a sphere (nearest or linear)."},
    {"correlate", correlate, METH_VARARGS, "One 1-D reflect-101 correlation pass to float32."},
    {"grid_mask", grid_mask, METH_VARARGS, "fn.grid_mask: the pixels of a rotated grid's squares zeroed."},
    {"blur_hwc", blur_hwc, METH_VARARGS, "A separable 2-D convolution of an HWC image, row pass then column pass."},
    {"to_uint8", to_uint8, METH_VARARGS, "float32 to uint8 by ConvertSat."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native_effects", NULL, -1, methods};

PyMODINIT_FUNC PyInit__native_effects(void) { return PyModule_Create(&module); }
