"""Typed results of a tune: every trial, the best plan and the counts that judge the search."""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, Field

from primus_launch.plan import Plan
from primus_launch.projection.result import ProjectionResult
from primus_launch.projection.training_run import TrainingRun
from primus_launch.tuner.memory_rule import CERTAIN_REASON, OVER_REASON, over_capacity

TrialSource = Literal["seed", "planner", "llm", "exhaustive", "branch-and-bound"]


class Trial(BaseModel):
    """One candidate the search looked at: scored, or rejected with the reason (never scored)."""

    index: int = Field(description="order in which the search looked at it")
    source: TrialSource
    changes: dict[str, Any] = Field(description="dotted plan fields that differ from the original, new values "
                                                "(for an LLM proposal rejected before it became a plan: the proposal as written)")
    status: Literal["scored", "rejected"]
    reason: Optional[str] = Field(default=None, description="why it was rejected (pre-filter, projection, LLM validation)")
    iteration_time_s: Optional[float] = None
    tokens_per_sec_per_gpu: Optional[float] = None
    model_tflops_per_gpu: Optional[float] = None
    mfu: Optional[float] = None
    peak_memory_bytes: Optional[int] = None
    fits: Optional[bool] = None
    verdict: Optional[str] = Field(default=None, description="memory verdict: fits, tight (the capacity lies in "
                                                             "the projection's error band) or does not fit")
    over_capacity: Optional[bool] = Field(default=None, description="the verdict's point estimate (oom_peak_bytes) "
                                          "exceeds the usable capacity: a tight plan more likely to run out of "
                                          "memory than not, kept out of the answer unless no plan's point "
                                          "estimate fits (tuner/memory_rule.py)")
    oom_peak_bytes: Optional[int] = Field(default=None, description="what the verdict compares: the peak less the "
                                                                   "free cached segments the allocator releases "
                                                                   "before it raises (MemoryReport.oom_peak_bytes)")
    peak_band_bytes: Optional[tuple[int, int]] = Field(default=None, description="the error band (bottom, top) of "
                                                                                 "oom_peak_bytes, bytes per GPU")
    iteration_band_s: Optional[tuple[float, float]] = Field(default=None, description="the iteration time's "
                                                                    "error band (the run's expected seconds, low, "
                                                                    "high: projection/band.py)")
    time_breakdown: dict[str, float] = Field(default_factory=dict)
    memory_breakdown: dict[str, int] = Field(default_factory=dict)

    @property
    def verdict_peak_bytes(self) -> int:
        """The bytes the verdict compared with the capacity (``oom_peak_bytes``), else the reported peak, else 0
        (a trial that was not scored)."""
        return self.oom_peak_bytes or self.peak_memory_bytes or 0


def best_rank(top: list[Trial]) -> Optional[int]:
    """The 1-based row of the best plan in a top-N list: the first row the memory rule admits (``fits``); rows
    it keeps out (``fits`` false: tight plans over the capacity, ``tuner/memory_rule.py``) may precede it.  None:
    every row is kept out."""
    return next((k for k, t in enumerate(top, 1) if getattr(t, "fits", None) is not False), None)


def scored_fields(r: ProjectionResult) -> dict[str, Any]:
    """The :class:`Trial` fields of a scored plan from its projection (a plain dict: the exhaustive sweep's
    worker processes send it back), the reason with them where it cannot be the answer."""
    m = r.memory
    return dict(iteration_time_s=r.iteration_time_s, tokens_per_sec_per_gpu=r.tokens_per_sec_per_gpu,
                model_tflops_per_gpu=r.model_tflops_per_gpu, mfu=r.mfu, peak_memory_bytes=m.peak_bytes_per_gpu,
                oom_peak_bytes=m.verdict_peak_bytes, fits=m.fits, verdict=m.verdict, over_capacity=over_capacity(m),
                peak_band_bytes=(m.band.low_bytes, m.band.high_bytes) if m.band is not None else None,
                iteration_band_s=r.band.iteration_range(r.iteration_time_s) if r.band is not None else None,
                time_breakdown=dict(r.time_breakdown), memory_breakdown=dict(m.breakdown),
                reason=None if m.fits else ((OVER_REASON if over_capacity(m) else CERTAIN_REASON) if m.verdict == "tight"
                                            else "projected memory does not fit"))


