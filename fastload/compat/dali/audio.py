"""DALI's audio operators (being written; each operator declared with ``@operator(...)`` as in ``spec``)."""
