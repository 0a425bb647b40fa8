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
 * Three functions, all release the GIL while libjpeg works:
 *   header(data) -> (width, height, components, color_space, progressive)
 *   decode(data, out, scale_num, left, top, width, height, gray=False)
 *       -> (width, height, channels, warnings, first_warning)
 *   sample(...): decode, then resize, crop, flip and write one sample of the CPU fast path (below)
 * and read_file(path) -> bytes, the loader threads' file read with no Python file object; count_scans, a
 * progressive JPEG's scans counted before anything decodes it; draw_resized_crop, a sample's crop and flips
 * drawn from its fastload.rng stream.
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
#include <time.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <math.h>
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

typedef struct {
    int width, height, components, color_space, progressive;
} jpeg_info;

/* The header's facts, without the GIL; 0 if libjpeg rejects it (its message in err). */
static int read_info(const unsigned char *data, size_t length, jpeg_info *info, error_manager *err) {
    struct jpeg_decompress_struct cinfo;
    int ok = 1;
    setup_errors(&cinfo, err);
    jpeg_create_decompress(&cinfo);
    if (setjmp(err->escape)) {
        ok = 0;
    } else {
        jpeg_mem_src(&cinfo, data, (unsigned long)length);
        jpeg_read_header(&cinfo, TRUE);
        info->width = (int)cinfo.image_width;
        info->height = (int)cinfo.image_height;
        info->components = cinfo.num_components;
        info->color_space = (int)cinfo.jpeg_color_space;
        info->progressive = cinfo.progressive_mode ? 1 : 0;
    }
    jpeg_destroy_decompress(&cinfo);
    return ok;
}

static PyObject *jpeg_header(PyObject *self, PyObject *args) {
    Py_buffer data;
    error_manager err;
    jpeg_info info = {0, 0, 0, 0, 0};
    int ok;
    if (!PyArg_ParseTuple(args, "y*", &data))
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    ok = read_info((const unsigned char *)data.buf, (size_t)data.len, &info, &err);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, err.message);
        return NULL;
    }
    return Py_BuildValue("iiiii", info.width, info.height, info.components, info.color_space, info.progressive);
}

/* What decode_region did: OK, or why not. */
enum { REGION_OK, REGION_FAILED, REGION_COLOR_SPACE, REGION_OUTSIDE, REGION_SMALL_OUT, REGION_NO_MEMORY };

typedef struct {
    int width, height, channels; /* of the region decoded (clipped to the scaled image) */
    size_t needed;               /* bytes of `out` it needs */
    size_t offset, stride;       /* where in `out` the region's first pixel lies, and its rows' pitch */
    error_manager err;           /* libjpeg's message, warnings counted */
} region;

/* Decode the region (left, top, width, height) of the image scaled by scale_num/8 into `out` as packed RGB
 * (gray for 1-channel JPEGs, or all of them with `gray`), the same pixels as a full decode. With `in_rows`
 * the rows libjpeg hands back (the region widened to whole iMCU columns) are written where they are
 * decoded, when `out` holds them, instead of copied out of a scanline: the region then starts at
 * result->offset, its rows result->stride apart (else at 0, packed). Runs without the GIL. */
static int decode_region(const unsigned char *data, size_t length, int scale_num, int left, int top, int width,
                         int height, int gray, int in_rows, unsigned char *out, size_t out_len, region *result) {
    struct jpeg_decompress_struct cinfo;
    int status = REGION_OK;
    unsigned char *volatile scanline = NULL; /* volatile: read after a longjmp */
    result->channels = 0;
    result->needed = 0;
    result->offset = 0;
    result->stride = 0;
    setup_errors(&cinfo, &result->err);
    jpeg_create_decompress(&cinfo);
    if (setjmp(result->err.escape)) {
        status = REGION_FAILED;
    } else {
        jpeg_mem_src(&cinfo, data, (unsigned long)length);
        jpeg_read_header(&cinfo, TRUE);
        if (cinfo.jpeg_color_space == JCS_GRAYSCALE) {
            cinfo.out_color_space = JCS_GRAYSCALE;
        } else if (cinfo.jpeg_color_space == JCS_YCbCr || cinfo.jpeg_color_space == JCS_RGB) {
            cinfo.out_color_space = gray ? JCS_GRAYSCALE : JCS_RGB;
        } else {
            status = REGION_COLOR_SPACE; /* CMYK / YCCK: the caller uses Pillow */
        }
        if (status == REGION_OK) {
            cinfo.scale_num = (unsigned int)scale_num;
            cinfo.scale_denom = 8;
            jpeg_calc_output_dimensions(&cinfo);
            if ((JDIMENSION)left >= cinfo.output_width || (JDIMENSION)top >= cinfo.output_height)
                status = REGION_OUTSIDE;
        }
        if (status == REGION_OK) {
            if ((JDIMENSION)(left + width) > cinfo.output_width)
                width = (int)(cinfo.output_width - left);
            if ((JDIMENSION)(top + height) > cinfo.output_height)
                height = (int)(cinfo.output_height - top);
            result->channels = cinfo.out_color_space == JCS_GRAYSCALE ? 1 : 3;
            result->needed = (size_t)width * height * result->channels;
            if (result->needed > out_len)
                status = REGION_SMALL_OUT;
        }
        if (status == REGION_OK) {
            int channels = result->channels;
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
            size_t row_bytes = (size_t)width * channels, pitch = (size_t)cinfo.output_width * channels;
            int direct = offset == 0 && cinfo.output_width == (JDIMENSION)width;
            int in_place = !direct && in_rows && pitch * height <= out_len;
            result->offset = in_place ? offset : 0;
            result->stride = in_place ? pitch : row_bytes;
            if (!direct && !in_place) {
                scanline = (unsigned char *)malloc((size_t)cinfo.output_width * channels);
                if (scanline == NULL)
                    status = REGION_NO_MEMORY;
            }
            if (status == REGION_OK) {
                if (top > 0)
                    jpeg_skip_scanlines(&cinfo, (JDIMENSION)top);
                int done = 0;
                while (done < height) {
                    JSAMPROW rows[1] = {direct ? out + row_bytes * done : in_place ? out + pitch * done : scanline};
                    if (jpeg_read_scanlines(&cinfo, rows, 1) != 1)
                        break;
                    if (!direct && !in_place)
                        memcpy(out + row_bytes * done, scanline + offset, row_bytes);
                    done++;
                }
                if (done < height) { /* suspended: only possible with truncated data */
                    for (int y = done; y < height; y++)
                        memset(out + result->offset + result->stride * y, 128, row_bytes);
                    if (result->err.pub.num_warnings == 0)
                        snprintf(result->err.first_warning, JMSG_LENGTH_MAX, "image data ended early");
                    result->err.pub.num_warnings++;
                }
            }
        }
    }
    free(scanline);
    jpeg_destroy_decompress(&cinfo);
    result->width = width;
    result->height = height;
    return status;
}

