"""fastload serve's limits policy, in one place: every bound a request's numbers, names and sizes are checked
against, and the caps on what the server holds. Nothing here runs; serve_protocol.py's parsers (request
parameters, repository load parameters, model names, tensors) and the server read these numbers, so a bound
changes here alone.

Why bounds at all: a number from a request reaches a queue's timeout, a loop count or a thread count. One
that is infinite, huge, negative or of the wrong type (JSON's ``true`` is an int in Python) would be taken,
then kill a batcher thread (queue.get's timeout overflows) or hold the event loop for seconds; so every such
number is refused with 400 naming it, before use.
"""

from __future__ import annotations

MAX_MODELS = 64
"""Models loaded at once by default (``InferenceServer(max_models=...)``, ``--max-models``): each holds a
batcher thread and its pipeline's buffers. A load past it is refused with 429 (the HTTP status of gRPC's
RESOURCE_EXHAUSTED in Google's canonical mapping: a quota is used up; unload a model, then load)."""

MAX_CLASSIFIER_PARAMS = 150_000_000
"""A classifier a repository load names has at most this many parameters (600 MB of float32; VGG-19 has 144
million): ViT-H/14 (633 million) or RegNetY-128GF would take gigabytes and minutes on a CPU per load. The
command line's --model is not bounded: its user runs the server."""

MAX_BATCH_SIZE = 1024
"""A model's max_batch_size at most (a repository load's ``batch``); also the most BYTES elements any tensor
is parsed into, whatever its model: a request of more images is refused anyway, so parsing stops there."""

MAX_QUEUE_DELAY_US = 10_000_000
"""A model's max_queue_delay_microseconds at most (10 s): a batch waits that long for more images after its
first at most."""

MAX_QUEUE = 512
"""Images waiting in one model's batcher queue by default (``Batcher(max_queue=...)``, ``--max-queue``); past
it a request is answered 503 with Retry-After, not queued: each waiting image is a decoded image (up to
1000 x 1000 x 3 bytes), so an unbounded queue is unbounded memory."""

MAX_NAME = 256
"""Characters in a model's name at most. A name is also refused if it holds a control character (NUL, a
newline: it reaches log lines and /metrics labels) or '/' (it is a URL path segment)."""

MAX_JSON_VALUES = 65_536
"""Commas and colons in a JSON body at most, counted in the raw bytes before it is parsed (a cheap bound on
its number of values: json.loads of 20 MiB of ``[0,0,...]`` holds the event loop for half a second). A real
request has a few dozen: its images are base64 strings, which hold neither."""

MAX_JSON_DEPTH = 32
"""How deep a tensor's JSON ``data`` may nest (its shape's rank, in practice 1)."""

MAX_SHAPE_RANK = 16
"""Dimensions of a request tensor's shape at most."""

MAX_DIGITS = 20
"""Digits of a number given as text (a header, a gRPC string parameter) at most; Python refuses to convert
more than 4,300 (a ValueError)."""

MAX_CLASSIFICATION = 1 << 20
"""An output's ``classification`` (top k classes) at most; k above the class count gives every class."""

LOOP_LAG_S = 0.1
"""The target: no request holds the server's event loop longer than this (the tests' watchdog checks it with
a margin for a loaded machine)."""
