"""FP8 recipe quantisation: the HBM efficiency of each recipe's cast / amax / transpose bytes.

Fitted to ``projection/data/kernel_evidence.json`` by ``scripts/fit_kernels.py`` (section ``fp8_quant`` of
``FITTED``).

GENERATED: do not edit by hand; rerun ``python scripts/fit_kernels.py --write``.  Each curve lists
the record ids it was fitted to and its rms log error on them (``tests/test_kernel_curves.py``).
"""

CURVES = {'blockwise': {'eff': 0.34,
               'per_arch': {'hopper': 0.34},
               'per_gpu': {'h200': 0.34},
               'records': ['te-h200-layer-autocast-FP8BlockScaling', 'te-h200-layer-pre-quantized-FP8CurrentScaling'],
               'uncapped': {'h200': 0.34}},
 'delayed': {'eff': 0.787,
             'per_arch': {'blackwell': 0.733, 'blackwell_ultra': 0.742, 'hopper': 0.832},
             'per_gpu': {'b300': 0.742, 'h200': 0.832},
             'records': ['te-b300-layer-autocast-FP8DelayedScaling',
                         'te-b300-layer-pre-quantized-FP8CurrentScaling',
                         'te-h200-layer-autocast-FP8DelayedScaling',
                         'te-h200-layer-pre-quantized-FP8CurrentScaling'],
             'uncapped': {'b300': 0.975, 'h200': 0.943}},
 'mxfp8': {'eff': 0.708,
           'per_arch': {'blackwell': 0.708, 'blackwell_ultra': 0.708},
           'per_gpu': {'b300': 0.708},
           'records': ['te-b300-layer-autocast-MXFP8', 'te-b300-layer-pre-quantized-MXFP8'],
           'uncapped': {'b300': 0.708}},
 'nvfp4': {'eff': 0.6,
           'per_arch': {'blackwell': 0.6, 'blackwell_ultra': 0.6},
           'per_gpu': {'b300': 0.6},
           'records': ['te-b300-layer-autocast-NVFP4', 'te-b300-layer-pre-quantized-NVFP4'],
           'uncapped': {'b300': 0.6}},
 'tensorwise': {'eff': 0.761,
                'per_arch': {'blackwell': 0.69, 'blackwell_ultra': 0.69, 'hopper': 0.832},
                'per_gpu': {'b300': 0.69, 'h200': 0.832},
                'records': ['te-b300-layer-autocast-FP8CurrentScaling',
                            'te-b300-layer-pre-quantized-FP8CurrentScaling',
                            'te-h200-layer-autocast-FP8CurrentScaling',
                            'te-h200-layer-pre-quantized-FP8CurrentScaling'],
                'uncapped': {'b300': 0.69, 'h200': 0.887}}}
