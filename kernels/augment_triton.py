"""The fused augmentation's Triton kernels, launched by ``augment.augment_batch`` (kernels/augment.py).

``augment_kernel`` runs one program per tile of output pixels (rows by
columns) of each image, and runs crop, resize, flips, the color operations,
grayscale, normalize, dtype and layout in registers before the single write.
The antialiased bilinear resize is separable: a small first launch
(``taps_kernel``) writes each image's filter taps once, per output row and
per output column (first source row or column, count, weights); a tile then
filters each source row its rows reach once horizontally and adds it into
each of its output rows with that row's vertical weight, so a pixel costs
about (source rows per output row) x (horizontal taps) gathers, not
(vertical taps) x (horizontal taps), and no weight is computed twice.
Contrast needs the mean gray level of the whole image at its point in the
chain, so a plan with contrast runs the same kernel once more first, in a
mode (MEAN_PASS) that only writes per-tile partial sums (summed in a fixed
order: deterministic). A rotation or affine map resamples the resized image
again, so then the launcher first writes the resized batch alone, and runs
the kernel again in a mode (WARP) that samples it through each image's
inverse map; without a warp that mode is not compiled in. ANTIALIAS=False
compiles in plain bilinear sampling instead of the antialiased filter.

The plain-torch implementation of the same math, step for step where the
tests compare to the bit, is kernels/augment_torch.py.
"""

from __future__ import annotations

try:
    import triton
    import triton.language as tl
except ImportError:  # a torch build without triton: augment_torch still works
    triton = None

