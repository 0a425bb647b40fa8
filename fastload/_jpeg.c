/* Region-of-interest JPEG decoding with libjpeg-turbo, for fastload's CPU path.
 *
 * Why this exists: a random-resized crop uses on average about half of an
 * image, yet Pillow (and torchvision.io) decode every pixel. libjpeg-turbo can
 * do much less work: scale the inverse DCT by M/8 (the image comes out smaller
 * at almost no cost), skip the inverse DCT and color conversion of the rows
 * above the crop (jpeg_skip_scanlines), of the columns beside it
 * (jpeg_crop_scanline) and stop decoding after its last row. No Python
 * binding exposes that, so these ~250 lines do.
 *
 * Two functions, both release the GIL while libjpeg works:
 *   header(data) -> (width, height, components, color_space)
 *   decode(data, out, scale_num, left, top, width, height, gray=False)
 *       -> (width, height, channels, warnings, first_warning)
 * decode() writes the requested region (in coordinates of the image scaled by
 * scale_num/8, 1 to 16 as libjpeg-turbo's scaled IDCTs allow, clipped to it)
 * into the writable buffer `out` as packed RGB, or gray for 1-channel JPEGs
 * and when `gray` is true (libjpeg's own conversion: a YCbCr image's Y, as
 * TurboJPEG's TJPF_GRAY gives), with the same pixels as a full decode. If `out` is
 * too small, nothing is decoded and the required size is returned as an int.
 * libjpeg errors raise ValueError with its message; its warnings (corrupt
 * data) are counted, not printed. CMYK/YCCK raise NotImplementedError.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jpeglib.h>

typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf escape;
    char message[JMSG_LENGTH_MAX];
    char first_warning[JMSG_LENGTH_MAX];
} error_manager;

static void on_error_exit(j_common_ptr cinfo) {
    error_manager *err = (error_manager *)cinfo->err;
    (*cinfo->err->format_message)(cinfo, err->message);
    longjmp(err->escape, 1);
}

/* libjpeg calls this for warnings (level -1) and trace messages (level >= 0).
 * Warnings such as "Corrupt JPEG data: premature end of data segment" are
 * counted and the first one is kept, so the caller can report them instead of
 * printing them to stderr as libjpeg's default does. */
static void on_message(j_common_ptr cinfo, int level) {
    error_manager *err = (error_manager *)cinfo->err;
    if (level < 0) {
        if (err->pub.num_warnings == 0)
            (*cinfo->err->format_message)(cinfo, err->first_warning);
        err->pub.num_warnings++;
    }
}

static void setup_errors(struct jpeg_decompress_struct *cinfo, error_manager *err) {
    cinfo->err = jpeg_std_error(&err->pub);
    err->pub.error_exit = on_error_exit;
    err->pub.emit_message = on_message;
    err->message[0] = '\0';
    err->first_warning[0] = '\0';
}

static PyObject *jpeg_header(PyObject *self, PyObject *args) {
    Py_buffer data;
    struct jpeg_decompress_struct cinfo;
    error_manager err;
    int failed = 0;
    int width = 0, height = 0, components = 0, color_space = 0;
    if (!PyArg_ParseTuple(args, "y*", &data))
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    setup_errors(&cinfo, &err);
    jpeg_create_decompress(&cinfo);
    if (setjmp(err.escape)) {
        failed = 1;
    } else {
        jpeg_mem_src(&cinfo, (const unsigned char *)data.buf, (unsigned long)data.len);
        jpeg_read_header(&cinfo, TRUE);
        width = (int)cinfo.image_width;
        height = (int)cinfo.image_height;
        components = cinfo.num_components;
        color_space = (int)cinfo.jpeg_color_space;
    }
    jpeg_destroy_decompress(&cinfo);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    if (failed) {
        PyErr_SetString(PyExc_ValueError, err.message);
        return NULL;
    }
    return Py_BuildValue("iiii", width, height, components, color_space);
}

