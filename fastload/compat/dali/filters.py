"""DALI's convolution and morphology filters (being written; each operator declared with ``@operator(...)`` as in ``spec``)."""
