"""The projection of one training iteration as a flow of typed steps.

Each step is a function taking the previous steps' typed results and returning its own (a frozen
dataclass); every step reads the same :class:`~.setup.Setup` (the plan, its GPU spec resolved once,
the rank layout and the per-layer compute times):

1. :func:`.setup.setup` -> :class:`~.setup.Setup`: the inputs every step reads;
2. :func:`.layer.layer_costs` -> :class:`~.layer.LayerCosts`: one layer's communication per
   micro-batch, raw and left exposed (TP, CP, EP, FSDP), recompute and offload terms;
3. :func:`.stage.stage_costs` -> :class:`~.stage.StageCosts`: per pipeline stage and model chunk,
   one micro-batch's forward / backward seconds split by kind;
4. :func:`.schedule.pipeline_schedule` -> :class:`~primus_launch.projection.pipeline.simulate.PipelineResult`:
   the plan's pipeline schedule simulated on those chunk costs;
5. :func:`.iteration.iteration_costs` -> :class:`~.iteration.IterationCosts`: DP gradient sync and
   optimizer after the pipeline, the iteration time and its breakdown.

:func:`.flow.run_steps` runs them in order (:class:`~.flow.Steps` holds every result) and
:func:`.flow.projection_result` turns them into the :class:`ProjectionResult`
(``projection/iteration.py`` ``assemble``).  ``projection/explain.py`` reads the same results.
"""
