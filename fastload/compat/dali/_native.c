/* DALI's per-sample numerics in native code, where torch's op-by-op version costs most of a pipeline's time
 * (one function per operator step; each equal bit for bit to the torch version it replaces, which stays as
 * the fallback and the test's reference).
 *
 * resample: one separable pass of DALI's CPU resampler over a float32 HWC image. Why: fn.resize outside the fused path (detection, geometry, any graph that is not the
 * classification chain) reproduces DALI's float32 resampler bit for bit (resampling.py). Written in
 * torch, a pass is one gather, one multiply and one add over the whole image per filter tap -- a
 * dozen full-image temporaries for a downscale -- and it was most of a detection pipeline's time.
 * Here each output value is its taps' products added in tap order in float32 (compiled with
 * -ffp-contract=off: no fused multiply-add, each product rounded, then each sum, as DALI's kernel and
 * the torch version do), in one pass, with the GIL released.
 *
 *   resample(src, dst, height, width, channels, axis, first, weights, out_size, support, lo, hi)
 *     src: height * width * channels float32 (C-contiguous HWC)
 *     dst: writable float32, the same shape with axis `axis` (0 rows, 1 columns) of out_size
 *     first: out_size int64, the first input index of each output position
 *     weights: out_size * support float32, each position's tap weights in tap order
 *     lo, hi: input indices are clamped to [lo, hi]
 *
 * resample_uint8: the same pass with src uint8 (each value read as float32, exactly): a uint8 image's first
 * pass reads it directly instead of after a float32 copy of the whole image (torch's uint8 -> float32
 * conversion cost as much as a pass).
 *
 * axis_weights: each output position's first input index and normalised tap weights (DALI's
 * InitializeResamplingFilter, resampling.py's _axis_weights): positions i * scale + start, the filter table
 * linearly interpolated at each tap, the taps summed in order and divided by the sum, all in float32. Why: in
 * numpy it is two dozen small array operations per axis, as long as a whole pass for a small image.
 *
 *   axis_weights(coeffs, anchor, fscale, support, out_size, origin, scale, first, weights)
 *     coeffs: the float32 table; anchor, fscale, origin, scale: float32 values (given as floats)
 *     first: writable out_size int64; weights: writable out_size * support float32
 *     the caller keeps the positions within int64 (|start| + out_size * |scale| small)
 *
 * round_saturate: the end of fn.resize for an integer image (resampling.py): the last pass's float32 values
 * rounded (halves to even where DALI's SSE stores wrote them, else away from zero as C's round) and saturated
 * to the output type (ConvertSat). Why: in torch that is a dozen full-image temporaries (two roundings, a
 * select, a float64 copy, a clip) and cost as much as the passes themselves.
 *
 *   round_saturate(src, dst, count, row_len, even, type)
 *     src: count float32 values, rows of row_len
 *     dst: writable, count values of `type` ('B' uint8, 'b' int8, 'H' uint16, 'h' int16)
 *     even: row_len bytes (1: that element of every row rounds halves to even) or empty (none does)
 *     NaN gives 0 (what numpy's cast of a clipped NaN gives on x86).
 *
 * normalize: fn.crop_mirror_normalize of a window inside a uint8 HWC image to float32 (crops.py): each value
 * (in - mean[c]) * inv_std[c] in float32 (two roundings, as torch's subtract then multiply), mirrored
 * horizontally if asked, written HWC or CHW. Why: the torch version cut the window into float64, built an
 * inside-the-image mask the same way, selected and permuted: four full-image passes for one.
 *
 *   normalize(src, dst, height, width, channels, y, x, h, w, mean, inv_std, chw, mirror)
 *     src: height * width * channels uint8 (C-contiguous HWC); the window [y, y + h) x [x, x + w) inside it
 *     dst: writable float32, h * w * channels
 *     mean, inv_std: channels float32 each
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>

/* The passes and the rounding compiled twice on x86-64, for AVX2 and for any CPU, the loader picking one at load
 * time: the same float operations lane by lane (no FMA: -ffp-contract=off), twice the lanes; a resize 1.8-2.5x
 * faster where AVX2 exists. */
#if defined(__x86_64__) && defined(__GNUC__)
#define WIDE_VECTORS __attribute__((target_clones("avx2", "default")))
#else
#define WIDE_VECTORS
#endif

