/* One sample's last step on the CPU path: packed RGB uint8 -> normalized float32 planes.
 *
 * Why this exists: torchvision's ToDtype + Normalize is a per-channel affine
 * map x * scale[c] + shift[c] of each uint8 pixel. In torch it is three
 * passes (convert-and-transpose copy, mul, add), and torch ops called from
 * several loader threads at once each start their own OpenMP team, so on a
 * 2-core machine the threads fight over the cores. This loop does it in one
 * pass per sample, in the thread that produced the pixels while they are
 * still in its cache, with the GIL released and no threads of its own. An
 * optional horizontal flip is folded into the read.
 *
 *   normalize(src, dst, height, width, scale, shift, hflip)
 *     src: buffer of height * width * 3 uint8, packed RGB rows
 *     dst: writable buffer of 3 * height * width float32, C-contiguous CHW
 *     scale, shift: 3-tuples of floats; hflip: bool
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

__attribute__((target_clones("avx2", "default")))
static void affine_row(const uint8_t *restrict row, float *restrict red, float *restrict green,
                       float *restrict blue, Py_ssize_t width, const float *scale, const float *shift) {
    const float s0 = scale[0], s1 = scale[1], s2 = scale[2];
    const float b0 = shift[0], b1 = shift[1], b2 = shift[2];
    for (Py_ssize_t x = 0; x < width; x++) {
        red[x] = (float)row[3 * x] * s0 + b0;
        green[x] = (float)row[3 * x + 1] * s1 + b1;
        blue[x] = (float)row[3 * x + 2] * s2 + b2;
    }
}

static void affine_planes(const uint8_t *src, float *dst, Py_ssize_t height, Py_ssize_t width,
                          const float *scale, const float *shift, int hflip, uint8_t *flipped) {
    Py_ssize_t plane = height * width;
    for (Py_ssize_t y = 0; y < height; y++) {
        const uint8_t *row = src + y * width * 3;
        if (hflip) {  /* reverse the row's pixels into a scratch row, then convert it */
            for (Py_ssize_t x = 0; x < width; x++) {
                const uint8_t *pixel = row + (width - 1 - x) * 3;
                flipped[3 * x] = pixel[0];
                flipped[3 * x + 1] = pixel[1];
                flipped[3 * x + 2] = pixel[2];
            }
            row = flipped;
        }
        Py_ssize_t base = y * width;
        affine_row(row, dst + base, dst + plane + base, dst + 2 * plane + base, width, scale, shift);
    }
}

static PyObject *normalize(PyObject *self, PyObject *args) {
    Py_buffer src, dst;
    Py_ssize_t height, width;
    float scale[3], shift[3];
    int hflip;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*w*nn(fff)(fff)p", &src, &dst, &height, &width, &scale[0], &scale[1],
                          &scale[2], &shift[0], &shift[1], &shift[2], &hflip))
        return NULL;
    if (height < 1 || width < 1 || src.len < height * width * 3 ||
        dst.len < height * width * 3 * (Py_ssize_t)sizeof(float)) {
        PyBuffer_Release(&src);
        PyBuffer_Release(&dst);
        PyErr_SetString(PyExc_ValueError, "buffer too small for height x width x 3");
        return NULL;
    }
    uint8_t *flipped = hflip ? (uint8_t *)PyMem_RawMalloc((size_t)width * 3) : NULL;
    if (hflip && flipped == NULL) {
        PyBuffer_Release(&src);
        PyBuffer_Release(&dst);
        return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS
    affine_planes((const uint8_t *)src.buf, (float *)dst.buf, height, width, scale, shift, hflip, flipped);
    Py_END_ALLOW_THREADS
    PyMem_RawFree(flipped);
    PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"normalize", normalize, METH_VARARGS,
     "normalize(src, dst, height, width, scale, shift, hflip): packed RGB uint8 -> float32 CHW, "
     "dst = src * scale[c] + shift[c]"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "fastload._normalize",
    "Per-sample uint8 RGB to normalized float32 planes, without the GIL.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__normalize(void) {
    return PyModule_Create(&module);
}