/* The Python exception for a status other than REGION_OK and REGION_SMALL_OUT. */
static PyObject *region_error(int status, region *result) {
    if (status == REGION_FAILED)
        PyErr_SetString(PyExc_ValueError, result->err.message);
    else if (status == REGION_NO_MEMORY)
        PyErr_NoMemory();
    else if (status == REGION_COLOR_SPACE)
        PyErr_SetString(PyExc_NotImplementedError, "color space not supported by the region decoder");
    else
        PyErr_SetString(PyExc_ValueError, "region starts outside the scaled image");
    return NULL;
}

static PyObject *jpeg_decode(PyObject *self, PyObject *args) {
    Py_buffer data, out;
    int scale_num, left, top, width, height, gray = 0, status;
    region result;
    if (!PyArg_ParseTuple(args, "y*w*iiiii|p", &data, &out, &scale_num, &left, &top, &width, &height, &gray))
        return NULL;
    if (scale_num < 1 || scale_num > 16 || left < 0 || top < 0 || width < 1 || height < 1) {
        PyBuffer_Release(&data);
        PyBuffer_Release(&out);
        PyErr_SetString(PyExc_ValueError, "invalid scale or region");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    status = decode_region((const unsigned char *)data.buf, (size_t)data.len, scale_num, left, top, width, height,
                           gray, 0, (unsigned char *)out.buf, (size_t)out.len, &result);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    PyBuffer_Release(&out);
    if (status == REGION_SMALL_OUT)
        return PyLong_FromSize_t(result.needed);
    if (status != REGION_OK)
        return region_error(status, &result);
    return Py_BuildValue("iiiis", result.width, result.height, result.channels, (int)result.err.pub.num_warnings,
                         result.err.first_warning);
}

#include "_resample.h"
#include "_lookup.h"

/* Bytes from `offset` rounded up so that what follows is aligned for any scalar type. */
static size_t aligned(size_t offset) {
    return (offset + 63) & ~(size_t)63;
}

typedef struct {
    int filter, resize_w, resize_h, hflip, vflip, kind;
    float box[4];
    int window[4]; /* x, y, width, height of the resized image */
    float table[3 * 256]; /* kind 1: channel c's output value of level x at table[256 * c + x] */
} sample_plan;

/* kind 1's table from a Python buffer of 3 x 256 float32 (fastload.kernels.normalize: torchvision's value
 * of each level, computed by torch's ops, so a lookup is exact); kind 0 takes any. Releases the buffer;
 * returns 0 (with the exception set) for a table of another size. */
static int take_table(Py_buffer *table, sample_plan *plan) {
    int ok = plan->kind != 1 || table->len == (Py_ssize_t)sizeof(plan->table);
    if (ok && plan->kind == 1)
        memcpy(plan->table, table->buf, sizeof(plan->table));
    PyBuffer_Release(table);
    if (!ok)
        PyErr_SetString(PyExc_ValueError, "table is not 3 x 256 float32 values");
    return ok;
}

/* Write the window (rows of `values` bytes at `stride`, `channels` 1 or 3) into out: packed RGB uint8
 * (kind 0) or float32 planes table[c][value] (kind 1, RGB rows through _lookup.h's gathers), flipped as
 * asked. `flipped`: scratch of a row's bytes. */
static void write_output(const unsigned char *pixels, size_t stride, int channels, const sample_plan *plan,
                         void *out, unsigned char *flipped) {
    int width = plan->window[2], height = plan->window[3];
    size_t plane = (size_t)width * height;
    lookup_fn convert = lookup_row_best();
    for (int y = 0; y < height; y++) {
        const unsigned char *row = pixels + (size_t)(plan->vflip ? height - 1 - y : y) * stride;
        if (plan->kind == 0) {
            unsigned char *dst = (unsigned char *)out + (size_t)y * width * 3;
            for (int x = 0; x < width; x++) {
                const unsigned char *p = row + (size_t)(plan->hflip ? width - 1 - x : x) * channels;
                dst[3 * x] = p[0];
                dst[3 * x + 1] = p[channels == 3 ? 1 : 0];
                dst[3 * x + 2] = p[channels == 3 ? 2 : 0];
            }
        } else if (channels == 3) {
            float *red = (float *)out + (size_t)y * width;
            if (plan->hflip) {  /* the row's pixels reversed into `flipped`, then looked up */
                for (int x = 0; x < width; x++)
                    memcpy(flipped + 3 * x, row + (size_t)(width - 1 - x) * 3, 3);
                row = flipped;
            }
            convert(row, red, red + plane, red + 2 * plane, width, plan->table);
        } else {
            float *red = (float *)out + (size_t)y * width, *green = red + plane, *blue = green + plane;
            const float *t0 = plan->table, *t1 = t0 + 256, *t2 = t1 + 256;
            for (int x = 0; x < width; x++) {
                const unsigned char *p = row + (size_t)(plan->hflip ? width - 1 - x : x) * channels;
                int g = channels == 3 ? 1 : 0, b = channels == 3 ? 2 : 0;
                red[x] = t0[p[0]];
                green[x] = t1[p[g]];
                blue[x] = t2[p[b]];
            }
        }
    }
}

/* Resample the decoded region (in_w x in_h, `channels`) as Pillow's Image.resize(size, filter, box) and
 * write the plan's window of it. `scratch` holds the tables and the intermediate rows; returns the bytes
 * it needs when it is too small (and does nothing), else 0.
 *
 * Pillow 13 makes the vertical pass first when it shrinks the height by more than twice what the
 * horizontal pass takes off the width (measured on thousands of random sizes, boxes and filters: the
 * intermediate image is rounded to 8 bits, so the order shows in the pixels); otherwise horizontal first,
 * as Pillow always did before. */
static size_t resample_region(const unsigned char *in, size_t in_stride, int in_w, int in_h, int channels,
                              const sample_plan *plan, unsigned char *scratch, size_t scratch_len, void *out) {
    const float *box = plan->box;
    int wx = plan->window[0], wy = plan->window[1], ww = plan->window[2], wh = plan->window[3];
    int need_h = plan->resize_w != in_w || box[0] != 0.0f || box[2] != (float)plan->resize_w;
    int need_v = plan->resize_h != in_h || box[1] != 0.0f || box[3] != (float)plan->resize_h;
    int vertical_first = need_h && need_v && plan->resize_h < in_h &&
                         in_h - plan->resize_h > 2 * (in_w - plan->resize_w);
    int taps_h = need_h ? resample_taps(plan->filter, box[0], box[2], plan->resize_w) : 0;
    int taps_v = need_v ? resample_taps(plan->filter, box[1], box[3], plan->resize_h) : 0;
    /* scratch: the two passes' tables, the intermediate rows, one row of sums, the output rows (bounds:
     * a pass reads at most the whole region) */
    size_t at_h = aligned((size_t)wh * (2 * sizeof(int) + taps_v * sizeof(int32_t)));
    size_t at_mid = aligned(at_h + (size_t)ww * (2 * sizeof(int) + taps_h * sizeof(int32_t)));
    size_t mid_bytes = (size_t)channels * (vertical_first ? (size_t)wh * in_w : (size_t)in_h * ww);
    size_t at_sums = aligned(at_mid + (need_h && need_v ? mid_bytes + 4 : 0)); /* +4: read past (resample) */
    size_t at_final = aligned(at_sums + (size_t)channels * (in_w > ww ? in_w : ww) * sizeof(int32_t));
    size_t at_flip = aligned(at_final + (size_t)wh * ww * channels);
    size_t needed = aligned(at_flip + (size_t)ww * 3); /* a flipped row for write_output */
    if (needed > scratch_len)
        return needed;
    int *start_v = (int *)scratch, *length_v = start_v + wh, *start_h = (int *)(scratch + at_h);
    int *length_h = start_h + ww;
    int32_t *weights_v = (int32_t *)(length_v + wh), *weights_h = (int32_t *)(length_h + ww);
    int32_t *sums = (int32_t *)(scratch + at_sums);
    /* the source window the passes read: rows row_first.., columns col_first.. of the region */
    int row_first = wy, rows = wh, col_first = wx, cols = ww;
    if (need_v)
        row_first = resample_axis(plan->filter, in_h, box[1], box[3], plan->resize_h, wy, wh, taps_v, start_v,
                                  length_v, weights_v, &rows);
    if (need_h)
        col_first = resample_axis(plan->filter, in_w, box[0], box[2], plan->resize_w, wx, ww, taps_h, start_h,
                                  length_h, weights_h, &cols);
    const unsigned char *source = in + (size_t)row_first * in_stride + (size_t)col_first * channels;
    size_t stride = in_stride, done = (size_t)ww * channels;
    unsigned char *mid = scratch + at_mid, *final = scratch + at_final;
    if (need_h && need_v && vertical_first) {
        size_t across = (size_t)cols * channels;
        resample_vertical(source, stride, across, mid, across, wh, taps_v, start_v, length_v, weights_v, sums);
        resample_horizontal(mid, across, wh, channels, final, done, ww, taps_h, start_h, length_h, weights_h);
    } else if (need_h && need_v) {
        resample_horizontal(source, stride, rows, channels, mid, done, ww, taps_h, start_h, length_h, weights_h);
        resample_vertical(mid, done, done, final, done, wh, taps_v, start_v, length_v, weights_v, sums);
    } else if (need_h) {
        resample_horizontal(source, stride, wh, channels, final, done, ww, taps_h, start_h, length_h, weights_h);
    } else if (need_v) {
        resample_vertical(source, stride, done, final, done, wh, taps_v, start_v, length_v, weights_v, sums);
    } else {
        final = (unsigned char *)source; /* the window of the region itself */
        done = stride;
    }
    write_output(final, done, channels, plan, out, scratch + at_flip);
    return 0;
}

/* sample(data, scratch, out, scale_num, (left, top, width, height), (x0, y0, x1, y1), (resize_w, resize_h),
 *        (window x, y, width, height), filter, hflip, vflip, kind, table, offset)
 *   -> (warnings, first_warning, seconds decoding) done, or an int: the bytes scratch needs (nothing done)
 * One sample of the CPU fast path without the GIL: decode the region of the JPEG scaled by scale_num/8,
 * resize its box (region coordinates) to resize_w x resize_h as Pillow would, keep the window, flip, and
 * write it into out at byte `offset` (kind 0: packed RGB uint8 rows; 1: float32 planes table[c][x]). With
 * warnings (corrupt data) `out` holds what libjpeg made of it; the caller lets Pillow judge the file. */
/* Why a sample's steps cannot be run, or NULL: checked before the GIL is released. */
static const char *invalid_sample(int scale_num, int left, int top, int width, int height, const sample_plan *plan,
                                  size_t out_len, Py_ssize_t offset) {
    const int *win = plan->window;
    if (scale_num < 1 || scale_num > 16 || left < 0 || top < 0 || width < 1 || height < 1)
        return "invalid scale or region";
    if (!(0.0f <= plan->box[0] && plan->box[0] < plan->box[2] && plan->box[2] <= (float)width &&
          0.0f <= plan->box[1] && plan->box[1] < plan->box[3] && plan->box[3] <= (float)height))
        return "resize box outside the region";
    if (plan->resize_w < 1 || plan->resize_h < 1 || win[0] < 0 || win[1] < 0 || win[2] < 1 || win[3] < 1 ||
        win[0] + win[2] > plan->resize_w || win[1] + win[3] > plan->resize_h)
        return "window outside the resized image";
    if (plan->filter < FILTER_LANCZOS || plan->filter > FILTER_HAMMING || plan->kind < 0 || plan->kind > 1)
        return "unsupported filter or output kind";
    if (offset < 0 || (size_t)offset > out_len ||
        out_len - (size_t)offset < (size_t)win[2] * win[3] * 3 * (plan->kind ? sizeof(float) : 1))
        return "output too small for the window at its offset";
    return NULL;
}

static double seconds_between(struct timespec from, struct timespec to) {
    return (double)(to.tv_sec - from.tv_sec) + 1e-9 * (double)(to.tv_nsec - from.tv_nsec);
}

/* Decode the region, resample it and write the window into `out` (without the GIL). Returns the scratch
 * bytes needed when `scratch` is too small (nothing done), else 0 with *status REGION_OK or why not. */
static size_t run_sample(const unsigned char *data, size_t length, unsigned char *scratch, size_t scratch_len,
                         int scale_num, int left, int top, int width, int height, const sample_plan *plan,
                         unsigned char *out, int *status, region *result, double *decode_seconds) {
    struct timespec started, decoded_at;
    /* at most 3 channels, rows widened to whole iMCU columns (at most 16 pixels each side, one more for
     * upsampling: decode_region copies rows out of a scanline where they do not fit); +4: read past (resample) */
    size_t decoded = aligned((size_t)(width + 34) * height * 3 + 4);
    *status = REGION_OK;
    *decode_seconds = 0.0;
    result->err.pub.num_warnings = 0;
    if (decoded > scratch_len)
        return decoded + aligned((size_t)plan->window[2] * plan->window[3] * 3 * 2);
    clock_gettime(CLOCK_MONOTONIC, &started);
    *status = decode_region(data, length, scale_num, left, top, width, height, 0, 1, scratch, decoded - 4, result);
    clock_gettime(CLOCK_MONOTONIC, &decoded_at);
    *decode_seconds = seconds_between(started, decoded_at);
    if (*status == REGION_OK && (result->width != width || result->height != height))
        *status = REGION_OUTSIDE; /* the region must lie in the scaled image */
    if (*status != REGION_OK || result->err.pub.num_warnings != 0)
        return 0;
    size_t needed = resample_region(scratch + result->offset, result->stride, width, height, result->channels, plan,
                                    scratch + decoded, scratch_len - decoded, out);
    return needed ? needed + decoded : 0;
}

/* sample(data, scratch, out, scale_num, (left, top, width, height), (x0, y0, x1, y1), (resize_w, resize_h),
 *        (window x, y, width, height), filter, hflip, vflip, kind, table, offset)
 *   -> (warnings, first_warning, seconds decoding) done, or an int: the bytes scratch needs (nothing done)
 * One sample of the CPU fast path without the GIL: decode the region of the JPEG scaled by scale_num/8,
 * resize its box (region coordinates) to resize_w x resize_h as Pillow would, keep the window, flip, and
 * write it into out at byte `offset` (kind 0: packed RGB uint8 rows; 1: float32 planes table[c][x]). With
 * warnings (corrupt data) `out` holds what libjpeg made of it; the caller lets Pillow judge the file. */
static PyObject *jpeg_sample(PyObject *self, PyObject *args) {
    Py_buffer data, scratch, out, table;
    int scale_num, left, top, width, height, status = REGION_OK;
    sample_plan plan;
    region result;
    size_t needed = 0;
    double decode_seconds = 0.0;
    Py_ssize_t offset;
    if (!PyArg_ParseTuple(args, "y*w*w*i(iiii)(ffff)(ii)(iiii)ippiy*n", &data, &scratch, &out, &scale_num,
                          &left, &top, &width, &height, &plan.box[0], &plan.box[1], &plan.box[2], &plan.box[3],
                          &plan.resize_w, &plan.resize_h, &plan.window[0], &plan.window[1], &plan.window[2],
                          &plan.window[3], &plan.filter, &plan.hflip, &plan.vflip, &plan.kind, &table, &offset))
        return NULL;
    if (!take_table(&table, &plan)) {
        PyBuffer_Release(&data);
        PyBuffer_Release(&scratch);
        PyBuffer_Release(&out);
        return NULL;
    }
    const char *invalid = invalid_sample(scale_num, left, top, width, height, &plan, (size_t)out.len, offset);
    if (invalid == NULL) {
        Py_BEGIN_ALLOW_THREADS
        needed = run_sample((const unsigned char *)data.buf, (size_t)data.len, (unsigned char *)scratch.buf,
                            (size_t)scratch.len, scale_num, left, top, width, height, &plan,
                            (unsigned char *)out.buf + offset, &status, &result, &decode_seconds);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&data);
    PyBuffer_Release(&scratch);
    PyBuffer_Release(&out);
    if (invalid != NULL) {
        PyErr_SetString(PyExc_ValueError, invalid);
        return NULL;
    }
    if (needed)
        return PyLong_FromSize_t(needed);
    if (status != REGION_OK)
        return region_error(status, &result);
    return Py_BuildValue("isd", (int)result.err.pub.num_warnings, result.err.first_warning, decode_seconds);
}

/* read_file(path) -> bytes: the whole file, open/fstat/read/close without the GIL (only the bytes object is
 * made with it). A loader thread reading through Python's file objects holds the GIL ~15 us an image;
 * here ~2. Errors raise OSError (FileNotFoundError, IsADirectoryError, ...) naming the path. */
static PyObject *read_whole_file(PyObject *self, PyObject *args) {
    PyObject *path;
    if (!PyArg_ParseTuple(args, "O&", PyUnicode_FSConverter, &path))
        return NULL;
    const char *name = PyBytes_AS_STRING(path);
    int fd, saved = 0;
    struct stat info;
    Py_BEGIN_ALLOW_THREADS
    fd = open(name, O_RDONLY | O_CLOEXEC);
    if (fd >= 0 && fstat(fd, &info) != 0) {
        saved = errno;
        close(fd);
        fd = -1;
        errno = saved;
    }
    saved = errno;
    Py_END_ALLOW_THREADS
    if (fd < 0) {
        errno = saved;
        PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, PyTuple_GET_ITEM(args, 0));
        Py_DECREF(path);
        return NULL;
    }
    Py_ssize_t size = (Py_ssize_t)info.st_size, done = 0;
    PyObject *data = PyBytes_FromStringAndSize(NULL, size);
    if (data == NULL) {
        close(fd);
        Py_DECREF(path);
        return NULL;
    }
    char *buffer = PyBytes_AS_STRING(data);
    ssize_t got = 0;
    Py_BEGIN_ALLOW_THREADS
    while (done < size) {
        got = read(fd, buffer + done, (size_t)(size - done));
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        done += got;
    }
    saved = errno;
    close(fd);
    Py_END_ALLOW_THREADS
    if (got < 0) {
        errno = saved;
        PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, PyTuple_GET_ITEM(args, 0));
        Py_DECREF(data);
        Py_DECREF(path);
        return NULL;
    }
    Py_DECREF(path);
    if (done < size && _PyBytes_Resize(&data, done) != 0) /* the file shrank while read */
        return NULL;
    return data;
}

