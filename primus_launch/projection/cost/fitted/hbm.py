"""HBM streaming efficiency per architecture (fraction of the datasheet bandwidth).

Fitted to ``projection/data/kernel_evidence.json`` by ``scripts/fit_kernels.py`` (section ``hbm`` of
``FITTED``).

GENERATED: do not edit by hand; rerun ``python scripts/fit_kernels.py --write``.  Each curve lists
the record ids it was fitted to and its rms log error on them (``tests/test_kernel_curves.py``).
"""

CURVES = {'ampere': {'eta': 0.756,
            'records': ['azure-stream-a100-sxm-80gb-copy',
                        'azure-stream-a100-sxm-80gb-triad',
                        'liger-a100-rmsnorm-fwd-h16384',
                        'liger-a100-rmsnorm-fwd-h32768']},
 'blackwell': {'eta': 0.733,
               'records': ['quack-b200-rmsnorm',
                           'ao-b200-cast-dim0_mxfp8_floor',
                           'ao-b200-cast-dim0_mxfp8_triton_floor',
                           'ao-b200-cast-dim1_mxfp8_cuda_floor']},
 'blackwell_ultra': {'eta': 0.742, 'records': ['ao-roofline-b300-membw-frac', 'quack-b200-rmsnorm']},
 'cdna3': {'eta': 0.778, 'records': ['azure-stream-mi300x-copy', 'azure-stream-mi300x-triad']},
 'cdna4': {'eta': 0.443,
           'records': ['hk-mi355x-ln-HipKittens-n4096',
                       'hk-mi355x-ln-HipKittens-n16384',
                       'hk-mi355x-rope-HipKittens-n16384']},
 'hopper': {'eta': 0.832,
            'records': ['azure-stream-h100-sxm-copy',
                        'azure-stream-h100-sxm-triad',
                        'azure-stream-h200-copy',
                        'azure-stream-h200-triad',
                        'ao-roofline-h100-membw-frac',
                        'quack-h100-reduction-kernels',
                        'quack-h100-liger-softmax-65k',
                        'liger-h100-layernorm-fwd-n4096',
                        'liger-h100-layernorm-fwd-n16384',
                        'ao-h100-blockwise-act_quant_lhs-fwd',
                        'ao-h100-blockwise-weight_quant_forward_rhs-fwd',
                        'ao-h100-blockwise-act_quant_lhs-bwd',
                        'ao-h100-blockwise-wgrad_quant_rhs-bwd',
                        'ao-h100-quant-act_quant_lhs-32768x4096',
                        'ao-h100-quant-act_quant_transposed_lhs-32768x4096',
                        'ao-h100-quant-weight_quant_rhs-32768x4096',
                        'ao-h100-quant-act_quant_lhs-131072x4096',
                        'ao-h100-quant-weight_quant_rhs-131072x4096']}}
