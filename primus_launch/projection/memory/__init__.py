"""The memory model: parameter counts per stage (``params``), activations per layer for Megatron
(``activations``) and TorchTitan (``titan``), the per-stage estimate with the pipeline's in-flight
micro-batches (``estimate``) and the divisibility + memory pre-filter (``legality``)."""