static inline Py_ssize_t clamp(Py_ssize_t i, Py_ssize_t lo, Py_ssize_t hi) {
    return i < lo ? lo : (i > hi ? hi : i);
}

/* Rows: each output row is a weighted sum of whole input rows (width * channels values each). An input of
 * type T is read as float (uint8 exactly), as the torch version converts the image before its first pass. */
#define ROWS(T)                                                                                              \
    WIDE_VECTORS                                                                                             \
    static void rows_##T(const T *src, float *dst, Py_ssize_t row_len, const int64_t *first, const float *weights, \
                         Py_ssize_t out_size, Py_ssize_t support, Py_ssize_t lo, Py_ssize_t hi) {           \
        for (Py_ssize_t i = 0; i < out_size; i++) {                                                          \
            const float *w = weights + i * support;                                                          \
            float *out = dst + i * row_len;                                                                  \
            const T *in = src + clamp((Py_ssize_t)first[i], lo, hi) * row_len;                               \
            for (Py_ssize_t v = 0; v < row_len; v++)                                                         \
                out[v] = (float)in[v] * w[0];                                                                \
            for (Py_ssize_t k = 1; k < support; k++) {                                                       \
                in = src + clamp((Py_ssize_t)first[i] + k, lo, hi) * row_len;                                \
                const float wk = w[k];                                                                       \
                for (Py_ssize_t v = 0; v < row_len; v++)                                                     \
                    out[v] = out[v] + (float)in[v] * wk;                                                     \
            }                                                                                                \
        }                                                                                                    \
    }

/* Three-channel rows in SSE2: a pixel's three values (and the next value, ignored) in one register, the tap's
 * weight broadcast: each lane is the same float products and in-order sums as the scalar code. Reading four
 * values at a pixel reads one past it, and writing four writes the next pixel's first value (written again
 * after): both stay inside the image except in its last row, which the scalar code does. */
