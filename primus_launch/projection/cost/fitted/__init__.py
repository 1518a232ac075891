"""Kernel curves fitted to ``projection/data/kernel_evidence.json`` by ``scripts/fit_kernels.py``:
``FITTED[section][curve]``, one module of this package per section.

GENERATED: do not edit by hand; rerun ``python scripts/fit_kernels.py --write``.  Each curve lists
the record ids it was fitted to and its rms log error on them (``tests/test_kernel_curves.py``).
"""

from primus_launch.projection.cost.fitted import attention
from primus_launch.projection.cost.fitted import collectives
from primus_launch.projection.cost.fitted import deepep
from primus_launch.projection.cost.fitted import fp8_quant
from primus_launch.projection.cost.fitted import gemm
from primus_launch.projection.cost.fitted import grouped_gemm
from primus_launch.projection.cost.fitted import hbm
from primus_launch.projection.cost.fitted import host

FITTED = {
    'attention': attention.CURVES,
    'collectives': collectives.CURVES,
    'deepep': deepep.CURVES,
    'fp8_quant': fp8_quant.CURVES,
    'gemm': gemm.CURVES,
    'grouped_gemm': grouped_gemm.CURVES,
    'hbm': hbm.CURVES,
    'host': host.CURVES,
}
