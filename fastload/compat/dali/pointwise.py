"""DALI's point-wise colour operators (being written; each operator declared with ``@operator(...)`` as in ``spec``)."""