#ifdef __SSE2__
#include <emmintrin.h>
#include <string.h>
#define HAVE_SSE2 1
static inline __m128 load4_float(const float *p) { return _mm_loadu_ps(p); }
static inline __m128 load4_uint8_t(const uint8_t *p) {
    int32_t bytes;
    memcpy(&bytes, p, 4);
    __m128i zero = _mm_setzero_si128();
    __m128i wide = _mm_unpacklo_epi16(_mm_unpacklo_epi8(_mm_cvtsi32_si128(bytes), zero), zero);
    return _mm_cvtepi32_ps(wide);
}
#define COLUMNS3(T)                                                                                          \
    static void columns3_##T(const T *row, float *out, const Py_ssize_t *offsets, const float *weights,     \
                             Py_ssize_t out_size, Py_ssize_t support) {                                     \
        for (Py_ssize_t j = 0; j < out_size; j++) {                                                          \
            const float *w = weights + j * support;                                                          \
            const Py_ssize_t *o = offsets + j * support;                                                     \
            __m128 acc = _mm_mul_ps(load4_##T(row + o[0]), _mm_set1_ps(w[0]));                               \
            for (Py_ssize_t k = 1; k < support; k++)                                                         \
                acc = _mm_add_ps(acc, _mm_mul_ps(load4_##T(row + o[k]), _mm_set1_ps(w[k])));                 \
            _mm_storeu_ps(out + j * 3, acc);                                                                 \
        }                                                                                                    \
    }
#else
#define HAVE_SSE2 0
#define COLUMNS3(T)                                                                                          \
    static void columns3_##T(const T *row, float *out, const Py_ssize_t *offsets, const float *weights,     \
                             Py_ssize_t out_size, Py_ssize_t support) {}
#endif
COLUMNS3(float)
COLUMNS3(uint8_t)

/* Columns: each output pixel of a row is a weighted sum of that row's input pixels. `offsets` holds each
 * tap's clamped input offset (clamp(first[j] + k) * channels), computed once for all rows; three channels
 * (RGB) keep their three sums in registers. Each sum is still its products added in tap order. */
#define COLUMNS(T)                                                                                           \
    WIDE_VECTORS                                                                                             \
    static void columns_##T(const T *src, float *dst, Py_ssize_t height, Py_ssize_t width, Py_ssize_t channels, \
                            const Py_ssize_t *offsets, const float *weights, Py_ssize_t out_size,             \
                            Py_ssize_t support) {                                                            \
        for (Py_ssize_t y = 0; y < height; y++) {                                                            \
            const T *row = src + y * width * channels;                                                       \
            float *out = dst + y * out_size * channels;                                                      \
            if (HAVE_SSE2 && channels == 3 && y + 1 < height) {                                              \
                columns3_##T(row, out, offsets, weights, out_size, support);                                 \
                continue;                                                                                    \
            }                                                                                                \
            for (Py_ssize_t j = 0; j < out_size; j++) {                                                      \
                const float *w = weights + j * support;                                                      \
                const Py_ssize_t *o = offsets + j * support;                                                 \
                if (channels == 3) {                                                                         \
                    const T *in = row + o[0];                                                                \
                    float a0 = (float)in[0] * w[0], a1 = (float)in[1] * w[0], a2 = (float)in[2] * w[0];      \
                    for (Py_ssize_t k = 1; k < support; k++) {                                               \
                        in = row + o[k];                                                                     \
                        a0 = a0 + (float)in[0] * w[k];                                                       \
                        a1 = a1 + (float)in[1] * w[k];                                                       \
                        a2 = a2 + (float)in[2] * w[k];                                                       \
                    }                                                                                        \
                    out[j * 3] = a0;                                                                         \
                    out[j * 3 + 1] = a1;                                                                     \
                    out[j * 3 + 2] = a2;                                                                     \
                    continue;                                                                                \
                }                                                                                            \
                for (Py_ssize_t c = 0; c < channels; c++) {                                                  \
                    float acc = (float)row[o[0] + c] * w[0];                                                 \
                    for (Py_ssize_t k = 1; k < support; k++)                                                 \
                        acc = acc + (float)row[o[k] + c] * w[k];                                             \
                    out[j * channels + c] = acc;                                                             \
                }                                                                                            \
            }                                                                                                \
        }                                                                                                    \
    }

ROWS(float)
ROWS(uint8_t)
COLUMNS(float)
COLUMNS(uint8_t)

/* resample and resample_uint8: the same pass over a float32 or a uint8 image (`name` in the errors). */
static PyObject *resample_pass(PyObject *args, int bytes, const char *name) {
    Py_buffer src, dst, first, weights;
    Py_ssize_t height, width, channels, out_size, support, lo, hi;
    int axis;
    if (!PyArg_ParseTuple(args, "y*w*nnniy*y*nnnn", &src, &dst, &height, &width, &channels, &axis, &first,
                          &weights, &out_size, &support, &lo, &hi))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t extent = axis == 0 ? height : width;
    Py_ssize_t out_len = (axis == 0 ? out_size * width : height * out_size) * channels;
    Py_ssize_t item = bytes ? 1 : (Py_ssize_t)sizeof(float);
    if (height < 0 || width < 0 || channels < 1 || out_size < 0 || support < 1 || (axis != 0 && axis != 1)) {
        PyErr_Format(PyExc_ValueError, "%s: bad shape, axis or support", name);
    } else if (src.len != item * height * width * channels
               || dst.len != (Py_ssize_t)sizeof(float) * out_len
               || first.len != (Py_ssize_t)sizeof(int64_t) * out_size
               || weights.len != (Py_ssize_t)sizeof(float) * out_size * support) {
        PyErr_Format(PyExc_ValueError, "%s: a buffer's size does not match the shapes", name);
    } else if (out_len > 0 && (lo < 0 || hi < lo || hi >= extent)) {
        PyErr_Format(PyExc_ValueError, "%s: the clamp range is outside the input", name);
    } else {
        Py_ssize_t *offsets = NULL;
        if (axis == 1 && out_len > 0 && (offsets = PyMem_RawMalloc(sizeof(Py_ssize_t) * out_size * support)) == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        Py_BEGIN_ALLOW_THREADS
        if (out_len > 0) {
            if (axis == 0 && bytes)
                rows_uint8_t(src.buf, dst.buf, width * channels, first.buf, weights.buf, out_size, support, lo, hi);
            else if (axis == 0)
                rows_float(src.buf, dst.buf, width * channels, first.buf, weights.buf, out_size, support, lo, hi);
            else {
                const int64_t *f = first.buf;
                for (Py_ssize_t j = 0; j < out_size; j++)
                    for (Py_ssize_t k = 0; k < support; k++)
                        offsets[j * support + k] = clamp((Py_ssize_t)f[j] + k, lo, hi) * channels;
                if (bytes)
                    columns_uint8_t(src.buf, dst.buf, height, width, channels, offsets, weights.buf, out_size,
                                    support);
                else
                    columns_float(src.buf, dst.buf, height, width, channels, offsets, weights.buf, out_size,
                                  support);
            }
        }
        Py_END_ALLOW_THREADS
        PyMem_RawFree(offsets);
        result = Py_NewRef(Py_None);
    }
done:
    PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
    PyBuffer_Release(&first);
    PyBuffer_Release(&weights);
    return result;
}

static PyObject *resample(PyObject *self, PyObject *args) { return resample_pass(args, 0, "resample"); }

static PyObject *resample_uint8(PyObject *self, PyObject *args) { return resample_pass(args, 1, "resample_uint8"); }

/* C's round (halves away from zero) or rounding halves to even, of floats clamped to [lo, hi] (NaN to 0),
 * as T. Clamping first keeps the result (rounding is monotonic and lo, hi are whole) and |c| < 2^22, so
 * (c + 1.5 * 2^23) - 1.5 * 2^23 is c rounded to the nearest integer, halves to even (the sum's ulp is 1 and
 * the offset is even; each operation is rounded as IEEE says: no fast-math here). The difference c - r is
 * exact, so the tie test is exact; a tie rounded away from zero is c + 0.5 or c - 0.5, exact too. No
 * branches (the fractions of resampled pixels are random: branches mispredict), and compiled without
 * trapping math (which changes no value, only whether a comparison with NaN may raise the invalid flag) so
 * that the compiler turns the selects into vector min, max and blends. */
#pragma GCC push_options
#pragma GCC optimize("no-trapping-math")
static inline float clamp_float(float v, float lo, float hi) {
    float c = v < lo ? lo : v;
    c = c > hi ? hi : c;
    return v == v ? c : 0.0f;
}

#define ROUNDING(T, LO, HI)                                                                                  \
    static void round_even_##T(const float *in, T *out, Py_ssize_t n) {                                      \
        const float shift = 12582912.0f; /* 1.5 * 2^23 */                                                    \
        for (Py_ssize_t i = 0; i < n; i++)                                                                   \
            out[i] = (T)(int32_t)((clamp_float(in[i], LO, HI) + shift) - shift);                             \
    }                                                                                                        \
    static void round_away_##T(const float *in, T *out, Py_ssize_t n) {                                      \
        const float shift = 12582912.0f;                                                                     \
        for (Py_ssize_t i = 0; i < n; i++) {                                                                 \
            float c = clamp_float(in[i], LO, HI);                                                            \
            float r = (c + shift) - shift;                                                                   \
            float d = c - r; /* a tie rounded to even toward zero (d = +-0.5, the sign of c) moves away */   \
            if (LO >= 0.0f)  /* unsigned: c >= 0 */                                                         \
                r = r + (d == 0.5f ? 1.0f : 0.0f);                                                           \
            else                                                                                             \
                r = ((d == 0.5f) & (c > 0.0f)) | ((d == -0.5f) & (c < 0.0f)) ? c + d : r;                     \
            out[i] = (T)(int32_t)r;                                                                          \
        }                                                                                                    \
    }                                                                                                        \
    /* Each row's runs of equal even[v] rounded by the one rule. */                                          \
    WIDE_VECTORS                                                                                             \
    static void round_rows_##T(const float *in, void *dst, Py_ssize_t count, Py_ssize_t row_len,             \
                               const unsigned char *even, const Py_ssize_t *runs, Py_ssize_t n_runs) {       \
        T *out = dst;                                                                                        \
        for (Py_ssize_t i = 0; i < count; i += row_len)                                                      \
            for (Py_ssize_t r = 0; r < n_runs; r++) {                                                        \
                Py_ssize_t start = runs[r], end = runs[r + 1];                                               \
                if (even[start])                                                                             \
                    round_even_##T(in + i + start, out + i + start, end - start);                            \
                else                                                                                         \
                    round_away_##T(in + i + start, out + i + start, end - start);                            \
            }                                                                                                \
    }
