"""DALI's tensor-shaping and constant operators (being written; each operator declared with ``@operator(...)`` as in ``spec``)."""