class Certificate(BaseModel):
    """What a search proved about its answer (``tuner/branch_bound.py``; a complete brute force is
    certified with every legal plan scored)."""

    certified: bool = Field(description="every plan of the space was scored or bounded out")
    plans: int = Field(description="plans in the space (legal by the frameworks' rules)")
    scored: int = Field(description="plans the projection scored, each counted once, the recipe's own plan "
                                    "included (TuneResult.scored: the same count)")
    bounded_time: int = Field(0, description="plans whose lower bound on the iteration time reached the best's")
    bounded_memory: int = Field(0, description="plans whose memory floor or pre-filter verdict is 'does not fit'")
    open: int = Field(0, description="plans left unexamined when the work limit stopped the search")
    best_s: Optional[float] = Field(None, description="iteration time of the best plan (None: none fits)")
    lower_bound_s: Optional[float] = Field(None, description="the lowest bound left open when the search "
                                                             "stopped (None: none open)")
    gap: float = Field(0.0, description="best / lowest open bound - 1 (0 when certified)")
    work: int = Field(0, description="work units the search spent (branch_bound.WORK_*), its warm start's included")
    warm_work: int = Field(0, description="of those, the warm start's (certified_run.warm_start): outside the work limit's "
                                          "count")
    structs_expanded: int = Field(0, description="structural candidates whose flag tables were examined")
    bound_violations: int = Field(0, description="scored plans below their own bound (voids the certificate)")
    memory_groups: int = Field(0, description="memory groups (the flags the memory model reads, per structure) whose "
                                              "floor the search priced")
    memory_groups_fit: int = Field(0, description="of those, the ones whose floor may fit")
    text: str = ""


