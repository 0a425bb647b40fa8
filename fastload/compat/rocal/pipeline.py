"""rocAL's ``Pipeline`` and ``pipeline_def`` (``amd.rocal.pipeline``), run by fastload.

A rocAL pipeline owns a fastload.compat.dali pipeline (``definition.RocalGraph``:
the same graph, executor and loader) and drives it through DALI's API;
what is rocAL's is its constructor, its epochs and the way it hands out
batches (rocAL_pybind/amd/rocal/pipeline.py
at ROCm/rocAL 0981d5bb):

* the labels are not a graph output: ``get_image_labels()`` gives the
  batch's (int32, [batch]); the iterators read them there;
* an epoch is the decoder's padded shard (``fastload.compat.rocal.order.RocalOrder``):
  ``get_remaining_images()`` counts down from it by whole batches, ``run()``
  returns None once it is 0, and ``rocal_reset_loaders()`` starts the next
  epoch (from the start, whatever was left);
* ``run()`` returns one ``RocalTensor`` per output: a buffer of the
  operator's largest size with each image at its top left, in the
  operator's output layout and type.
"""

from __future__ import annotations

import ctypes
import functools
import inspect

import numpy as np
import torch

from ..dali import pipeline as dali_pipeline
from ..engine.graph import pop_pipeline, push_pipeline
from . import coco, npy, types
from .definition import Definition, RocalGraph
from .lowering import lower
from .imageops import pad_batch
from .meta import meta
from .ops_common import PREFIX, RocalParam


class RocalTensor:
    """One output batch as rocAL's ``rocalTensor`` shows it to Python."""

    def __init__(self, batch: torch.Tensor, layout: str, dtype_name: str, rois: list[tuple[int, int]]):
        self.batch, self._layout, self._dtype, self._rois = batch, layout, dtype_name, rois

    def dimensions(self) -> list[int]:
        return list(self.batch.shape)

    def dtype(self) -> str:
        return self._dtype

    def layout(self) -> str:
        return self._layout

    def batch_size(self) -> int:
        return self.batch.shape[0]

    def max_shape(self) -> list[int]:
        """(width, height) of the buffer, as rocAL gives it."""
        first = {"NHWC": 1, "NCHW": 2, "NFHWC": 2, "NFCHW": 3}[self._layout]
        height, width = self.batch.shape[first:first + 2]
        return [int(width), int(height)]

    def get_rois(self) -> np.ndarray:
        """Each sample's image in the buffer: (x, y, width, height) rows (it lies at the top left)."""
        return np.array([(0, 0, w, h) for h, w in self._rois], dtype=np.int32)

    def __len__(self) -> int:
        return self.batch.shape[0]

    def __getitem__(self, index: int) -> np.ndarray:
        return self.at(index)

    def at(self, index: int) -> np.ndarray:
        """Sample ``index``'s buffer, as numpy (a view)."""
        return self.batch[index].numpy()

    def copy_data(self, array, memory_type=None) -> None:
        """Copy the whole buffer into a numpy array or a torch tensor of its shape and type, or, as rocAL's
        scripts pass it, to the host memory a ``ctypes.c_void_p`` points at (HOST_MEMORY only: fastload's
        tensors are on the host), which must hold ``dimensions()`` values of ``dtype()``, as in rocAL:
        a pointer carries no size to check."""
        if isinstance(array, (torch.Tensor, np.ndarray)):
            # rocAL copies bytes: a destination of another shape with as many values of the same type takes
            # them in order; another type, size or a strided destination would not get what rocAL writes
            target = torch.from_numpy(array) if isinstance(array, np.ndarray) else array
            if target.dtype != self.batch.dtype or target.numel() != self.batch.numel() or \
                    not target.is_contiguous():
                raise ValueError(f"{PREFIX}: copy_data into {'a strided ' if not target.is_contiguous() else ''}"
                                 f"{target.dtype} {tuple(target.shape)}: the batch is {self.batch.dtype} "
                                 f"{tuple(self.batch.shape)} (rocAL copies its bytes as they are)")
            target.copy_(self.batch.reshape(target.shape))
        elif isinstance(array, ctypes.c_void_p):
            if not array.value:
                raise ValueError(f"{PREFIX}: copy_data to a null pointer")
            if memory_type not in (None, types.HOST_MEMORY, types.PINNED_MEMORY):
                raise NotImplementedError(f"{PREFIX}: copy_data to a device pointer is not supported (give a torch "
                                          f"tensor, which may live on the GPU)")
            batch = self.batch.contiguous()
            ctypes.memmove(array.value, batch.data_ptr(), batch.numel() * batch.element_size())
        else:
            raise TypeError(f"{PREFIX}: copy_data takes a numpy array, a torch tensor or a ctypes.c_void_p, not "
                            f"{type(array).__name__}")

    def __dlpack__(self, *args, **kwargs):
        return self.batch.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self.batch.__dlpack_device__()

    def __repr__(self) -> str:
        return f"RocalTensor(dims={self.dimensions()}, layout={self._layout}, dtype={self._dtype})"