static PyObject *jpeg_decode(PyObject *self, PyObject *args) {
    Py_buffer data, out;
    int scale_num, left, top, width, height, gray = 0;
    struct jpeg_decompress_struct cinfo;
    error_manager err;
    int failed = 0, unsupported = 0, out_of_memory = 0;
    Py_ssize_t needed = 0;
    int channels = 0;
    unsigned char *volatile scanline = NULL;  /* volatile: read after a longjmp */
    if (!PyArg_ParseTuple(args, "y*w*iiiii|p", &data, &out, &scale_num, &left, &top, &width, &height, &gray))
        return NULL;
    if (scale_num < 1 || scale_num > 16 || left < 0 || top < 0 || width < 1 || height < 1) {
        PyBuffer_Release(&data);
        PyBuffer_Release(&out);
        PyErr_SetString(PyExc_ValueError, "invalid scale or region");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    setup_errors(&cinfo, &err);
    jpeg_create_decompress(&cinfo);
    if (setjmp(err.escape)) {
        failed = 1;
    } else {
        jpeg_mem_src(&cinfo, (const unsigned char *)data.buf, (unsigned long)data.len);
        jpeg_read_header(&cinfo, TRUE);
        if (cinfo.jpeg_color_space == JCS_GRAYSCALE) {
            cinfo.out_color_space = JCS_GRAYSCALE;
        } else if (cinfo.jpeg_color_space == JCS_YCbCr || cinfo.jpeg_color_space == JCS_RGB) {
            cinfo.out_color_space = gray ? JCS_GRAYSCALE : JCS_RGB;
        } else {
            unsupported = 1;  /* CMYK / YCCK: the caller uses Pillow */
        }
        if (!unsupported) {
            cinfo.scale_num = (unsigned int)scale_num;
            cinfo.scale_denom = 8;
            jpeg_calc_output_dimensions(&cinfo);
            if ((JDIMENSION)left >= cinfo.output_width || (JDIMENSION)top >= cinfo.output_height)
                unsupported = 2;
        }
        if (!unsupported) {
            if ((JDIMENSION)(left + width) > cinfo.output_width)
                width = (int)(cinfo.output_width - left);
            if ((JDIMENSION)(top + height) > cinfo.output_height)
                height = (int)(cinfo.output_height - top);
            channels = cinfo.out_color_space == JCS_GRAYSCALE ? 1 : 3;
            needed = (Py_ssize_t)width * height * channels;
        }
        if (!unsupported && needed <= out.len) {
            jpeg_start_decompress(&cinfo);
            /* libjpeg's fancy upsampling replicates the edge columns of a
             * cropped region instead of reading their neighbours, so widen the
             * request by one column on each side: the columns handed back then
             * equal those of a full decode. libjpeg widens it further, to whole
             * iMCU columns; the exact columns are copied out of each row. */
            JDIMENSION x = (JDIMENSION)(left > 0 ? left - 1 : 0);
            JDIMENSION w = (JDIMENSION)(left + width + 1) - x;
            if (x + w > cinfo.output_width)
                w = cinfo.output_width - x;
            if (x > 0 || w < cinfo.output_width)
                jpeg_crop_scanline(&cinfo, &x, &w);
            size_t offset = (size_t)(left - (int)x) * channels;
            size_t row_bytes = (size_t)width * channels;
            int direct = offset == 0 && cinfo.output_width == (JDIMENSION)width;
            if (!direct) {
                scanline = (unsigned char *)malloc((size_t)cinfo.output_width * channels);
                if (scanline == NULL)
                    out_of_memory = 1;
            }
            if (!out_of_memory) {
                if (top > 0)
                    jpeg_skip_scanlines(&cinfo, (JDIMENSION)top);
                unsigned char *dest = (unsigned char *)out.buf;
                int done = 0;
                while (done < height) {
                    JSAMPROW rows[1] = {direct ? dest + row_bytes * done : scanline};
                    if (jpeg_read_scanlines(&cinfo, rows, 1) != 1)
                        break;
                    if (!direct)
                        memcpy(dest + row_bytes * done, scanline + offset, row_bytes);
                    done++;
                }
                if (done < height) {  /* suspended: only possible with truncated data */
                    memset(dest + row_bytes * done, 128, row_bytes * (height - done));
                    if (err.pub.num_warnings == 0)
                        snprintf(err.first_warning, JMSG_LENGTH_MAX, "image data ended early");
                    err.pub.num_warnings++;
                }
            }
        }
    }
    free(scanline);
    jpeg_destroy_decompress(&cinfo);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    PyBuffer_Release(&out);
    if (failed) {
        PyErr_SetString(PyExc_ValueError, err.message);
        return NULL;
    }
    if (out_of_memory)
        return PyErr_NoMemory();
    if (unsupported == 1) {
        PyErr_SetString(PyExc_NotImplementedError, "color space not supported by the region decoder");
        return NULL;
    }
    if (unsupported == 2) {
        PyErr_SetString(PyExc_ValueError, "region starts outside the scaled image");
        return NULL;
    }
    if (needed > out.len)
        return PyLong_FromSsize_t(needed);
    return Py_BuildValue("iiiis", width, height, channels, (int)err.pub.num_warnings, err.first_warning);
}

static PyMethodDef methods[] = {
    {"header", jpeg_header, METH_VARARGS,
     "header(data) -> (width, height, components, jpeg_color_space)"},
    {"decode", jpeg_decode, METH_VARARGS,
     "decode(data, out, scale_num, left, top, width, height, gray=False) -> "
     "(width, height, channels, warnings, first_warning) or the required size of out"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "fastload._jpeg",
    "Region-of-interest, DCT-scaled JPEG decoding with libjpeg-turbo.", -1, methods,
};

PyMODINIT_FUNC PyInit__jpeg(void) {
    return PyModule_Create(&module);
}
