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
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

static inline Py_ssize_t clamp(Py_ssize_t i, Py_ssize_t lo, Py_ssize_t hi) {
    return i < lo ? lo : (i > hi ? hi : i);
}

/* Rows: each output row is a weighted sum of whole input rows (width * channels values each). */
static void rows(const float *src, float *dst, Py_ssize_t row_len, const int64_t *first, const float *weights,
                 Py_ssize_t out_size, Py_ssize_t support, Py_ssize_t lo, Py_ssize_t hi) {
    for (Py_ssize_t i = 0; i < out_size; i++) {
        const float *w = weights + i * support;
        float *out = dst + i * row_len;
        const float *in = src + clamp((Py_ssize_t)first[i], lo, hi) * row_len;
        for (Py_ssize_t v = 0; v < row_len; v++)
            out[v] = in[v] * w[0];
        for (Py_ssize_t k = 1; k < support; k++) {
            in = src + clamp((Py_ssize_t)first[i] + k, lo, hi) * row_len;
            const float wk = w[k];
            for (Py_ssize_t v = 0; v < row_len; v++)
                out[v] = out[v] + in[v] * wk;
        }
    }
}

/* Columns: each output pixel of a row is a weighted sum of that row's input pixels. */
static void columns(const float *src, float *dst, Py_ssize_t height, Py_ssize_t width, Py_ssize_t channels,
                    const int64_t *first, const float *weights, Py_ssize_t out_size, Py_ssize_t support,
                    Py_ssize_t lo, Py_ssize_t hi) {
    for (Py_ssize_t y = 0; y < height; y++) {
        const float *row = src + y * width * channels;
        float *out = dst + y * out_size * channels;
        for (Py_ssize_t j = 0; j < out_size; j++) {
            const float *w = weights + j * support;
            for (Py_ssize_t c = 0; c < channels; c++) {
                float acc = row[clamp((Py_ssize_t)first[j], lo, hi) * channels + c] * w[0];
                for (Py_ssize_t k = 1; k < support; k++)
                    acc = acc + row[clamp((Py_ssize_t)first[j] + k, lo, hi) * channels + c] * w[k];
                out[j * channels + c] = acc;
            }
        }
    }
}

static PyObject *resample(PyObject *self, PyObject *args) {
    Py_buffer src, dst, first, weights;
    Py_ssize_t height, width, channels, out_size, support, lo, hi;
    int axis;
    if (!PyArg_ParseTuple(args, "y*w*nnniy*y*nnnn", &src, &dst, &height, &width, &channels, &axis, &first,
                          &weights, &out_size, &support, &lo, &hi))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t extent = axis == 0 ? height : width;
    Py_ssize_t out_len = (axis == 0 ? out_size * width : height * out_size) * channels;
    if (height < 0 || width < 0 || channels < 1 || out_size < 0 || support < 1 || (axis != 0 && axis != 1)) {
        PyErr_SetString(PyExc_ValueError, "resample: bad shape, axis or support");
    } else if (src.len != (Py_ssize_t)sizeof(float) * height * width * channels
               || dst.len != (Py_ssize_t)sizeof(float) * out_len
               || first.len != (Py_ssize_t)sizeof(int64_t) * out_size
               || weights.len != (Py_ssize_t)sizeof(float) * out_size * support) {
        PyErr_SetString(PyExc_ValueError, "resample: a buffer's size does not match the shapes");
    } else if (out_len > 0 && (lo < 0 || hi < lo || hi >= extent)) {
        PyErr_SetString(PyExc_ValueError, "resample: the clamp range is outside the input");
    } else {
        Py_BEGIN_ALLOW_THREADS
        if (out_len > 0) {
            if (axis == 0)
                rows(src.buf, dst.buf, width * channels, first.buf, weights.buf, out_size, support, lo, hi);
            else
                columns(src.buf, dst.buf, height, width, channels, first.buf, weights.buf, out_size, support,
                        lo, hi);
        }
        Py_END_ALLOW_THREADS
        result = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
    PyBuffer_Release(&first);
    PyBuffer_Release(&weights);
    return result;
}

static PyMethodDef methods[] = {
    {"resample", resample, METH_VARARGS, "One separable float32 pass of DALI's CPU resampler (see the file)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native", NULL, -1, methods};

PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&module); }
