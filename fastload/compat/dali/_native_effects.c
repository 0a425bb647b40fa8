/* DALI's per-sample numerics of the effects operators in native code (being written: one function per step, each
 * equal bit for bit to the torch version it replaces, which stays as the fallback and the test's reference). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyMethodDef methods[] = {
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native_effects", NULL, -1, methods};

PyMODINIT_FUNC PyInit__native_effects(void) { return PyModule_Create(&module); }