class TuneResult(BaseModel):
    """What a tune returns (:func:`primus_launch.tuner.search.tune`): the best plan and its projection, the
    recipe's own, the gain, the top table, every trial, the space's counts, the search and its certificate."""

    best_plan: Plan
    best: ProjectionResult
    baseline: ProjectionResult
    gain: float = Field(description="baseline iteration time / best iteration time - 1")
    top: list[Trial] = Field(description="best scored trials that fit, fastest first; under the point rule the tight "
                                         "ones over the usable capacity among them (over_capacity, fits false)")
    trials: list[Trial]
    space_size: int = Field(description="divisibility-legal candidates in the search space")
    legal_candidates: int = Field(description="candidates legal by divisibility and the memory pre-filter (under "
                                              "branch and bound: the space's legal plans, whose memory its "
                                              "certificate bounds)")
    legal_exact: bool = Field(description="False when legal_candidates was estimated from a sample of the space")
    scored: int = Field(description="plans the projection scored, each counted once: the recipe's own plan "
                                    "(always scored first, as the baseline) and every other plan the search "
                                    "scored; the certificate's scored and the text's counts are this number")
    rejected: int = Field(description="candidates the search looked at and the pre-filter/validation rejected")
    elapsed_s: float
    exhaustive: bool = False
    llm_model: Optional[str] = None
    space: dict[str, Any] = Field(default_factory=dict, description="the SpaceConfig the search ran over")
    warnings: list[str] = Field(default_factory=list)
    search: Literal["exhaustive", "planner", "branch-and-bound"] = "planner"
    certificate: Optional[Certificate] = Field(default=None, description="what the search proved (branch and bound, "
                                                                       "or a complete brute force); None after a "
                                                                       "planner search")
    allowed: list[str] = Field(default_factory=list, description="numerics-changing knob families the user "
                                                                 "allowed (--allow)")
    searched_knobs: dict[str, bool] = Field(default_factory=dict, description="knob families beyond the parallel "
                                                                              "degrees: searched or kept as given")
    search_note: Optional[str] = Field(default=None, description="why the planner searched instead of the "
                                                                 "exhaustive sweep")
    workers: int = Field(default=1, description="processes that scored candidates")
    memory_certain: bool = Field(default=False, description="only plans whose memory verdict is fits could be the "
                                                            "answer (--memory-certain)")
    memory_rule: Literal["point", "band", "certain"] = Field(
        default="point", description="which plans could be the answer (tuner/memory_rule.py): point (default: "
                                     "fits, or tight with the point estimate under the usable capacity), band (no "
                                     "plan's point estimate fits: tight plans too), certain (--memory-certain: "
                                     "fits only)")
    memory_rule_text: str = Field(default="", description="the memory rule in words, as the text answer says it")
    executor: Optional[str] = Field(default=None, description="where the search's shards ran when not on this "
                                                              "machine's default (e.g. ``Ray cluster at ADDR (N "
                                                              "workers)``)")
    exhaustive_estimate_s: Optional[float] = Field(default=None, description="estimated wall time of scoring the "
                                                                             "whole space on the workers")
    inside_best_band: list[int] = Field(default_factory=list, description="ranks (1-based) of the top rows "
                                        "whose error band and the best's overlap (projection/band.py ranges_overlap): "
                                        "either could run faster; the model cannot rank them apart")
    no_reference: Optional[str] = Field(default=None, description="why the recipe's own plan is not legal on the "
                                        "tuned cluster (then baseline is the search's legal starting plan, "
                                        "tuner/rebase.py, and gain is 0: no gain is claimed), else None")
    same_runs: int = Field(default=0, description="scored plans left out of top as the same run as a row in it: "
                                                  "equal figures, differing only in knobs inert at DP x CP = 1 "
                                                  "(answer.py INERT_AT_DP1)")
    tie_note: Optional[str] = Field(default=None, description="why a plan of the same projected time as the "
                                    "original was chosen over it (answer.py _tie_break), else None")
    gain_inside_band: Optional[bool] = Field(default=None, description="whether the original's and the best's "
                                             "error bands overlap (None: a "
                                             "projection without a band, or the original is the best)")
    training_run: Optional[dict[str, TrainingRun]] = Field(
        default=None, description="with a token count (tune's training_tokens): the whole run of the original "
                                  "(\"original\") and the best (\"best\") plan: iterations, days, GPU-hours, cost")

    @property
    def scored_fraction(self) -> float:
        """Scored candidates over the legal ones (0 when none is legal)."""
        return self.scored / self.legal_candidates if self.legal_candidates else 0.0

    def to_json_dict(self) -> dict:
        """The result as JSON-ready data (``--json``): every field, with :attr:`scored_fraction`; ``baseline`` and
        ``best`` as the projection's own ``--json`` gives them (``ProjectionResult.to_json_dict``: ``band`` with the
        expected ranges of the iteration time, tokens/s, model TFLOP/s and MFU; user19: the tune's had the band's
        fractions alone)."""
        d = self.model_dump(mode="json")
        d["scored_fraction"] = self.scored_fraction
        d["baseline"], d["best"] = self.baseline.to_json_dict(), self.best.to_json_dict()
        return d

    def to_log_dict(self, original: Optional[Plan] = None) -> dict:
        """The trial log: everything :meth:`to_json_dict` holds, the top trials in full, and every
        trial as compact columns (:func:`trial_columns`) instead of one object per trial -- a
        search of 50,000 candidates writes a few MB, not 50."""
        d = self.model_dump(mode="json", exclude={"trials"})
        d["scored_fraction"] = self.scored_fraction
        d["baseline"], d["best"] = self.baseline.to_json_dict(), self.best.to_json_dict()   # the bands' ranges too
        d["log_format"] = LOG_FORMAT
        if original is not None:
            d["original_plan"] = original.model_dump(mode="json")
        d["trials"] = trial_columns(self.trials, original or self.baseline.plan)
        return d


