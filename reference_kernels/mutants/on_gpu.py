"""The catalog's GPU planted-bug kernels and their correct twins as module-level specs,
to run on a real GPU, where ``triton:<gpu>`` and ``mosaic_gpu:<gpu>`` execute:

    pallas-verify conformance reference_kernels.mutants.on_gpu \\
        --backends interpret,gpu_interpret,triton:h100,mosaic_gpu:h100

What each showed on an H200 is in docs/cluster.md (section 5, "On a real GPU"). A race that the
sanitizing interpreter finds need not change a chip's outputs on every run; a twin must pass.
"""

from __future__ import annotations

from reference_kernels.mutants import gpu_mutants, mutants

_GPU = [m for m in (*mutants(), *gpu_mutants()) if "gpu" in m.spec.platforms]

globals().update({m.spec.name: m.spec for m in _GPU})
globals().update({m.twin.name: m.twin for m in _GPU if m.twin is not None})