if triton is not None:

    @triton.jit
    def _round_half_even(x):
        down = tl.floor(x)
        frac = x - down
        odd = down - 2.0 * tl.floor(down * 0.5)
        return tl.where(frac > 0.5, down + 1.0, tl.where(frac < 0.5, down, down + odd))

    @triton.jit
    def _level(x):
        """A whole level 0..255 held as a float, as a table index (clamped: masked lanes hold anything)."""
        return tl.minimum(tl.maximum(x, 0.0), 255.0).to(tl.int32)

    @triton.jit
    def _gray_level(r, g, b, QUANTIZE: tl.constexpr):
        # torchvision's r.mul(0.2989).add_(g, alpha=0.587).add_(b, alpha=0.114): fused multiply-adds
        gray = tl.fma(b, 0.114, tl.fma(g, 0.587, r * 0.2989))
        if QUANTIZE:
            gray = tl.floor(gray)
        return gray

    @triton.jit
    def _blend_values(x, other, factor, BOUND: tl.constexpr, QUANTIZE: tl.constexpr):
        # torchvision's x.mul(factor).add_(other, alpha=1 - factor), one fused multiply-add as torch's (_blend)
        out = tl.minimum(tl.maximum(tl.fma(other, 1.0 - factor, x * factor), 0.0), BOUND)
        if QUANTIZE:
            out = tl.floor(out)
        return out

    @triton.jit
    def _hue_values(r, g, b, shift, QUANTIZE: tl.constexpr):
        if QUANTIZE:
            r = r * (1.0 / 255.0)
            g = g * (1.0 / 255.0)
            b = b * (1.0 / 255.0)
        maxc = tl.maximum(tl.maximum(r, g), b)
        minc = tl.minimum(tl.minimum(r, g), b)
        eqc = maxc == minc
        span = maxc - minc
        s = span / tl.where(eqc, 1.0, maxc)
        divisor = tl.where(eqc, 1.0, span)
        rc = (maxc - r) / divisor
        gc = (maxc - g) / divisor
        bc = (maxc - b) / divisor
        h = tl.where(maxc == r, bc - gc, tl.where(maxc == g, (rc + 2.0) - bc, (gc + 4.0) - rc))
        h = h * (1.0 / 6.0) + 1.0
        h = h - tl.floor(h)  # fmod(h, 1) for the positive h here
        h = h + shift
        h = h - tl.floor(h)  # torch.remainder(h, 1)
        h6 = h * 6.0
        i = tl.floor(h6)
        f = h6 - i
        i = i - 6.0 * tl.floor(i / 6.0)
        v = maxc
        sxf = s * f
        q = tl.minimum(tl.maximum((1.0 - sxf) * v, 0.0), 1.0)
        t = tl.minimum(tl.maximum((sxf + (1.0 - s)) * v, 0.0), 1.0)
        p = tl.minimum(tl.maximum((1.0 - s) * v, 0.0), 1.0)
        red = tl.where(i == 0, v, tl.where(i == 1, q, tl.where((i == 2) | (i == 3), p, tl.where(i == 4, t, v))))
        green = tl.where(i == 0, t, tl.where((i == 1) | (i == 2), v, tl.where(i == 3, q, p)))
        blue = tl.where((i == 0) | (i == 1), p, tl.where(i == 2, t, tl.where(i == 5, q, v)))
        if QUANTIZE:
            red = tl.floor(red * (255.0 + 1.0 - 1e-3))
            green = tl.floor(green * (255.0 + 1.0 - 1e-3))
            blue = tl.floor(blue * (255.0 + 1.0 - 1e-3))
        return red, green, blue

    @triton.jit
    def taps_kernel(boxes, windows, starts, sizes, weights, out_h, out_w, width, ANTIALIAS: tl.constexpr,
                     BLOCK: tl.constexpr):
        """The resize's filter taps, once per image and axis (program (n, 0): the output rows; (n, 1): the
        columns): for each output row or column of the window, its first crop row or column (``starts``), how
        many it reads (``sizes``, 0 outside the resized image) and their weights (``weights``, ``width`` a
        line, zeros past ``sizes``). torch's antialiased bilinear weights (_compute_indices_min_size_weights_aa)
        in its float32 steps; without antialiasing the filter keeps its one-pixel support when shrinking:
        torch's plain bilinear (two taps, edges clamped -- the renormalized weights at an edge are the clamp's)."""
        n = tl.program_id(0).to(tl.int64)
        axis = tl.program_id(1)  # 0: rows (y), 1: columns (x)
        crop = tl.load(boxes + n * 4 + 2 + axis)
        resize = tl.load(windows + n * 4 + axis)
        offset = tl.load(windows + n * 4 + 2 + axis)
        length = tl.where(axis == 0, out_h, out_w)
        line0 = n * (out_h + out_w) + tl.where(axis == 0, 0, out_h)
        # Divisions rounded to nearest (Triton's default on a GPU is approximate): once per image and line,
        # and then the GPU's taps are the CPU's (``taps_torch``) to the bit.
        scale = tl.math.div_rn(crop.to(tl.float32), resize.to(tl.float32))
        if ANTIALIAS:
            support = tl.where(scale >= 1.0, scale, 1.0)
            inv = tl.where(scale >= 1.0, tl.math.div_rn(tl.full([], 1.0, tl.float32), scale), 1.0)
        else:  # scalars of the same type as in the antialiased branch
            support = scale * 0.0 + 1.0
            inv = support
        taps = (2.0 * support).to(tl.int32) + 2
        for first in range(0, length, BLOCK):
            o = first + tl.arange(0, BLOCK)
            valid = o < length
            i = o + offset  # the position in the resized image
            inside = valid & (i >= 0) & (i < resize)
            center = scale * (i.to(tl.float32) + 0.5)
            lo = tl.maximum((center - support + 0.5).to(tl.int32), 0)
            size = tl.minimum((center + support + 0.5).to(tl.int32), crop) - lo
            total = tl.zeros([BLOCK], tl.float32)
            for k in range(0, taps):
                w = tl.maximum(1.0 - tl.abs((k + lo - center + 0.5) * inv), 0.0)
                total += tl.where(k < size, w, 0.0)
            total = tl.where(total != 0.0, total, 1.0)
            line = line0 + o
            for k in range(0, width):
                w = tl.math.div_rn(tl.maximum(1.0 - tl.abs((k + lo - center + 0.5) * inv), 0.0), total)
                tl.store(weights + line * width + k, tl.where(inside & (k < size), w, 0.0), mask=valid)
            tl.store(starts + line, tl.where(inside, lo, 0), mask=valid)
            tl.store(sizes + line, tl.where(inside, size, 0), mask=valid)

    @triton.jit
    def _resample(src_ptrs, src_meta, boxes, starts, sizes, weights, width, n, oy, ox, rows_ok, cols_ok,
                  out_h, out_w, ANTIALIAS: tl.constexpr, TH: tl.constexpr, TW: tl.constexpr):
        """torchvision's resized_crop of image n at a tile of output pixels, rows ``oy`` (TH) by columns ``ox``
        (TW), in float, through the taps ``taps_kernel`` wrote. Separable: each crop row the tile's filters
        reach is filtered horizontally once, into registers, and added into every output row of the tile with
        that row's vertical weight (zero for the rows it does not reach). The sums run in torch's order --
        the horizontal sum of each row over its taps, then those over the rows -- and adding a zero-weighted
        row adds an exact zero, so each pixel is the per-pixel filter's value to the bit."""
        # This image: where it is, its size, channels and strides (in elements).
        src = tl.load(src_ptrs + n).to(tl.pointer_type(tl.uint8))
        image_h = tl.load(src_meta + n * 6 + 0)
        image_w = tl.load(src_meta + n * 6 + 1)
        channels = tl.load(src_meta + n * 6 + 2)
        stride_c = tl.load(src_meta + n * 6 + 3)
        stride_y = tl.load(src_meta + n * 6 + 4)
        stride_x = tl.load(src_meta + n * 6 + 5)
        green_at = tl.where(channels == 3, stride_c, 0)  # a gray image reads as RGB with equal channels
        top = tl.load(boxes + n * 4 + 0).to(tl.int64)
        left = tl.load(boxes + n * 4 + 1).to(tl.int64)

        row_line = n * (out_h + out_w) + oy
        col_line = n * (out_h + out_w) + out_h + ox
        y0 = tl.load(starts + row_line, mask=rows_ok, other=0)
        ny = tl.load(sizes + row_line, mask=rows_ok, other=0)
        x0 = tl.load(starts + col_line, mask=cols_ok, other=0)
        nx = tl.load(sizes + col_line, mask=cols_ok, other=0)
        # The crop rows the tile reads (none where it is all outside the resized image), and its widest filter.
        first = tl.min(tl.where(ny > 0, y0, 2147483647), axis=0)
        last = tl.max(tl.where(ny > 0, y0 + ny, 0), axis=0)
        taps_x = tl.max(nx, axis=0)
        # Per column, the taps inside the image, [k_lo, k_hi): the crop's columns outside it read zeros.
        sx0 = left + x0
        k_lo = tl.maximum(-sx0, 0)
        k_hi = tl.minimum(image_w - sx0, nx)
        col_at = sx0 * stride_x
        col_w = weights + col_line * width
        row_w = weights + row_line * width
        blue_at = 2 * green_at

        r = tl.zeros([TH, TW], tl.float32)
        g = r
        b = r
        zero_row = tl.zeros([TW], tl.float32)  # made once: each tl.zeros call is slow in the interpreter
        for y in range(first, last):
            ky = y - y0
            reached = (ky >= 0) & (ky < ny)
            # Antialiased filters overlap (every row between first and last is read); plain bilinear ones
            # shrinking skip rows, which are not filtered.
            readers = 1 if ANTIALIAS else tl.max(reached.to(tl.int32), axis=0)
            if readers > 0:
                sy = top + y
                hi = tl.where((sy >= 0) & (sy < image_h), k_hi, 0)  # a row outside the image reads zeros
                at = src + sy * stride_y + col_at
                row_r = zero_row
                row_g = zero_row
                row_b = zero_row
                for kx in range(0, taps_x):
                    wx = tl.load(col_w + kx, mask=cols_ok, other=0.0)
                    ok = (kx >= k_lo) & (kx < hi)
                    row_r += wx * tl.load(at, mask=ok, other=0).to(tl.float32)
                    row_g += wx * tl.load(at + green_at, mask=ok, other=0).to(tl.float32)
                    row_b += wx * tl.load(at + blue_at, mask=ok, other=0).to(tl.float32)
                    at += stride_x
                wy = tl.load(row_w + ky, mask=reached, other=0.0)[:, None]
                r += wy * row_r[None, :]
                g += wy * row_g[None, :]
                b += wy * row_b[None, :]
        return r, g, b

    @triton.jit
    def _tap(image, plane, mid_h, mid_w, x, y, weight, valid):
        """One neighbour (x, y) of a contiguous (3, mid_h, mid_w) image, weighted; zero outside it."""
        ok = valid & (x >= 0.0) & (x < mid_w) & (y >= 0.0) & (y < mid_h)
        at = image + tl.where(ok, y, 0.0).to(tl.int64) * mid_w + tl.where(ok, x, 0.0).to(tl.int64)
        weight = tl.where(ok, weight, 0.0)
        r = weight * tl.load(at, mask=ok, other=0).to(tl.float32)
        g = weight * tl.load(at + plane, mask=ok, other=0).to(tl.float32)
        b = weight * tl.load(at + 2 * plane, mask=ok, other=0).to(tl.float32)
        return r, g, b, weight

    @triton.jit
    def _warp(mid, mid_h, mid_w, matrices, fill, n, oy, ox, valid, NEAREST: tl.constexpr,
              HAS_FILL: tl.constexpr):
        """torchvision's affine_image of resized image n (contiguous in ``mid``) at output pixels (oy, ox): its
        grid_sample (zeros outside) and, with a fill, the fill blended in by the sampled mask. ``warp_torch``
        repeats these float32 steps in this order, to agree to the bit: change both together."""
        plane = mid_h.to(tl.int64) * mid_w
        image = mid + n * 3 * plane
        px = ox.to(tl.float32) + 0.5
        py = oy.to(tl.float32) + 0.5
        x = tl.load(matrices + n * 6 + 0) * px + tl.load(matrices + n * 6 + 1) * py + tl.load(matrices + n * 6 + 2)
        y = tl.load(matrices + n * 6 + 3) * px + tl.load(matrices + n * 6 + 4) * py + tl.load(matrices + n * 6 + 5)
        x = x - 0.5  # pixel coordinates to indices
        y = y - 0.5
        if NEAREST:
            r, g, b, cover = _tap(image, plane, mid_h, mid_w, _round_half_even(x), _round_half_even(y), 1.0, valid)
        else:  # grid_sample's bilinear weights, neighbours outside the image read as zeros
            x0 = tl.floor(x)
            y0 = tl.floor(y)
            x1 = x0 + 1.0
            y1 = y0 + 1.0
            r, g, b, cover = _tap(image, plane, mid_h, mid_w, x0, y0, (x1 - x) * (y1 - y), valid)
            r1, g1, b1, w1 = _tap(image, plane, mid_h, mid_w, x1, y0, (x - x0) * (y1 - y), valid)
            r2, g2, b2, w2 = _tap(image, plane, mid_h, mid_w, x0, y1, (x1 - x) * (y - y0), valid)
            r3, g3, b3, w3 = _tap(image, plane, mid_h, mid_w, x1, y1, (x - x0) * (y - y0), valid)
            r = r + r1 + r2 + r3
            g = g + g1 + g2 + g3
            b = b + b1 + b2 + b3
            cover = cover + w1 + w2 + w3
        if HAS_FILL:
            fill_r = tl.load(fill + 0)
            fill_g = tl.load(fill + 1)
            fill_b = tl.load(fill + 2)
            if NEAREST:
                r = tl.where(cover < 0.5, fill_r, r)
                g = tl.where(cover < 0.5, fill_g, g)
                b = tl.where(cover < 0.5, fill_b, b)
            else:
                r = (r - fill_r) * cover + fill_r
                g = (g - fill_g) * cover + fill_g
                b = (b - fill_b) * cover + fill_b
        return r, g, b

    @triton.jit
    def augment_kernel(
        src_ptrs, src_meta, boxes, starts, sizes, weights, taps_width, flips, ops, factors, partials, value_ptr,
        out_ptr, out_stride_n, out_stride_c, out_stride_y, out_stride_x, out_h, out_w, n_tiles,
        mid, mid_h, mid_w, matrices, fill,
        BRIGHTNESS: tl.constexpr, CONTRAST: tl.constexpr, SATURATION: tl.constexpr, HUE: tl.constexpr,
        GRAYSCALE: tl.constexpr, SLOTS: tl.constexpr, HAS_CONTRAST: tl.constexpr, MEAN_PASS: tl.constexpr,
        QUANTIZE: tl.constexpr, UNIT_DIVIDE: tl.constexpr, NORMALIZE: tl.constexpr, FLIPS: tl.constexpr,
        WARP: tl.constexpr, NEAREST: tl.constexpr, HAS_FILL: tl.constexpr, ANTIALIAS: tl.constexpr,
        TILES: tl.constexpr, TH: tl.constexpr, TW: tl.constexpr,
    ):
        """One tile of one image, crop to output (see the module docstring). The operation ids are the
        launcher's (``augment.OPERATION_IDS``), passed in as constexprs so that they are defined once. What a
        mode does not read is passed as None: ``partials`` without contrast, ``value_ptr`` without NORMALIZE
        (with QUANTIZE the (3, 256) table of each level's output value, else the mean and std), ``mid``,
        ``mid_h``, ``mid_w`` and ``matrices`` without WARP, ``fill`` without HAS_FILL. UNIT_DIVIDE: the float
        chain starts with ToTensor's x / 255, else with ToDtype's x * (1 / 255)."""
        tile = tl.program_id(0).to(tl.int64)
        n = tl.program_id(1).to(tl.int64)
        BOUND: tl.constexpr = 255.0 if QUANTIZE else 1.0

        # A tile of TH rows by TW columns of the resized (or warped) image, before the flips.
        tiles_x = tl.cdiv(out_w, TW)
        oy = (tile // tiles_x) * TH + tl.arange(0, TH)
        ox = (tile % tiles_x) * TW + tl.arange(0, TW)
        rows_ok = oy < out_h
        cols_ok = ox < out_w
        valid = rows_ok[:, None] & cols_ok[None, :]

        if WARP:  # the resized batch was written to ``mid`` by a first launch; sample it through the map
            r, g, b = _warp(mid, mid_h, mid_w, matrices, fill, n, oy[:, None], ox[None, :], valid, NEAREST,
                            HAS_FILL)
        else:
            r, g, b = _resample(src_ptrs, src_meta, boxes, starts, sizes, weights, taps_width, n, oy, ox, rows_ok,
                                cols_ok, out_h, out_w, ANTIALIAS, TH, TW)
        if QUANTIZE:  # torchvision rounds a resized (or warped) uint8 image back to uint8
            r = _round_half_even(r)
            g = _round_half_even(g)
            b = _round_half_even(b)
        elif not WARP:  # torchvision's first floats (``mid`` holds them already): ToTensor's x / 255, ToDtype's
            # x * (1 / 255)
            if UNIT_DIVIDE:
                r = tl.math.div_rn(r, 255.0)
                g = tl.math.div_rn(g, 255.0)
                b = tl.math.div_rn(b, 255.0)
            else:
                r = r * (1.0 / 255.0)
                g = g * (1.0 / 255.0)
                b = b * (1.0 / 255.0)

        partial = tl.sum(tl.sum(tl.zeros([TH, TW], tl.float32), axis=1), axis=0)
        if HAS_CONTRAST and not MEAN_PASS:
            sums = tl.load(partials + n * n_tiles + tl.arange(0, TILES), mask=tl.arange(0, TILES) < n_tiles,
                           other=0.0)
            mean = tl.sum(sums, axis=0) / (out_h * out_w).to(tl.float32)
        else:
            mean = 0.0
        for slot in tl.static_range(SLOTS):
            op = tl.load(ops + n * SLOTS + slot)
            factor = tl.load(factors + n * SLOTS + slot)
            if op == BRIGHTNESS:
                r = tl.minimum(tl.maximum(r * factor, 0.0), BOUND)
                g = tl.minimum(tl.maximum(g * factor, 0.0), BOUND)
                b = tl.minimum(tl.maximum(b * factor, 0.0), BOUND)
                if QUANTIZE:
                    r = tl.floor(r)
                    g = tl.floor(g)
                    b = tl.floor(b)
            elif op == CONTRAST:  # around the mean gray level of the whole image
                if MEAN_PASS:
                    partial = tl.sum(tl.sum(tl.where(valid, _gray_level(r, g, b, QUANTIZE), 0.0), axis=1), axis=0)
                r = _blend_values(r, mean, factor, BOUND, QUANTIZE)
                g = _blend_values(g, mean, factor, BOUND, QUANTIZE)
                b = _blend_values(b, mean, factor, BOUND, QUANTIZE)
            elif op == SATURATION:
                gray = _gray_level(r, g, b, QUANTIZE)
                r = _blend_values(r, gray, factor, BOUND, QUANTIZE)
                g = _blend_values(g, gray, factor, BOUND, QUANTIZE)
                b = _blend_values(b, gray, factor, BOUND, QUANTIZE)
            elif op == HUE:
                r, g, b = _hue_values(r, g, b, factor, QUANTIZE)
            elif op == GRAYSCALE:
                gray = _gray_level(r, g, b, QUANTIZE)
                r = gray
                g = gray
                b = gray

        if MEAN_PASS:
            tl.store(partials + n * n_tiles + tile, partial)
        else:
            if NORMALIZE:
                if QUANTIZE:  # whole levels 0..255: each one's value, computed by torchvision's ops (exact)
                    r = tl.load(value_ptr + _level(r), mask=valid, other=0.0)
                    g = tl.load(value_ptr + 256 + _level(g), mask=valid, other=0.0)
                    b = tl.load(value_ptr + 512 + _level(b), mask=valid, other=0.0)
                else:  # Normalize's (x - mean) / std, a true division as torch's
                    r = tl.math.div_rn(r - tl.load(value_ptr + 0), tl.load(value_ptr + 3))
                    g = tl.math.div_rn(g - tl.load(value_ptr + 1), tl.load(value_ptr + 4))
                    b = tl.math.div_rn(b - tl.load(value_ptr + 2), tl.load(value_ptr + 5))
            if FLIPS:  # flips act on the resized (or warped) image: written at the mirrored position
                hflip = tl.load(flips + n * 2 + 0)
                vflip = tl.load(flips + n * 2 + 1)
                oy = tl.where(vflip != 0, out_h - 1 - oy, oy)
                ox = tl.where(hflip != 0, out_w - 1 - ox, ox)
            at = out_ptr + n * out_stride_n + oy.to(tl.int64)[:, None] * out_stride_y + ox[None, :] * out_stride_x
            kind = out_ptr.dtype.element_ty
            tl.store(at, r.to(kind), mask=valid)
            tl.store(at + out_stride_c, g.to(kind), mask=valid)
            tl.store(at + 2 * out_stride_c, b.to(kind), mask=valid)

