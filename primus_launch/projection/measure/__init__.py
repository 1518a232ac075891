"""Hybrid measure-and-upscale projection (issue 5): build reduced real framework models from a
Plan, time their pieces on the local device, and upscale with the analytic cost model.

Entry point: :func:`primus_launch.projection.measure.upscale.project_measured`.
"""
