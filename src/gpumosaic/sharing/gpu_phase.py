"""What a GPU phase of a job is, for every part that models or emulates one (no imports:
an emulated job reads it at start-up)."""

# A GPU phase keeps the GPU busy this share of its time (kernels; the rest is launch and
# host work between them), so two jobs' phases run at once faster than back to back. The
# nvshare model's compute sharing (``sharing/nvshare.py``) and the thesis's "off" rows
# use it; an emulated job under ``serve --sharing`` splits each step this way
# (``runtime/emulate.py``). Calibrated: the median of Gavel's P100 pairs, and it agrees
# with the small "off" rows of the nvshare table (docs/sharing.md, "Parameters").
GPU_PHASE_BUSY = 0.85
