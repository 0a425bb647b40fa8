"""DALI's perspective warp and remap (being written; each operator declared with ``@operator(...)`` as in ``spec``)."""
