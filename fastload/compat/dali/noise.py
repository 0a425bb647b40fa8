"""DALI's random distributions and noise operators (being written; each operator declared with ``@operator(...)`` as in ``spec``)."""
