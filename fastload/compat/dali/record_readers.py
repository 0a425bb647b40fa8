"""DALI's record readers (being written; each operator declared with ``@operator(...)`` as in ``spec``)."""
