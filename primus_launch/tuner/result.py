"""Typed results of a tune: every trial, the best plan and the counts that judge the search."""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, Field

from primus_launch.plan import Plan
from primus_launch.projection.result import ProjectionResult

TrialSource = Literal["seed", "planner", "llm", "exhaustive"]


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
    time_breakdown: dict[str, float] = Field(default_factory=dict)
    memory_breakdown: dict[str, int] = Field(default_factory=dict)


class TuneResult(BaseModel):
    best_plan: Plan
    best: ProjectionResult
    baseline: ProjectionResult
    gain: float = Field(description="baseline iteration time / best iteration time - 1")
    top: list[Trial] = Field(description="best scored trials that fit, fastest first")
    trials: list[Trial]
    space_size: int = Field(description="divisibility-legal candidates in the search space")
    legal_candidates: int = Field(description="candidates legal by divisibility and the memory pre-filter")
    legal_exact: bool = Field(description="False when legal_candidates was estimated from a sample of the space")
    scored: int
    rejected: int = Field(description="candidates the search looked at and the pre-filter/validation rejected")
    elapsed_s: float
    exhaustive: bool = False
    llm_model: Optional[str] = None
    space: dict[str, Any] = Field(default_factory=dict, description="the SpaceConfig the search ran over")
    warnings: list[str] = Field(default_factory=list)
    search: Literal["exhaustive", "planner"] = "planner"
    certificate: Optional[str] = Field(default=None, description="exhaustive and complete: 'best of all N legal "
                                                                 "plans ...'; None after a planner search")
    allowed: list[str] = Field(default_factory=list, description="numerics-changing knob families the user "
                                                                 "allowed (--allow)")
    searched_knobs: dict[str, bool] = Field(default_factory=dict, description="knob families beyond the parallel "
                                                                              "degrees: searched or kept as given")
    search_note: Optional[str] = Field(default=None, description="why the planner searched instead of the "
                                                                 "exhaustive sweep")
    workers: int = Field(default=1, description="processes that scored candidates")
    exhaustive_estimate_s: Optional[float] = Field(default=None, description="estimated wall time of scoring the "
                                                                             "whole space on the workers")

    @property
    def scored_fraction(self) -> float:
        return self.scored / self.legal_candidates if self.legal_candidates else 0.0

    def to_json_dict(self) -> dict:
        d = self.model_dump(mode="json")
        d["scored_fraction"] = self.scored_fraction
        return d