/* count_scans(data, limit) -> the number of scans (SOS markers) of a JPEG, counting stops past `limit`.
 * Why: a progressive JPEG may hold any number of scans, and every scan costs a pass over the whole image's
 * coefficients, so a 300 KB file of 1,500 tiny scans takes half a minute to decode; libjpeg has no limit of
 * its own. The walk follows the marker segments by their lengths (so a thumbnail inside APP1 is not counted)
 * and, after each SOS, the entropy-coded data to the next marker (0xFF then a byte other than 0x00, a fill
 * 0xFF or RST0-7), without the GIL. */
static Py_ssize_t scans_of(const unsigned char *bytes, size_t length, Py_ssize_t limit) {
    Py_ssize_t scans = 0;
    size_t at = 2; /* after SOI */
    while (at + 4 <= length && scans <= limit) {
        if (bytes[at] != 0xFF) /* not a marker where one must be: libjpeg judges the file */
            break;
        unsigned char marker = bytes[at + 1];
        if (marker == 0xFF) { /* fill byte */
            at++;
            continue;
        }
        if (marker == 0xD9) /* EOI */
            break;
        if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) { /* no length */
            at += 2;
            continue;
        }
        size_t segment = ((size_t)bytes[at + 2] << 8) | bytes[at + 3];
        at += 2 + segment;
        if (marker != 0xDA)
            continue;
        scans++;
        /* entropy-coded data: up to the next marker that is not a stuffed 0x00 or a restart */
        while (at + 1 < length) {
            const unsigned char *next = memchr(bytes + at, 0xFF, length - at - 1);
            if (next == NULL) {
                at = length;
                break;
            }
            at = (size_t)(next - bytes);
            unsigned char after = bytes[at + 1];
            if (after == 0x00 || after == 0xFF || (after >= 0xD0 && after <= 0xD7))
                at += after == 0xFF ? 1 : 2;
            else
                break;
        }
    }
    return scans;
}