def _handle(method: str, param, kind: type) -> RocalParam:
    """The handle ``method`` works on: one of ``kind`` (rocAL's dynamic_cast to the other kind fails and it
    changes nothing; fastload says so)."""
    if not isinstance(param, RocalParam) or param.kind is not kind:
        raise TypeError(f"{PREFIX}: {method} takes a handle from create_{kind.__name__}_param, not {param!r}")
    return param


def _refused(name: str, why: str):
    """A method of rocAL's Pipeline that fastload does not run: it raises NotImplementedError naming itself."""
    def method(*args, **kwargs):
        raise NotImplementedError(f"{PREFIX}: Pipeline.{name} is not supported: {why}")
    method.__name__ = name
    method.__doc__ = f"rocAL's ``{name}``: not supported ({why})."
    return method


def _uint8_pixels(item, place: int) -> np.ndarray:
    """An EXTSOURCE_RAW_UNCOMPRESSED item as the uint8 pixels rocAL reads. rocAL's binding takes each item
    as ``py::array_t<unsigned char>`` (rocal_pybind.cpp, wrapperRocalExternalSourceFeedInput), whose
    forcecast is numpy's unsafe cast: int64 256 becomes 0, float 0.7 becomes 0, a float past 255 is
    undefined. An item of another numeric type is taken only where that cast is exact (every value a whole
    number from 0 to 255: the pixels rocAL would read); any other item is a ValueError naming its place
    in the batch, its type and the first value the cast would change, never a silent wrap."""
    array = np.asarray(item)
    if array.dtype == np.uint8:
        return array
    what = f"{PREFIX}: fn.external_source(mode=EXTSOURCE_RAW_UNCOMPRESSED): item {place} of the batch has " \
           f"dtype {array.dtype}"
    if array.dtype.kind not in "biuf":
        raise ValueError(f"{what}, not uint8 pixels")  # (strings, objects: no numeric cast to check)
    with np.errstate(invalid="ignore"):
        exact = np.isfinite(array) & (array >= 0) & (array <= 255) & (array == np.trunc(array))
    if not exact.all():
        at = np.unravel_index(int(np.flatnonzero(~exact)[0]), array.shape)
        raise ValueError(f"{what} and {array[at].item()!r} at {tuple(int(i) for i in at)}: pixels are uint8 (rocAL "
                         f"casts other types to uint8 unchecked, wrapping or truncating them); convert it "
                         f"yourself, e.g. np.clip(x, 0, 255).round().astype(np.uint8)")
    return array.astype(np.uint8)