ROUNDING(uint8_t, 0.0f, 255.0f)
ROUNDING(int8_t, -128.0f, 127.0f)
ROUNDING(uint16_t, 0.0f, 65535.0f)
ROUNDING(int16_t, -32768.0f, 32767.0f)
#pragma GCC pop_options

static PyObject *round_saturate(PyObject *self, PyObject *args) {
    Py_buffer src, dst, even_buf;
    Py_ssize_t count, row_len;
    int type;
    if (!PyArg_ParseTuple(args, "y*w*nny*C", &src, &dst, &count, &row_len, &even_buf, &type))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t size = type == 'B' || type == 'b' ? 1 : (type == 'H' || type == 'h' ? 2 : 0);
    if (size == 0) {
        PyErr_SetString(PyExc_ValueError, "round_saturate: the type is one of 'B', 'b', 'H', 'h'");
    } else if (count < 0 || row_len < 1 || count % row_len != 0) {
        PyErr_SetString(PyExc_ValueError, "round_saturate: count is not whole rows");
    } else if (src.len != (Py_ssize_t)sizeof(float) * count || dst.len != size * count
               || (even_buf.len != 0 && even_buf.len != row_len)) {
        PyErr_SetString(PyExc_ValueError, "round_saturate: a buffer's size does not match the shapes");
    } else {
        /* the row's runs of equal even[v]: runs[r] .. runs[r + 1]; no lanes: one run rounded away */
        static const unsigned char away_only[1] = {0};
        const unsigned char *even = even_buf.len ? even_buf.buf : away_only;
        Py_ssize_t *runs = PyMem_RawMalloc(sizeof(Py_ssize_t) * (row_len + 1)), n_runs = 0;
        if (runs == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t v = 0; v < (even_buf.len ? row_len : 1); v++)
            if (v == 0 || (even[v] != 0) != (even[v - 1] != 0))
                runs[n_runs++] = v;
        runs[n_runs] = row_len;
        Py_BEGIN_ALLOW_THREADS
        if (type == 'B')
            round_rows_uint8_t(src.buf, dst.buf, count, row_len, even, runs, n_runs);
        else if (type == 'b')
            round_rows_int8_t(src.buf, dst.buf, count, row_len, even, runs, n_runs);
        else if (type == 'H')
            round_rows_uint16_t(src.buf, dst.buf, count, row_len, even, runs, n_runs);
        else
            round_rows_int16_t(src.buf, dst.buf, count, row_len, even, runs, n_runs);
        Py_END_ALLOW_THREADS
        PyMem_RawFree(runs);
        result = Py_NewRef(Py_None);
    }
done:
    PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
    PyBuffer_Release(&even_buf);
    return result;
}

