"""The framework-neutral training plan: the one object every part of primus-launch speaks.

Adapters (``primus_launch.adapters``) translate native recipes (Megatron-LM launch scripts and
argument YAMLs, TorchTitan configs, Primus experiment YAMLs) into a :class:`Plan` and back;
projection and tuner only see the plan.  Field semantics follow Megatron-LM's argument names where
one exists (``megatron/training/arguments.py`` and ``megatron/core/transformer/transformer_config.py``),
so that a reader who knows either framework can map them; fields that only one framework has say so.

Rank layout (Megatron ``parallel_state.initialize_model_parallel``, order "tp-cp-ep-dp-pp"):
TP is innermost (adjacent ranks), then CP, then DP (EP is carved out of DP x CP for the experts),
then PP outermost.

Derived degrees (Megatron-LM ``parallel_state``):

- ``dp = world / (tp * cp * pp)``
- expert data parallel ``edp = world / (etp * ep * pp)``

Where each layer sits in the pipeline is :mod:`primus_launch.plan.layout` (Megatron's layout
grammar, account-for-embedding/loss splits, uneven first/last stages, ZB-V's "V"); the sections of a
plan and their named choices are :mod:`primus_launch.plan.sections`; a plan is validated on
construction by :func:`primus_launch.plan.legality.legality_problems`.
"""

from __future__ import annotations

from typing import Optional

from pydantic import Field, model_validator

from primus_launch.plan.layout import Chunk, chunk_layout, chunk_mtp_ids
from primus_launch.plan.legality import legality_problems
from primus_launch.plan.normal_form import normalize
from primus_launch.plan.sections import (Cluster, Framework, ModelArch, Parallelism, PlanError, Source, StrictModel,
                                         Training)
from primus_launch.plan.software import Software


class Plan(StrictModel):
    model: ModelArch
    parallel: Parallelism = Field(default_factory=Parallelism)
    training: Training
    cluster: Cluster = Field(default_factory=Cluster)
    source: Optional[Source] = None
    # the run's software versions where they differ from the modelled stack (plan/software.py; None: current)
    software: Software = Field(default_factory=Software)

    # ----- derived -----
    @property
    def framework(self) -> Framework:
        """The framework the plan runs on (Megatron-Core when not read from a recipe)."""
        return self.source.framework if self.source is not None else "megatron"

    @property
    def world_size(self) -> int:
        return self.cluster.world_size

    @property
    def dp(self) -> int:
        p = self.parallel
        return self.world_size // (p.tp * p.cp * p.pp)

    @property
    def expert_dp(self) -> int:
        p = self.parallel
        return self.world_size // (p.expert_tp * p.ep * p.pp)

    @property
    def num_microbatches(self) -> int:
        return self.training.global_batch_size // (self.training.micro_batch_size * self.dp)

    @property
    def tokens_per_iteration(self) -> int:
        return self.training.global_batch_size * self.model.seq_length

    def parallel_summary(self) -> str:
        """One line of the layout, e.g. ``TP=8 PP=4 VPP=5 DP=32 MBS=1 GBS=1024`` (VPP/CP shown when
        above 1, EP for MoE models)."""
        p, t = self.parallel, self.training
        parts = [f"TP={p.tp}", f"PP={p.pp}"] + ([f"VPP={p.vpp}"] if p.vpp > 1 else []) \
            + ([f"CP={p.cp}"] if p.cp > 1 else []) + ([f"EP={p.ep}"] if self.model.is_moe or p.ep > 1 else [])
        return " ".join(parts + [f"DP={self.dp}", f"MBS={t.micro_batch_size}", f"GBS={t.global_batch_size}"])

    def chunk_layout(self) -> tuple[tuple[Chunk, ...], ...]:
        """Per PP rank, per model chunk: the :class:`~primus_launch.plan.layout.Chunk` it holds
        (decoder layer ids, embedding, MTP layers, loss); see :mod:`primus_launch.plan.layout`."""
        return chunk_layout(self)

    def chunk_mtp_ids(self) -> tuple[tuple[tuple[int, ...], ...], ...]:
        """Per PP rank, per model chunk: the global ids (``num_layers + depth``) of its MTP layers
        (:func:`~primus_launch.plan.layout.chunk_mtp_ids`)."""
        return chunk_mtp_ids(self)

    def layers_per_stage(self) -> list[int]:
        """Decoder layers on each PP rank (all virtual chunks of that rank summed)."""
        return [sum(len(c.layers) for c in rank) for rank in self.chunk_layout()]

    def bf16_layer_ids(self) -> frozenset[int]:
        """Global decoder-layer ids (0-based) that run outside the FP8 / FP4 context, in BF16: the first
        ``training.bf16_layers_start`` and the last ``training.bf16_layers_end`` of ``model.num_layers``
        under precision fp8 / fp4 (megatron-core 0.16.1 ``fp8_utils.py`` ``is_first_last_bf16_layer`` /
        ``fp4_utils.py`` ``get_fp4_context``: ``layer_no < start or layer_no >= num_layers - end`` on the global
        id ``layer_number - 1``, so only the PP stages / model chunks holding them are affected; MTP layers
        run under the global context, ``get_fp8_context(config)`` with ``layer_no=-1``: never BF16)."""
        t, L = self.training, self.model.num_layers
        if t.precision not in ("fp8", "fp4") or not (t.bf16_layers_start or t.bf16_layers_end):
            return frozenset()
        return frozenset(i for i in range(L) if i < t.bf16_layers_start or i >= L - t.bf16_layers_end)

    @model_validator(mode="wrap")
    @classmethod
    def _check(cls, data: object, handler) -> "Plan":
        """Normalize (``plan/normal_form.py``: TorchTitan FSDP over one rank) and check legality on
        construction.  A plan *instance* given where a plan is expected (``ProjectionResult(plan=p)``) is
        taken as it is -- pydantic's ``revalidate_instances="never"``, which an after-validator would
        break: it re-ran on ``p`` itself and normalized the caller's plan in place, so an unvalidated
        copy (``tuner/knobs.py`` ``apply_knobs``) changed between its projection and its bound."""
        if isinstance(data, cls):
            return data
        self = handler(data)
        normalize(self)  # one plan per launched job (plan/normal_form.py: TorchTitan FSDP over one rank)
        problems = legality_problems(self)
        if problems:
            raise PlanError(*problems[0])
        return self

    def with_changes(self, **section_updates: dict) -> "Plan":
        """A validated copy with fields of sections replaced, e.g. ``parallel={"tp": 4}``."""
        data = self.model_dump()
        for section, upd in section_updates.items():
            if isinstance(upd, dict) and isinstance(data.get(section), dict):
                for k, v in upd.items():
                    if isinstance(v, dict) and isinstance(data[section].get(k), dict):
                        data[section][k].update(v)
                    else:
                        data[section][k] = v
            else:
                data[section] = upd
        return Plan.model_validate(data)
