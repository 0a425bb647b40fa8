"""The thread pool's module under its old name: ``fastload.thread_pool`` (renamed so that "pipeline" means
only DALI's, rocAL's and the JSON pipelines). ``fastload.pipeline`` is that module itself, not a copy of
its names, so a setting made through the old name -- ``fastload.pipeline.CLOSE_TIMEOUT``, which earlier
docs name -- still takes effect."""

import sys

from . import thread_pool

sys.modules[__name__] = thread_pool
