"""The tuner: searches the parallel configurations of a :class:`~primus_launch.plan.Plan` for the fastest that
fits, scoring each in-process with the projection (it sees only the plan).  Entry point:
:func:`primus_launch.tuner.search.tune`; each module's docstring says what it holds."""
