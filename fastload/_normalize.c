/* One sample's last step on the CPU path: packed RGB uint8 -> normalized float32 planes.
 *
 * Why this exists: torchvision's ToTensor / ToDtype + Normalize turn each
 * uint8 pixel x of channel c into a float32 value op by op (divide or
 * multiply, subtract, divide: fastload.kernels.normalize). A level has only
 * 256 values, so the caller passes them: table[c][x], computed by torch's
 * own ops, and this loop is a lookup, exact by construction. In torch it is
 * four passes (convert-and-transpose copy, then an op each), and torch ops called from
 * several loader threads at once each start their own OpenMP team, so on a
 * 2-core machine the threads fight over the cores. This loop does it in one
 * pass per sample, in the thread that produced the pixels while they are
 * still in its cache, with the GIL released and no threads of its own. An
 * optional horizontal flip is folded into the read.
 *
 *   normalize(src, dst, height, width, table, hflip)
 *     src: buffer of height * width * 3 uint8, packed RGB rows
 *     dst: writable buffer of 3 * height * width float32, C-contiguous CHW
 *     table: buffer of 3 * 256 float32, each channel's value of each level; hflip: bool
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_lookup.h"

static void lookup_planes(const uint8_t *src, float *dst, Py_ssize_t height, Py_ssize_t width,
                          const float *table, int hflip, uint8_t *flipped) {
    Py_ssize_t plane = height * width;
    lookup_fn convert = lookup_row_best();
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
        convert(row, dst + base, dst + plane + base, dst + 2 * plane + base, width, table);
    }
}

static PyObject *normalize(PyObject *self, PyObject *args) {
    Py_buffer src, dst, table;
    Py_ssize_t height, width;
    float values[3 * 256];
    int hflip;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*w*nny*p", &src, &dst, &height, &width, &table, &hflip))
        return NULL;
    int table_ok = table.len == (Py_ssize_t)sizeof(values);
    if (table_ok)
        memcpy(values, table.buf, sizeof(values));
    PyBuffer_Release(&table);
    if (!table_ok || height < 1 || width < 1 || src.len / 3 / width < height ||
        dst.len / 3 / (Py_ssize_t)sizeof(float) / width < height) {
        PyBuffer_Release(&src);
        PyBuffer_Release(&dst);
        PyErr_SetString(PyExc_ValueError, table_ok ? "buffer too small for height x width x 3"
                                                   : "table is not 3 x 256 float32 values");
        return NULL;
    }
    uint8_t *flipped = hflip ? (uint8_t *)PyMem_RawMalloc((size_t)width * 3) : NULL;
    if (hflip && flipped == NULL) {
        PyBuffer_Release(&src);
        PyBuffer_Release(&dst);
        return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS
    lookup_planes((const uint8_t *)src.buf, (float *)dst.buf, height, width, values, hflip, flipped);
    Py_END_ALLOW_THREADS
    PyMem_RawFree(flipped);
    PyBuffer_Release(&src);
    PyBuffer_Release(&dst);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"normalize", normalize, METH_VARARGS,
     "normalize(src, dst, height, width, table, hflip): packed RGB uint8 -> float32 CHW, "
     "dst = table[c][src] (table: 3 x 256 float32)"},
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
