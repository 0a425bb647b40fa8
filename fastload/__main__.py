"""``python -m fastload``: the same as the ``fastload`` command."""

import sys

from .cli import main

sys.exit(main())