static PyObject *normalize(PyObject *self, PyObject *args) {
    Py_buffer src, dst, mean, inv;
    Py_ssize_t height, width, channels, y0, x0, h, w;
    int chw, mirror;
    if (!PyArg_ParseTuple(args, "y*w*nnnnnnny*y*pp", &src, &dst, &height, &width, &channels, &y0, &x0, &h, &w,
                          &mean, &inv, &chw, &mirror))
        return NULL;
    PyObject *result = NULL;
    if (height < 0 || width < 0 || channels < 1 || h < 0 || w < 0 || y0 < 0 || x0 < 0 || y0 + h > height
        || x0 + w > width) {
        PyErr_SetString(PyExc_ValueError, "normalize: the window is not inside the image");
    } else if (src.len != height * width * channels || dst.len != (Py_ssize_t)sizeof(float) * h * w * channels
               || mean.len != (Py_ssize_t)sizeof(float) * channels || inv.len != (Py_ssize_t)sizeof(float) * channels) {
        PyErr_SetString(PyExc_ValueError, "normalize: a buffer's size does not match the shapes");
    } else {
        const uint8_t *in = src.buf;
        float *out = dst.buf;
        const float *m = mean.buf, *k = inv.buf;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < h; i++) {
            /* a mirrored row is read from its last pixel backwards: step -channels */
            const Py_ssize_t step = mirror ? -channels : channels;
            const uint8_t *row = in + ((y0 + i) * width + x0 + (mirror && w > 0 ? w - 1 : 0)) * channels;
            for (Py_ssize_t c = 0; c < channels; c++) {
                const float mc = m[c], kc = k[c];
                const uint8_t *px = row + c;
                if (chw) {  /* one output row per channel, written in order */
                    float *o = out + (c * h + i) * w;
                    for (Py_ssize_t j = 0; j < w; j++)
                        o[j] = ((float)px[j * step] - mc) * kc;
                } else {
                    float *o = out + i * w * channels + c;
                    for (Py_ssize_t j = 0; j < w; j++)
                        o[j * channels] = ((float)px[j * step] - mc) * kc;
                }
            }
        }
        Py_END_ALLOW_THREADS
        result = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
    PyBuffer_Release(&mean);
    PyBuffer_Release(&inv);
    return result;
}

