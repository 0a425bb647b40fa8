"""DALI's box, ROI and segmentation operators (being written; each operator declared with ``@operator(...)`` as in ``spec``)."""
