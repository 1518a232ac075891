"""Host launch cost per eager / compiled PyTorch kernel (``cost/framework.py``).

Fitted to ``projection/data/kernel_evidence.json`` by ``scripts/fit_kernels.py`` (section ``host`` of
``FITTED``).

GENERATED: do not edit by hand; rerun ``python scripts/fit_kernels.py --write``.  Each curve lists
the record ids it was fitted to and its rms log error on them (``tests/test_kernel_curves.py``).
"""

CURVES = {'compile': {'gpu_step_s': 0.0081,
             'kernels': 671,
             'records': ['mle-b200-compile-Llama-3.2-1B-forward+backward'],
             'step_s': 0.0126,
             't_launch': 1.878e-05},
 'eager': {'gpu_step_s': 0.0081,
           'kernels': 1532,
           'records': ['mle-b200-compile-Llama-3.2-1B-forward+backward'],
           'step_s': 0.048799999999999996,
           't_launch': 3.185e-05}}
