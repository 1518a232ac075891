"""Hybrid measure-and-upscale projection (issue 5): build reduced real framework models from a
Plan, time their pieces on the local device (CUDA events on a GPU; on the CPU a functional check),
measure their memory, and upscale with the analytic cost model.

Modules: :mod:`.piece` (what a piece is, plan-derived shapes and FLOP counts shared by both
builders), :mod:`.spec` (a build's inputs and substitutions), :mod:`.build_mcore` /
:mod:`.build_titan` (the framework builders), :mod:`.mirror_ranks` (expert-parallel groups at world
size 1), :mod:`.timing` (timing and memory of one piece), :mod:`.cache` (the on-disk cache),
:mod:`.upscale` (the entry point, :func:`~.upscale.project_measured`), :mod:`.measured_memory` (the
pieces' bytes upscaled to the stage memory), :mod:`.device` (the local device
in words: why no GPU, which database GPU it is).  Everything here runs on any
device; the CPU-vs-gloo comparison lives in ``scripts/validation/gloo_lab/``.
"""
