"""DALI's Python-function operators (being written; each operator declared with ``@operator(...)`` as in ``spec``)."""