static PyObject *count_scans(PyObject *self, PyObject *args) {
    Py_buffer data;
    Py_ssize_t limit, scans;
    if (!PyArg_ParseTuple(args, "y*n", &data, &limit))
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    scans = scans_of((const unsigned char *)data.buf, (size_t)data.len, limit);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    return PyLong_FromSsize_t(scans);
}

/* fastload.rng's SplitMix64 streams, bit for bit: a sample's stream keyed by (seed, epoch, index, repeat). */
#define GOLDEN 0x9E3779B97F4A7C15ULL

static unsigned long long splitmix(unsigned long long z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static double next_random(unsigned long long *state) {
    *state += GOLDEN;
    return (double)(splitmix(*state) >> 11) * (1.0 / 9007199254740992.0);
}

static long next_randint(unsigned long long *state, long low, long high) {
    long drawn = (long)(next_random(state) * (double)(high - low));
    return low + (drawn < high - low - 1 ? drawn : high - low - 1);
}

/* draw_resized_crop(seed, epoch, index, repeat, width, height, scale_lo, scale_hi, log_ratio_lo, log_ratio_hi,
 *                   ratio_min, ratio_max, hflip_p, vflip_p) -> (top, left, h, w, hflip, vflip)
 * RandomResizedCrop's box and the flips of a sample, the very values fastload.transforms draws in Python
 * (SampleRandom, _rrc_params, Plan.sample): the same double arithmetic in the same order, the libm
 * exp and sqrt that math.exp and math.sqrt call, Python's round (half to even: nearbyint), int() truncation.
 * Why: those draws were the largest
 * share of the GIL a loader thread holds per sample (about a fifth). Built with -ffp-contract=off, so no
 * fused multiply-add changes a value. */
typedef struct {
    double scale_lo, scale_hi, log_lo, log_hi, ratio_min, ratio_max, hflip_p, vflip_p;
} crop_law;

typedef struct {
    long top, left, h, w;
    int hflip, vflip;
} crop_draw;

static crop_draw draw_crop(unsigned long long seed, unsigned long long epoch, unsigned long long index,
                           unsigned long long repeat, long width, long height, const crop_law *law) {
    /* rng.py adds GOLDEN to the seed without wrapping: the 65th bit of the sum reaches bit 34 in the first
     * xor-shift (what is above bit 63 is gone after the multiply) */
    unsigned long long first = seed + GOLDEN, carry = first < seed;
    unsigned long long state = ((first ^ (first >> 30) ^ (carry << 34)) * 0xBF58476D1CE4E5B9ULL);
    state = (state ^ (state >> 27)) * 0x94D049BB133111EBULL;
    state ^= state >> 31;
    state = splitmix(state ^ (epoch + 2 * GOLDEN));
    state = splitmix(state ^ (index + 3 * GOLDEN));
    if (repeat)
        state = splitmix(state ^ (repeat + 5 * GOLDEN));
    double area = (double)(height * width);
    crop_draw d = {-1, 0, 0, 0, 0, 0};
    for (int attempt = 0; attempt < 10 && d.top < 0; attempt++) {
        double target_area = area * (law->scale_lo + (law->scale_hi - law->scale_lo) * next_random(&state));
        double aspect_ratio = exp(law->log_lo + (law->log_hi - law->log_lo) * next_random(&state));
        d.w = (long)nearbyint(sqrt(target_area * aspect_ratio));
        d.h = (long)nearbyint(sqrt(target_area / aspect_ratio));
        if (0 < d.w && d.w <= width && 0 < d.h && d.h <= height) {
            d.top = next_randint(&state, 0, height - d.h + 1);
            d.left = next_randint(&state, 0, width - d.w + 1);
        }
    }
    if (d.top < 0) { /* torchvision's fallback: the whole image, or its center at the nearest allowed ratio */
        double in_ratio = (double)width / (double)height;
        if (in_ratio < law->ratio_min) {
            d.w = width;
            d.h = (long)nearbyint((double)width / law->ratio_min);
        } else if (in_ratio > law->ratio_max) {
            d.h = height;
            d.w = (long)nearbyint((double)height * law->ratio_max);
        } else {
            d.w = width;
            d.h = height;
        }
        d.top = (height - d.h) / 2;
        d.left = (width - d.w) / 2;
    }
    d.hflip = law->hflip_p > 0 && next_random(&state) < law->hflip_p;
    d.vflip = law->vflip_p > 0 && next_random(&state) < law->vflip_p;
    return d;
}

static PyObject *draw_resized_crop(PyObject *self, PyObject *args) {
    unsigned long long seed, epoch, index, repeat;
    long width, height;
    crop_law law;
    if (!PyArg_ParseTuple(args, "KKKKlldddddddd", &seed, &epoch, &index, &repeat, &width, &height, &law.scale_lo,
                          &law.scale_hi, &law.log_lo, &law.log_hi, &law.ratio_min, &law.ratio_max, &law.hflip_p,
                          &law.vflip_p))
        return NULL;
    crop_draw d = draw_crop(seed, epoch, index, repeat, width, height, &law);
    return Py_BuildValue("llllNN", d.top, d.left, d.h, d.w, PyBool_FromLong(d.hflip), PyBool_FromLong(d.vflip));
}

/* The file's bytes in malloc'd memory, read without the GIL; NULL where it cannot be read here (the caller's
 * Python read then words the error, or reads what has no size: a pipe, /proc). */
static unsigned char *read_regular_file(const char *name, size_t *size) {
    struct stat info;
    int fd = open(name, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    unsigned char *bytes = NULL;
    if (fstat(fd, &info) == 0 && S_ISREG(info.st_mode) && info.st_size > 0)
        bytes = (unsigned char *)malloc((size_t)info.st_size);
    size_t done = 0;
    while (bytes != NULL && done < (size_t)info.st_size) {
        ssize_t got = read(fd, bytes + done, (size_t)info.st_size - done);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            free(bytes);
            bytes = NULL;
        } else if (got == 0) {
            break; /* the file shrank while read */
        } else {
            done += (size_t)got;
        }
    }
    close(fd);
    if (bytes != NULL && done == 0) {
        free(bytes);
        bytes = NULL;
    }
    *size = done;
    return bytes;
}

/* load_sample(path, scratch, out, offset, (seed, epoch, index, repeat), (max_pixels, max_scans, scale_lo,
 *             scale_hi, log_ratio_lo, log_ratio_hi, ratio_min, ratio_max, hflip_p, vflip_p, out_w, out_h, dct,
 *             filter, kind, table))
 *   -> (read seconds, decode seconds, total seconds): the sample is in `out` at `offset`;
 *      bytes: the file's, not done (not a JPEG this route takes, over a limit, libjpeg warned or failed):
 *             the caller's Python route takes the sample from these bytes and words any refusal;
 *      None: the file could not be read here (the caller reads it, and words the error);
 *      an int: the bytes `scratch` needs (nothing done).
 * A RandomResizedCrop sample of the CPU fast path in one call with one release of the GIL: the file read,
 * the header and its limits (decode.read_header's: the pixel cap, decode.MAX_SCANS), the crop and flips of
 * the sample's stream (draw_crop), the geometry fastload.transforms and native_sample.steps compute
 * (Geometry.region's DCT scale and 8-pixel margin), the region decode and the resample. Why: the separate
 * calls left a loader thread ~15 us of Python per sample between them, under the GIL. */
static PyObject *load_sample(PyObject *self, PyObject *args) {
    PyObject *path;
    Py_buffer scratch, out, table;
    Py_ssize_t offset, max_pixels, max_scans;
    unsigned long long seed, epoch, index, repeat;
    crop_law law;
    int out_w, out_h, dct;
    sample_plan plan;
    if (!PyArg_ParseTuple(args, "O&w*w*n(KKKK)(nndddddddd(ii)piiy*)", PyUnicode_FSConverter, &path,
                          &scratch, &out, &offset, &seed, &epoch, &index, &repeat, &max_pixels, &max_scans,
                          &law.scale_lo, &law.scale_hi, &law.log_lo, &law.log_hi, &law.ratio_min, &law.ratio_max,
                          &law.hflip_p, &law.vflip_p, &out_w, &out_h, &dct, &plan.filter, &plan.kind, &table))
        return NULL;
    if (!take_table(&table, &plan)) {
        PyBuffer_Release(&scratch);
        PyBuffer_Release(&out);
        Py_DECREF(path);
        return NULL;
    }
    enum { DONE, UNREAD, TAKE_BYTES, GROW } outcome = TAKE_BYTES;
    size_t size = 0, needed = 0;
    unsigned char *bytes;
    double read_seconds = 0.0, decode_seconds = 0.0, total_seconds = 0.0;
    const char *name = PyBytes_AS_STRING(path);
    Py_BEGIN_ALLOW_THREADS
    struct timespec started, read_at, ended;
    clock_gettime(CLOCK_MONOTONIC, &started);
    bytes = read_regular_file(name, &size);
    clock_gettime(CLOCK_MONOTONIC, &read_at);
    read_seconds = seconds_between(started, read_at);
    jpeg_info info;
    error_manager err;
    if (bytes == NULL) {
        outcome = UNREAD;
    } else if (size >= 2 && bytes[0] == 0xFF && bytes[1] == 0xD8 && read_info(bytes, size, &info, &err) &&
               (info.color_space == JCS_GRAYSCALE || info.color_space == JCS_RGB ||
                info.color_space == JCS_YCbCr) &&
               info.width > 0 && info.height > 0 &&
               (max_pixels < 0 || (long long)info.width * info.height <= (long long)max_pixels) &&
               !(info.progressive && scans_of(bytes, size, max_scans) > max_scans)) {
        long width = info.width, height = info.height;
        crop_draw d = draw_crop(seed, epoch, index, repeat, width, height, &law);
        double ratio = fmin((double)d.w / out_w, (double)d.h / out_h);
        int reduction = !dct ? 1 : ratio >= 8 ? 8 : ratio >= 4 ? 4 : ratio >= 2 ? 2 : 1;
        long left = d.left, top = d.top, right = d.left + d.w, bottom = d.top + d.h;
        plan.box[0] = 0.0f;
        plan.box[1] = 0.0f;
        plan.box[2] = (float)d.w;
        plan.box[3] = (float)d.h;
        if (reduction != 1) { /* Geometry.region: the scaled source box and a margin past any filter's reach */
            double l = (double)d.left / reduction, t = (double)d.top / reduction;
            double r = (double)right / reduction, b = (double)bottom / reduction;
            long scaled_w = (width + reduction - 1) / reduction, scaled_h = (height + reduction - 1) / reduction;
            left = (long)floor(l) - 8 > 0 ? (long)floor(l) - 8 : 0;
            top = (long)floor(t) - 8 > 0 ? (long)floor(t) - 8 : 0;
            right = (long)ceil(r) + 8 < scaled_w ? (long)ceil(r) + 8 : scaled_w;
            bottom = (long)ceil(b) + 8 < scaled_h ? (long)ceil(b) + 8 : scaled_h;
            plan.box[0] = (float)(l - left);
            plan.box[1] = (float)(t - top);
            plan.box[2] = (float)(r - left);
            plan.box[3] = (float)(b - top);
        }
        plan.resize_w = out_w;
        plan.resize_h = out_h;
        plan.window[0] = plan.window[1] = 0;
        plan.window[2] = out_w;
        plan.window[3] = out_h;
        plan.hflip = d.hflip;
        plan.vflip = d.vflip;
        int scale_num = 8 / reduction, status;
        region result;
        if (invalid_sample(scale_num, (int)left, (int)top, (int)(right - left), (int)(bottom - top), &plan,
                           (size_t)out.len, offset) == NULL) {
            needed = run_sample(bytes, size, (unsigned char *)scratch.buf, (size_t)scratch.len, scale_num,
                                (int)left, (int)top, (int)(right - left), (int)(bottom - top), &plan,
                                (unsigned char *)out.buf + offset, &status, &result, &decode_seconds);
            if (needed)
                outcome = GROW;
            else if (status == REGION_OK && result.err.pub.num_warnings == 0)
                outcome = DONE;
        }
    }
    if (outcome != TAKE_BYTES) { /* freed here: a file's worth of memory may be unmapped, a system call */
        free(bytes);
        bytes = NULL;
    }
    clock_gettime(CLOCK_MONOTONIC, &ended);
    total_seconds = seconds_between(started, ended);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&scratch);
    PyBuffer_Release(&out);
    Py_DECREF(path);
    PyObject *answer;
    if (outcome == DONE)
        answer = Py_BuildValue("ddd", read_seconds, decode_seconds, total_seconds);
    else if (outcome == GROW)
        answer = PyLong_FromSize_t(needed);
    else if (outcome == TAKE_BYTES)
        answer = PyBytes_FromStringAndSize((const char *)bytes, (Py_ssize_t)size);
    else
        answer = Py_NewRef(Py_None);
    free(bytes);
    return answer;
}

