"""DALI's decoder crops, resize-crop-mirror and tensor resizes (being written; each operator declared with ``@operator(...)`` as in ``spec``)."""