/* ResamplingFilter::operator(): the table linearly interpolated at x, 0 outside (-1, n). */
static inline float filter_at(const float *coeffs, Py_ssize_t n, float x) {
    if (!(x > -1.0f && x < (float)n))
        return 0.0f;
    float x0 = floorf(x);
    Py_ssize_t i = (Py_ssize_t)x0;
    float d = x - x0;
    float f0 = i >= 0 ? coeffs[i] : 0.0f;
    float f1 = i + 1 < n ? coeffs[i + 1] : 0.0f;
    return f0 + d * (f1 - f0);
}

static PyObject *axis_weights(PyObject *self, PyObject *args) {
    Py_buffer coeffs, first_buf, weights_buf;
    float anchor, fscale, origin, scale;
    Py_ssize_t support, out_size;
    if (!PyArg_ParseTuple(args, "y*ffnnffw*w*", &coeffs, &anchor, &fscale, &support, &out_size, &origin, &scale,
                          &first_buf, &weights_buf))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = coeffs.len / (Py_ssize_t)sizeof(float);
    if (support < 1 || out_size < 0 || n < 1 || coeffs.len % (Py_ssize_t)sizeof(float) != 0) {
        PyErr_SetString(PyExc_ValueError, "axis_weights: bad table, support or size");
    } else if (first_buf.len != (Py_ssize_t)sizeof(int64_t) * out_size
               || weights_buf.len != (Py_ssize_t)sizeof(float) * out_size * support) {
        PyErr_SetString(PyExc_ValueError, "axis_weights: a buffer's size does not match the shapes");
    } else {
        const float *table = coeffs.buf;
        int64_t *first = first_buf.buf;
        float *weights = weights_buf.buf;
        Py_BEGIN_ALLOW_THREADS
        const float start = origin + ((0.5f * scale - 0.5f) - anchor);
        for (Py_ssize_t i = 0; i < out_size; i++) {
            const float sx0f = (float)i * scale + start;
            const float ceiled = ceilf(sx0f);
            const float frac = ceiled - sx0f;
            float *w = weights + i * support;
            float total = 0.0f;
            for (Py_ssize_t k = 0; k < support; k++) {
                w[k] = filter_at(table, n, (frac + (float)k) * fscale);
                total = total + w[k];
            }
            if (total != 0.0f)
                for (Py_ssize_t k = 0; k < support; k++)
                    w[k] = w[k] / total;
            first[i] = (int64_t)ceiled;
        }
        Py_END_ALLOW_THREADS
        result = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&coeffs);
    PyBuffer_Release(&first_buf);
    PyBuffer_Release(&weights_buf);
    return result;
}

static PyMethodDef methods[] = {
    {"resample", resample, METH_VARARGS, "One separable float32 pass of DALI's CPU resampler (see the file)."},
    {"resample_uint8", resample_uint8, METH_VARARGS, "resample's pass over a uint8 image (the first pass)."},
    {"axis_weights", axis_weights, METH_VARARGS, "fn.resize's first tap and tap weights per output position."},
    {"round_saturate", round_saturate, METH_VARARGS, "fn.resize's rounding and ConvertSat to an integer type."},
    {"normalize", normalize, METH_VARARGS, "fn.crop_mirror_normalize of a uint8 HWC window to float32."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native", NULL, -1, methods};

PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&module); }
