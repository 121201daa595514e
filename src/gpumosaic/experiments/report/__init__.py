"""The report page of a result folder: one self-contained HTML file (``build_report``)."""
