"""The CPU validation harness of the measured path: real 2-process gloo runs on this machine
(:mod:`.realrun`) and this machine's costs registered as a "GPU" (:mod:`.localhw`), so that
``scripts/validation/measure_gloo.py`` can set one CPU projection beside a real run.  Not part of
the product: the measured path's product is the GPU (``primus_launch/projection/measure``)."""
