"""DALI's reductions (being written; each operator declared with ``@operator(...)`` as in ``spec``)."""