LOG_FORMAT = 2   # 1: one object per trial; 2: the trials as columns (TuneResult.to_log_dict)


def _dotted(plan: Plan, key: str) -> Any:
    obj: Any = plan
    for part in key.split("."):
        obj = getattr(obj, part, None)
    return obj


def _short(x: Optional[float], digits: int = 7) -> Optional[float]:
    return None if x is None else float(f"{x:.{digits}g}")


def _categorical(values: list) -> Any:
    """A column of few distinct non-numeric values as ``{"levels": [...], "codes": [...]}`` (value
    ``levels[codes[i]]``), a dictionary encoding; numbers and booleans stay a plain list."""
    if all(isinstance(v, (int, float)) and v is not None for v in values):
        return values
    levels: dict[str, int] = {}
    out: list[Any] = []
    import json

    for v in values:
        key = json.dumps(v, sort_keys=True)
        out.append(levels.setdefault(key, len(levels)))
    return {"levels": [json.loads(k) for k in levels], "codes": out}


def trial_columns(trials: list[Trial], original: Plan) -> dict:
    """Trials as columns, one list per field, in search order: ``index``, ``source``, ``status``,
    the figures (7 significant digits; the top trials are in full in ``top``), ``reason`` (an index
    into ``reasons``, the distinct reasons, or null) and, under ``knobs``, one column per plan field
    any trial changed holding each trial's value of it (the original's where it kept it), so a
    script reads a candidate's configuration without a null meaning two things.  Columns of
    non-numeric values (``source``, ``status``, most knobs) are dictionary-encoded
    (:func:`_categorical`: ``levels`` and ``codes``)."""
    reasons: dict[str, int] = {}
    knob_names = sorted({k for t in trials for k in t.changes})
    base = {k: _dotted(original, k) for k in knob_names}
    cols: dict[str, list] = {k: [] for k in ("index", "source", "status", "iteration_time_s",
                                             "tokens_per_sec_per_gpu", "mfu", "peak_memory_bytes", "fits", "reason")}
    knobs: dict[str, list] = {k: [] for k in knob_names}
    for t in trials:
        cols["index"].append(t.index)
        cols["source"].append(t.source)
        cols["status"].append(t.status)
        cols["iteration_time_s"].append(_short(t.iteration_time_s))
        cols["tokens_per_sec_per_gpu"].append(_short(t.tokens_per_sec_per_gpu))
        cols["mfu"].append(_short(t.mfu, 5))
        cols["peak_memory_bytes"].append(t.peak_memory_bytes)
        cols["fits"].append(t.fits)
        cols["reason"].append(None if t.reason is None else reasons.setdefault(t.reason, len(reasons)))
        for k in knob_names:
            v = t.changes.get(k, base[k])
            knobs[k].append(list(v) if isinstance(v, tuple) else v)
    for k in ("source", "status"):
        cols[k] = _categorical(cols[k])
    knobs = {k: _categorical(v) for k, v in knobs.items()}
    return {"count": len(trials), "columns": cols, "reasons": list(reasons), "knobs": knobs}


def log_text(d: dict) -> str:
    """JSON text of a :meth:`TuneResult.to_log_dict`: indented, each trial column on one line."""
    import json

    head = json.dumps({k: v for k, v in d.items() if k != "trials"}, indent=1)
    tr = d.get("trials")
    if tr is None:
        return head

    def block(cols: dict) -> str:
        return "{\n" + ",\n".join(f"   {json.dumps(k)}: {json.dumps(v, separators=(',', ':'))}"
                                   for k, v in cols.items()) + "\n  }"

    body = (f'{{\n  "count": {tr["count"]},\n  "columns": {block(tr["columns"])},\n'
            f'  "reasons": {json.dumps(tr["reasons"], indent=None)},\n  "knobs": {block(tr["knobs"])}\n }}')
    return head[:-2] + ',\n "trials": ' + body + "\n}" if head.endswith("\n}") else head