class Pipeline:
    """rocAL's pipeline: its arguments as in rocAL (``rocal_cpu=True`` for the CPU). ``tensor_layout``,
    ``tensor_dtype``, ``mean``, ``std`` and ``reverse_channels`` are kept for the iterators, which in rocAL
    store and do not apply them; each operator's output_layout/output_dtype decide its output.
    ``dct_scaling`` is fastload's own, as on fastload.compat.dali's Pipeline: "auto" lets a fused
    random-crop graph decode a large window at reduced DCT scale (faster; not rocAL's pixels).

    The graph is recorded and run by a fastload.compat.dali pipeline this one owns (``RocalGraph``);
    what the operators decide beside it is its ``Definition``. The underscored attributes rocAL's own
    Pipeline has (``_batch_size``, ``_device_id``, ``_multiplier``, ``_num_classes``, ...) keep their
    names and meanings: rocAL's plugins and scripts read them."""

    def __init__(self, batch_size=-1, num_threads=0, device_id=0, seed=1, exec_pipelined=True,
                 prefetch_queue_depth=2, exec_async=True, bytes_per_sample=0, rocal_cpu=False, max_streams=-1,
                 default_cuda_stream_priority=0, tensor_layout=types.NCHW, reverse_channels=False, mean=None,
                 std=None, tensor_dtype=types.FLOAT, output_memory_type=None, dct_scaling=False):
        self._num_threads, self._device_id = num_threads, device_id
        self._prefetch_queue_depth = prefetch_queue_depth
        self._rocal_cpu = bool(rocal_cpu)
        self._tensor_layout, self._tensor_dtype = tensor_layout, tensor_dtype
        self._reverse_channels = reverse_channels
        self._multiplier = [1 / x for x in std] if std else [1.0, 1.0, 1.0]
        self._offset = [-(m / s) for m, s in zip(mean, std)] if mean and std else [0.0, 0.0, 0.0]
        self._output_memory_type = output_memory_type if output_memory_type is not None else (
            types.HOST_MEMORY if rocal_cpu else types.DEVICE_MEMORY)
        self._reader = self._name = None  # the meta data reader's name, as rocAL's build sets it
        self.definition = Definition(batch_size)
        # device_id=None: the graph runs on the CPU; the fused plan is fastload's CPU path
        threads = num_threads if num_threads and num_threads > 0 else 1
        self._dali_pipeline = RocalGraph(self.definition, lower, batch_size=batch_size, num_threads=threads,
                                         device_id=None, seed=seed if seed is not None else 1,
                                         prefetch_queue_depth=prefetch_queue_depth, dct_scaling=dct_scaling)
        self._outputs: list | None = None  # what set_outputs was given, less the empty label lists
        self._slots: list = []  # per set_outputs argument: None for an image output, [] kept as given
        self._built = False
        self._remaining = 0
        self._current = None  # (output batches, labels) of the last run
        self._boxes = None  # the last batch's per-sample boxes table (coco.py's layout), as the getters give them
        self._ltrb_boxes = None  # the same in l, t, r, b: rocAL's encoder and matcher run before its xywh copy

    # -- rocAL's Pipeline's names for what the definition and the graph hold (its plugins read these)
    _batch_size = property(lambda self: self.definition.batch_size)
    _seed = property(lambda self: self._dali_pipeline.seed)
    _num_classes = property(lambda self: self.definition.num_classes)
    _one_hot_encoding = property(lambda self: self.definition.one_hot_encoding)
    _box_encoder = property(lambda self: self.definition.box_encoder)
    _box_iou_matcher = property(lambda self: self.definition.box_iou_matcher)
    _last_batch_policy = property(lambda self: self.definition.last_batch_policy)
    _is_external_source_operator = property(lambda self: self.definition.external is not None)

    # -- definition
    def __enter__(self):
        push_pipeline(self._dali_pipeline)
        return self

    def __exit__(self, *exc):
        pop_pipeline()

    def define_graph(self):
        """Deprecated in rocAL, which raises NotImplementedError and never calls it."""
        raise NotImplementedError(f"{PREFIX}: define_graph is deprecated in rocAL, which never calls it: define "
                                  f"the graph inside `with pipe:` and call set_outputs(), or use @pipeline_def")

    def set_outputs(self, *outputs) -> None:
        """The pipeline's outputs. An empty list among them (the labels ``fn.readers.file`` returns) keeps
        its place in what ``run()`` returns, so ``images, labels = pipe.run()`` unpacks as scripts write it."""
        self._slots = [[] if isinstance(out, (list, tuple)) and not out else None for out in outputs]
        self._outputs = []
        for out in outputs:
            self._outputs.extend(out if isinstance(out, (list, tuple)) else [out])

    def build(self):
        """Build the graph and its loader (rocalVerify); returns the pipeline, as rocAL's does."""
        if not self._built:
            if self._outputs is None:
                raise RuntimeError(f"{PREFIX}: the pipeline has no outputs: call set_outputs() inside "
                                   f"`with pipe:`, or use @pipeline_def")
            recorded = self.definition
            outputs = list(self._outputs)
            if recorded.external is None:
                if recorded.labels is None:
                    raise NotImplementedError(f"{PREFIX}: the pipeline reads nothing: give it a reader (and the "
                                              f"decoder after it, where rocAL has one) or fn.external_source")
                outputs.append(recorded.labels)
                if recorded.boxes is not None:
                    outputs.append(recorded.boxes)
                self._reader = self._name = "COCOReader" if recorded.boxes is not None else "labelReader"
            self._dali_pipeline.set_outputs(*outputs)
            self._dali_pipeline.build()
            self._built = True
            self._remaining = self._epoch_samples()
        return self

    @property
    def loader(self):
        """The fastload DataLoader that runs the pipeline's reader (its ``stats`` say where time goes); builds
        the pipeline first, as rocAL's getters do."""
        self.build()
        return self._dali_pipeline.loader

    @property
    def unfused(self) -> str | None:
        """Why the graph runs operator by operator (None: it is fused, or reads an external source)."""
        self.build()
        return self._dali_pipeline.unfused

    def _epoch_samples(self) -> int:
        if self.definition.external is not None:  # ceil(n / batch_size) batches (rocAL's plugins)
            return -(-int(self.definition.external[1].n) // self._batch_size) * self._batch_size
        order = self.loader.make_order()
        return order.counted() if hasattr(order, "counted") else len(order) * self._batch_size

    # -- running (rocAL's protocol)
    def rocal_run(self) -> int:
        """Make the next batch: 0 (OK), or RUNTIME_ERROR when the epoch has no batch left. The batch is the
        graph's next (DALI's ``run()``: the loader's next batch, or the external source's)."""
        self.build()
        if self._remaining < self._batch_size:
            return int(types.RUNTIME_ERROR)
        recorded = self.definition
        if recorded.external is not None:
            labels = self._feed_external()
            images = self._dali_pipeline.run()
        elif recorded.boxes is not None:
            *images, labels, boxes = self._dali_pipeline.run()
            keep_xywh = not self._rocal_coco_ltrb() and recorded.boxes is recorded.decoded_boxes
            self._ltrb_boxes = list(boxes.tensors)
            self._boxes = [coco.as_xywh(table) if keep_xywh else table for table in boxes.tensors]
        else:
            *images, labels = self._dali_pipeline.run()
            labels = labels.as_tensor().reshape(-1).to(torch.int32)
        tensors = iter([self._as_rocal(node, out) for node, out in zip(self._outputs, images)])
        self._current = ([next(tensors) if slot is None else [] for slot in self._slots], labels)
        self._remaining -= self._batch_size
        return int(types.OK)

    def _feed_external(self) -> torch.Tensor:
        """Give the external source its next batch from the user's iterator; the batch's labels."""
        op, source, mode = self.definition.external
        batch = next(source)
        items, labels = batch[0], batch[1] if len(batch) > 1 else None
        if len(items) != self._batch_size:
            raise ValueError(f"{PREFIX}: the external source gave {len(items)} items for a batch of "
                             f"{self._batch_size} (rocAL's batches are always full)")
        if mode == types.EXTSOURCE_FNAME:
            values = [torch.tensor(list(str(name).encode()), dtype=torch.uint8) for name in items]
        elif mode == types.EXTSOURCE_RAW_COMPRESSED:
            values = [torch.from_numpy(np.array(item, dtype=np.uint8).reshape(-1)) for item in items]
        else:  # the pixels, each cut to its ROI (roi_height, roi_width)
            heights, widths = batch[2], batch[3]
            values = [torch.from_numpy(_uint8_pixels(item, place)[:int(h), :int(w)]).contiguous()
                      for place, (item, h, w) in enumerate(zip(items, heights, widths))]
        self._dali_pipeline.feed_input(op.outputs[0], values)
        if labels is None:
            return torch.zeros(self._batch_size, dtype=torch.int32)
        return torch.as_tensor(np.asarray(labels)).reshape(-1).to(torch.int32)

    def run(self):
        """The next batch's outputs (a list of RocalTensor), or None when the epoch is done (rocAL's run)."""
        self.build()
        if self.get_remaining_images() > 0 and self.rocal_run() == 0:
            return list(self._current[0])
        return None

    def get_output_tensors(self) -> list:
        if self._current is None:
            shapes = [meta(node).audio for node in self._outputs or ()]
            if shapes and all(shapes):  # rocAL's audio scripts read the buffers' dimensions before running
                return [AudioTensor([torch.zeros((0,) * len(shape.dims))] * self._batch_size, shape)
                        for shape in shapes]
            raise RuntimeError(f"{PREFIX}: no batch yet: call run() or rocal_run() first")
        return [out for out in self._current[0] if isinstance(out, RocalTensor)]

    def get_one_hot_encoded_labels(self, array_ptr, dest_device_type=None) -> None:
        """The last batch's labels one-hot over fn.one_hot's num_classes (rocAL's rule: label L at L - 1, 0 at
        the last place), int32 [batch, classes], written into a numpy array or torch tensor of that many
        int32 values, or into the host memory an address (``tensor.data_ptr()``, as rocAL's plugins pass
        it) or ``ctypes.c_void_p`` points at (getOneHotEncodedLabels)."""
        from .plugin._common import one_hot
        if not self._one_hot_encoding:
            raise RuntimeError(f"{PREFIX}: get_one_hot_encoded_labels: the pipeline has no fn.one_hot")
        encoded = torch.from_numpy(one_hot(self.get_image_labels(), self._num_classes).reshape(-1))
        if isinstance(array_ptr, (np.ndarray, torch.Tensor)):
            target = torch.from_numpy(array_ptr) if isinstance(array_ptr, np.ndarray) else array_ptr
            if target.dtype != torch.int32 or target.numel() != encoded.numel() or not target.is_contiguous():
                raise ValueError(f"{PREFIX}: get_one_hot_encoded_labels writes {encoded.numel()} contiguous int32 "
                                 f"values, not into a {target.dtype} {tuple(target.shape)}")
            target.copy_(encoded.reshape(target.shape))
            return
        address = array_ptr.value if isinstance(array_ptr, ctypes.c_void_p) else array_ptr
        if not isinstance(address, int) or not address:
            raise TypeError(f"{PREFIX}: get_one_hot_encoded_labels takes a numpy array, a torch tensor, an address or "
                            f"a ctypes.c_void_p, not {array_ptr!r}")
        if dest_device_type not in (None, types.HOST_MEMORY, types.PINNED_MEMORY):
            raise NotImplementedError(f"{PREFIX}: get_one_hot_encoded_labels to device memory is not supported "
                                      f"(give a torch tensor, which may live on the GPU)")
        ctypes.memmove(address, encoded.data_ptr(), encoded.numel() * encoded.element_size())

    get_image_name = _refused("get_image_name", "fastload does not keep the batch's file names")
    get_image_name_length = _refused("get_image_name_length", "fastload does not keep the batch's file names")
    get_roi_img_sizes = _refused("get_roi_img_sizes", "fastload does not keep the decoded sizes as meta data "
                                                      "(an output's get_rois() gives its images' regions)")
    get_mask_count = _refused("get_mask_count", "fn.readers.coco(masks=True) is not supported")
    get_mask_coordinates = _refused("get_mask_coordinates", "fn.readers.coco(masks=True) is not supported")
    copyToExternalTensor = _refused("copyToExternalTensor", "use an output's copy_data(), or the iterators")
    # -- rocAL's parameter handles (rocal_api_parameters: rocalCreateIntParameter, rocalUpdateIntParameter, ...)
    @classmethod
    def create_int_param(cls, value=1) -> RocalParam:
        """A handle holding an int an operator reads as it runs (``ops_common.RocalParam``)."""
        return RocalParam(value, int)

    @classmethod
    def create_float_param(cls, value=1) -> RocalParam:
        """A handle holding a float an operator reads as it runs (``ops_common.RocalParam``)."""
        return RocalParam(value, float)

    @classmethod
    def update_int_param(cls, value=1, param=1) -> None:
        _handle("update_int_param", param, int).value = int(value)

    @classmethod
    def update_float_param(cls, value=1, param=1) -> None:
        _handle("update_float_param", param, float).value = float(value)

    @classmethod
    def get_int_value(cls, param) -> int:
        return int(_handle("get_int_value", param, int).value)

    @classmethod
    def get_float_value(cls, param) -> float:
        return float(_handle("get_float_value", param, float).value)

    def get_image_labels(self) -> np.ndarray:
        """The last batch's labels: int32, [batch_size]."""
        if self._current is None:
            raise RuntimeError(f"{PREFIX}: no batch yet: call run() or rocal_run() first")
        webdataset = self.definition.webdataset
        if webdataset is not None:
            raise RuntimeError(f"{PREFIX}: fn.readers.webdataset gives no labels: get_ascii_datas() gives each "
                               f"sample's {', '.join(webdataset.reader.extensions) or 'no other'} "
                               f"members, as rocAL")
        if self.definition.unlabelled:
            raise RuntimeError(f"{PREFIX}: {self.definition.unlabelled}")
        return self._current[1].numpy()

    # -- fn.readers.coco's meta data (rocal_pybind.cpp: getBoundingBoxLabels, getBoundingBoxCords, ...)
    def _tables(self) -> list:
        if self._boxes is None:
            raise RuntimeError(f"{PREFIX}: no boxes: the pipeline reads no fn.readers.coco, or has not run")
        return self._boxes

    def _rocal_coco_ltrb(self) -> bool:
        return self.definition.reader is None or getattr(self.definition.reader, "ltrb", True)

    def get_bounding_box_labels(self) -> list[np.ndarray]:
        """The last batch's box labels: per image an int32 array [boxes]."""
        return [table[1:, 4].numpy().astype(np.int32) for table in self._tables()]

    def get_bounding_box_cords(self) -> list[np.ndarray]:
        """The last batch's boxes: per image a flat float32 array [l, t, r, b, l, t, r, b, ...] (x, y, w, h
        with ltrb=False where no operator moved them), as rocAL gives them."""
        return [table[1:, :4].numpy().astype(np.float32).reshape(-1) for table in self._tables()]

    def get_bounding_box_count(self) -> int:
        """The last batch's number of boxes, all images together, or with fn.box_encoder batch x anchors
        (rocalGetBoundingBoxCount; MasterGraph::bounding_box_batch_count)."""
        if self._box_encoder is not None:
            return len(self._tables()) * len(self._box_encoder.anchors)
        return sum(len(table) - 1 for table in self._tables())

    def get_encoded_boxes_and_lables(self, batch_size, num_anchors) -> tuple[np.ndarray, np.ndarray]:
        """fn.box_encoder's output for the last batch: (int32 labels [batch, anchors], float32 boxes
        [batch * anchors * 4]), as rocal_pybind's rocalGetEncodedBoxesAndLables gives them (anchors.py)."""
        if self._box_encoder is None:
            raise RuntimeError(f"{PREFIX}: get_encoded_boxes_and_lables: the pipeline has no fn.box_encoder")
        tables, count = self._ltrb(), len(self._box_encoder.anchors)
        if int(batch_size) * int(num_anchors) != len(tables) * count:
            raise ValueError(f"{PREFIX}: get_encoded_boxes_and_lables({batch_size}, {num_anchors}): the batch has "
                             f"{len(tables)} images of {count} anchors (rocAL: \"num_encoded_boxes is not correct\")")
        encoded = [self._box_encoder.encode(table[1:, :4].numpy(), table[1:, 4].numpy().astype(np.int32))
                   for table in tables]
        return (np.stack([labels for _, labels in encoded]).reshape(int(batch_size), int(num_anchors)),
                np.concatenate([boxes.reshape(-1) for boxes, _ in encoded]))

    def copy_encoded_boxes_and_lables(self, bbox_array, label_array) -> None:
        """rocalCopyEncodedBoxesAndLables: despite its name it copies the batch's boxes as the operators left
        them (not fn.box_encoder's), float32, and their int32 labels, image after image, into the first
        entries of the caller's arrays; [l, t, r, b], or [x, y, w, h] where get_bounding_box_cords gives
        those and there is no fn.box_encoder (rocAL turns its boxes to xywh in place as it stores a batch,
        and skips that with a box encoder: ring_buffer.cpp, meta_data.h)."""
        tables = self._ltrb() if self._box_encoder is not None else self._tables()
        if not isinstance(bbox_array, np.ndarray) or bbox_array.dtype != np.float32 or not bbox_array.flags.writeable \
                or not bbox_array.flags.c_contiguous:
            raise TypeError(f"{PREFIX}: copy_encoded_boxes_and_lables writes boxes into a writable, contiguous "
                            f"float32 numpy array, not {type(bbox_array).__name__}")
        boxes = np.concatenate([table[1:, :4].numpy().astype(np.float32).reshape(-1) for table in tables])
        if bbox_array.size < boxes.size:
            raise ValueError(f"{PREFIX}: copy_encoded_boxes_and_lables: the boxes array holds {bbox_array.size} "
                             f"values, the batch gives {boxes.size}")
        _fill("copy_encoded_boxes_and_lables", label_array,
              [int(label) for table in tables for label in table[1:, 4]])
        bbox_array.reshape(-1)[:boxes.size] = boxes

    def get_matched_indices(self) -> np.ndarray:
        """fn.box_iou_matcher's output for the last batch: int32 [batch * anchors], each anchor's box, -1
        (below low_threshold) or -2 (below high_threshold) (anchors.py; rocal_pybind's getMatchedIndices).
        rocAL's array runs on to batch x 120087 (MAX_RETINANET_ANCHORS, its buffer's size) past what it
        writes; fastload gives the written part."""
        if self._box_iou_matcher is None:
            raise RuntimeError(f"{PREFIX}: get_matched_indices: the pipeline has no fn.box_iou_matcher (rocAL: \"Box "
                               f"IOU matcher variable not set cannot return matched idx\")")
        return np.concatenate([self._box_iou_matcher.match(table[1:, :4].numpy()) for table in self._ltrb()])

    def _ltrb(self) -> list:
        self._tables()
        return self._ltrb_boxes

    def get_image_id(self, array) -> None:
        """Write the last batch's json image ids into ``array``'s first entries (an int32 numpy array, as
        rocAL's binding fills it)."""
        _fill("get_image_id", array, [int(table[0, 0]) for table in self._tables()])

    def get_img_sizes(self, array) -> None:
        """Write the last batch's json (width, height) pairs into ``array``'s first entries (int32,
        [batch * 2] or more)."""
        _fill("get_img_sizes", array, [v for table in self._tables() for v in (int(table[0, 1]), int(table[0, 2]))])

    def get_ascii_datas(self) -> list[list[np.ndarray]]:
        """fn.readers.webdataset: the last batch's non-JPEG members, per extension (sorted) a list of one
        uint8 array of raw bytes per sample, empty where missing (rocAL's getAsciiDatas)."""
        if self._current is None:
            raise RuntimeError(f"{PREFIX}: no batch yet: call run() or rocal_run() first")
        webdataset = self.definition.webdataset
        if webdataset is None:
            raise RuntimeError(f"{PREFIX}: get_ascii_datas() is fn.readers.webdataset's; this pipeline reads with "
                               f"another reader")
        samples = [webdataset.ascii(int(i)) for i in self._current[1]]
        return [[sample[e] for sample in samples] for e in range(len(webdataset.reader.extensions))]

    def get_remaining_images(self) -> int:
        self.build()
        return self._remaining

    def is_empty(self) -> bool:
        return self.get_remaining_images() < self._batch_size

    def get_last_batch_padded_size(self) -> int:
        """How many copies of the last file fill this shard's last batch."""
        loader = self.loader  # (built first)
        return loader.make_order().padded if loader is not None else 0

    def rocal_reset_loaders(self) -> None:
        """Start the next epoch, from its start (what the last one left is dropped, as rocAL's reset)."""
        self.build()
        self._dali_pipeline.restart()
        self._remaining = self._epoch_samples()

    def timing_info(self):
        """rocAL's TimingInfo fields, in microseconds, from the loader's stats."""
        loader = self.loader
        spent = loader.stats.seconds if loader is not None else {}

        def seconds(stage):
            return spent.get(stage, 0.0)
        return _TimingInfo(int(seconds("read") * 1e6), int(seconds("decode") * 1e6), int(seconds("augment") * 1e6),
                           int(seconds("copy") * 1e6))

    def set_seed(self, seed=0) -> None:
        self._dali_pipeline.reseed(seed)

    def get_handle(self):
        return self

    def rocal_release(self) -> None:
        if self._built and self.loader is not None:
            self.loader.close()

    def _as_rocal(self, node, batch) -> RocalTensor:
        """A graph output's per-sample HWC images as rocAL's padded buffer in the operator's layout."""
        audio = meta(node).audio
        if audio is not None:  # an audio tensor: each sample's region at its origin in [batch, *dims]
            return AudioTensor(batch.tensors, audio)
        out = meta(node).image
        if out is None:  # an array of fn.readers.numpy
            array = meta(node).array
            return RocalArray(npy.pad_arrays(list(batch.tensors), array.max_shape), array.layout, array.dtype)
        if out.layout in (types.NFHWC, types.NFCHW):  # fn.readers.video's sequences: frames padded alike
            frames = [pad_batch(list(sample), out.buffer, "NHWC") for sample in batch.tensors]
            dense = torch.stack(frames)
            layout = out.layout.name
            rois = [(sample.shape[1], sample.shape[2]) for sample in batch.tensors]
            return RocalTensor(dense.permute(0, 1, 4, 2, 3).contiguous() if layout == "NFCHW" else dense, layout,
                               out.dtype_name, rois)
        layout = "NCHW" if out.layout == types.NCHW else "NHWC"
        if self._dali_pipeline.fused:  # the fused plan's batch: dense, in the output's layout already
            dense = batch.as_tensor()
            return RocalTensor(dense, layout, out.dtype_name, [out.buffer] * dense.shape[0])
        samples = list(batch.tensors)
        rois = [(s.shape[0], s.shape[1]) for s in samples]
        return RocalTensor(pad_batch(samples, out.buffer, layout), layout, out.dtype_name, rois)


def _fill(method: str, array, values: list[int]) -> None:
    """Write ``values`` into the first entries of the caller's int32 array, as rocAL's binding writes
    into its buffer; anything the write would not reach (a list, a copy) is refused."""
    if not isinstance(array, np.ndarray) or array.dtype != np.int32 or not array.flags.writeable or \
            not array.flags.c_contiguous:
        raise TypeError(f"{PREFIX}: {method} writes into a writable, contiguous int32 numpy array "
                        f"(np.zeros(n, dtype='int32')), not {type(array).__name__}")
    if array.size < len(values):
        raise ValueError(f"{PREFIX}: {method}: the array holds {array.size} values, the batch gives {len(values)}")
    array.reshape(-1)[:len(values)] = values


class RocalArray(RocalTensor):
    """A tensor of fn.readers.numpy (or fn.log1p after it) that is no image: [batch] + the dataset's
    largest shape, each array at its origin. Its layout is the one the reader was told."""

    def __init__(self, batch: torch.Tensor, layout: str, dtype_name: str):
        super().__init__(batch, layout, dtype_name, [])

    def max_shape(self) -> list[int]:
        raise NotImplementedError(f"{PREFIX}: max_shape() of a {self._layout} array of fn.readers.numpy is not "
                                  f"supported (dimensions() gives its shape)")

    def get_rois(self) -> np.ndarray:
        raise NotImplementedError(f"{PREFIX}: get_rois() of a {self._layout} array of fn.readers.numpy is not "
                                  f"supported")


class AudioTensor(RocalTensor):
    """An audio tensor as rocAL's binding shows it: [batch, X, Y] (or [batch, 1]) with each sample's region
    at its origin, zeros around it; ``copy_roi`` gives rocAL's per-sample [begins..., extents...]."""

    def __init__(self, samples, shape):
        dtype = getattr(torch, shape.dtype)
        batch = torch.zeros((len(samples), *shape.dims), dtype=dtype)
        for place, sample in zip(batch, samples):
            place[tuple(slice(0, n) for n in sample.shape)] = sample
        super().__init__(batch, shape.layout, shape.dtype, [tuple(sample.shape) for sample in samples])

    def roi_dims_size(self) -> int:
        return self.batch.dim() - 1

    def rois(self) -> np.ndarray:
        """Per sample [begin 0 .. begin D-1, extent 0 .. extent D-1] (rocAL's Roi buffer); a [batch, 1]
        value's is [0, 1]."""
        if self.roi_dims_size() == 1:
            return np.array([(0, 1)] * len(self), dtype=np.int32)
        return np.array([(0, 0, *extent) for extent in self._rois], dtype=np.int32)

    def copy_roi(self, array) -> None:
        _fill("copy_roi", array, self.rois().reshape(-1).tolist())

    def max_shape(self) -> list[int]:
        return list(self.batch.shape[1:])

    get_rois = rois


class _TimingInfo:
    def __init__(self, load_time, decode_time, process_time, transfer_time):
        self.load_time, self.decode_time = load_time, decode_time
        self.process_time, self.transfer_time = process_time, transfer_time


def pipeline_def(fn=None, **pipeline_kwargs):
    """rocAL's decorator: calling the function makes a Pipeline (not built) whose outputs are what it
    returns; a keyword the function takes goes to it, one the Pipeline takes goes there, any other is an
    error (rocAL asserts; _discriminate_args)."""
    def decorate(func):
        names = inspect.signature(func).parameters
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in names.values()):
            raise TypeError(f"Using variadic keyword argument `**{func.__name__}` in a graph-defining function "
                            f"is not allowed.")
        ctor = inspect.signature(Pipeline.__init__).parameters

        @functools.wraps(func)
        def create_pipeline(*args, **kwargs):
            if "debug" not in names:
                kwargs.pop("debug", None)
            pipe_args, fn_args = dali_pipeline.split_kwargs(func.__name__, names, ctor, pipeline_kwargs, kwargs)
            pipe = Pipeline(**pipe_args)
            with pipe:
                outputs = func(*args, **fn_args)
            outputs = () if outputs is None else outputs
            pipe.set_outputs(*(outputs if isinstance(outputs, tuple) else (outputs,)))
            return pipe
        create_pipeline._is_pipeline_def = True
        return create_pipeline
    return decorate(fn) if fn is not None else decorate