static PyMethodDef methods[] = {
    {"header", jpeg_header, METH_VARARGS,
     "header(data) -> (width, height, components, jpeg_color_space)"},
    {"decode", jpeg_decode, METH_VARARGS,
     "decode(data, out, scale_num, left, top, width, height, gray=False) -> "
     "(width, height, channels, warnings, first_warning) or the required size of out"},
    {"sample", jpeg_sample, METH_VARARGS,
     "sample(data, scratch, out, scale_num, region, box, size, window, filter, hflip, vflip, kind, table, "
     "offset) -> (warnings, first_warning, seconds decoding) or the required size of scratch"},
    {"read_file", read_whole_file, METH_VARARGS, "read_file(path) -> bytes, without the GIL"},
    {"load_sample", load_sample, METH_VARARGS,
     "load_sample(path, scratch, out, offset, (seed, epoch, index, repeat), settings) -> (read, decode, total "
     "seconds) done, the file's bytes (not done), None (not read) or the bytes scratch needs"},
    {"count_scans", count_scans, METH_VARARGS, "count_scans(data, limit) -> scans of a JPEG, counted up to limit + 1"},
    {"draw_resized_crop", draw_resized_crop, METH_VARARGS,
     "draw_resized_crop(seed, epoch, index, repeat, width, height, scale_lo, scale_hi, log_ratio_lo, log_ratio_hi, "
     "ratio_min, ratio_max, hflip_p, vflip_p) -> (top, left, h, w, hflip, vflip)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "fastload._jpeg",
    "Region-of-interest, DCT-scaled JPEG decoding with libjpeg-turbo.", -1, methods,
};

PyMODINIT_FUNC PyInit__jpeg(void) {
    return PyModule_Create(&module);
}
