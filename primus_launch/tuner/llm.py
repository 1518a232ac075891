"""LLM investigation loop: an OpenAI-compatible chat model proposes cross-axis candidates.

Each round the model is shown the model architecture, the cluster, the axes it may change with
their allowed values, and the history of scored trials (iteration time with its breakdown, peak
memory with its breakdown), plus the reasons its previous proposals were rejected.  It answers with
JSON ``{"candidates": [{...knob: value...}, ...]}``; each proposal is validated by a pydantic
model (unknown fields, i.e. hallucinated knobs, and wrong types are rejected), merged onto the
incumbent best configuration, checked against the search space and the pre-filter, and only then
scored.  Rejections are recorded as trials (``source="llm"``) and fed back in the next round.

The endpoint comes from ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` (the real ``openai`` client).  A
dead, slow or failing endpoint ends the loop with a warning; the planner carries on.
"""

from __future__ import annotations

import json
import os
import re
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, ValidationError

from primus_launch.tuner.engine import Engine
from primus_launch.tuner.space import AXES, Knobs, problems_of

# LLM-facing knob names -> Knobs fields (the plan's own names where they are clearer)
FIELD_MAP: dict[str, str] = {
    "tp": "tp", "pp": "pp", "vpp": "vpp", "cp": "cp", "ep": "ep", "etp": "etp",
    "sequence_parallel": "sp", "micro_batch_size": "mbs", "dp_sharding": "dp_sharding",
    "dp_replicate": "dp_replicate", "recompute_granularity": "rc_granularity",
    "recompute_method": "rc_method", "recompute_num_layers": "rc_layers",
    "pipeline_schedule": "schedule", "overlap_grad_reduce": "overlap_grad_reduce",
    "overlap_param_gather": "overlap_param_gather", "tp_comm_overlap": "tp_comm_overlap",
    "pipeline_layers_first_stage": "first_stage_layers", "pipeline_layers_last_stage": "last_stage_layers",
    "recompute_modules": "rc_modules", "pipeline_layout": "layout",
    "account_for_embedding_in_pipeline_split": "acc_embedding", "account_for_loss_in_pipeline_split": "acc_loss",
    "cuda_graph_impl": "cuda_graph_impl", "cuda_graph_scope": "cuda_graph_scope",
    "moe_token_dispatcher": "dispatcher", "overlap_moe_expert_parallel_comm": "ep_overlap",
    "delay_wgrad_compute": "delay_wgrad", "compile": "compile", "offload_activation_layers": "offload_layers",
    "offload_activation_modules": "offload_modules", "optimizer_offload_fraction": "optimizer_offload",
    "precision": "precision", "fp8_recipe": "fp8_recipe", "fp8_param_gather": "fp8_param_gather",
}
_TUPLES = {"rc_modules", "cuda_graph_scope", "offload_modules"}


class Proposal(BaseModel):
    """One candidate as the LLM must write it: only known knobs, right types."""

    model_config = ConfigDict(extra="forbid")
    tp: Optional[int] = None
    pp: Optional[int] = None
    vpp: Optional[int] = None
    cp: Optional[int] = None
    ep: Optional[int] = None
    etp: Optional[int] = None
    sequence_parallel: Optional[bool] = None
    micro_batch_size: Optional[int] = None
    dp_sharding: Optional[Literal["none", "optimizer", "optimizer_grads", "full"]] = None
    dp_replicate: Optional[int] = None
    recompute_granularity: Optional[Literal["none", "selective", "full"]] = None
    recompute_method: Optional[Literal["uniform", "block"]] = None
    recompute_num_layers: Optional[int] = None
    pipeline_schedule: Optional[Literal["1f1b", "interleaved_1f1b", "zb_h1", "zbv", "gpipe"]] = None
    overlap_grad_reduce: Optional[bool] = None
    overlap_param_gather: Optional[bool] = None
    tp_comm_overlap: Optional[bool] = None
    pipeline_layers_first_stage: Optional[int] = None
    pipeline_layers_last_stage: Optional[int] = None
    recompute_modules: Optional[list[str]] = None
    pipeline_layout: Optional[str] = None
    account_for_embedding_in_pipeline_split: Optional[bool] = None
    account_for_loss_in_pipeline_split: Optional[bool] = None
    cuda_graph_impl: Optional[Literal["none", "local", "transformer_engine"]] = None
    cuda_graph_scope: Optional[list[str]] = None
    moe_token_dispatcher: Optional[Literal["alltoall", "allgather", "deepep", "hybridep"]] = None
    overlap_moe_expert_parallel_comm: Optional[bool] = None
    delay_wgrad_compute: Optional[bool] = None
    compile: Optional[bool] = None
    offload_activation_layers: Optional[int] = None
    offload_activation_modules: Optional[list[str]] = None
    optimizer_offload_fraction: Optional[float] = None
    precision: Optional[Literal["bf16", "fp16", "fp8", "fp32"]] = None
    fp8_recipe: Optional[str] = None
    fp8_param_gather: Optional[bool] = None
    rationale: Optional[str] = None


class ProposalSet(BaseModel):
    """A model's reply: the candidates it proposes (each a :class:`Proposal`'s fields)."""

    model_config = ConfigDict(extra="forbid")
    candidates: list[dict]


def _extract_json(text: str) -> object:
    """The JSON object of a reply (a ```json fence or surrounding prose is tolerated)."""
    m = re.search(r"```(?:json)?\s*(.*?)```", text, re.S)
    if m:
        text = m.group(1)
    start = text.find("{")
    end = text.rfind("}")
    if start < 0 or end < start:
        raise ValueError("no JSON object in the reply")
    return json.loads(text[start:end + 1])


class LLMAdvisor:
    """Rounds of a language model's proposals between the planner's rounds (module doc): each round sends the
    space's allowed values and the scored history, validates the proposed candidates and scores the legal ones."""

    def __init__(self, model: str, engine: Optional[Engine], *, rounds: int = 3, per_round: int = 8,
                 timeout_s: float = 5.0, max_retries: int = 1):
        self.model = model
        self.e = engine
        self.rounds = rounds
        self.per_round = per_round
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.warnings: list[str] = []
        self.feedback: list[str] = []
        self.transcript: list[dict] = []

    # ----- prompt -----
    def allowed_values(self) -> dict[str, list]:
        """Per knob the model may set, the values the space holds (sorted; knobs with one value left out)."""
        out: dict[str, list] = {}
        for name, f in FIELD_MAP.items():
            vals = list(dict.fromkeys(getattr(k, f) for k in self.e.space))
            try:
                vals = sorted(vals, key=lambda v: (v is None, v))
            except TypeError:
                pass
            if len(vals) > 1:
                out[name] = vals
        return out

    def _knobs_dict(self, k: Knobs) -> dict:
        return {name: getattr(k, f) for name, f in FIELD_MAP.items()}

    def messages(self) -> list[dict]:
        """The chat messages of the next round: the task, the model and cluster, the allowed values, the best
        scored candidates so far and the feedback on earlier proposals."""
        e = self.e
        p = e.plan
        m = p.model.model_dump(exclude_none=True)
        scored = sorted((i for i in e.results), key=lambda i: (e.time_of(i), i))[:20]
        history = []
        for i in scored:
            r = e.results[i]
            history.append({
                "config": self._knobs_dict(e.space[i]),
                "iteration_time_s": round(r.iteration_time_s, 5),
                "fits": r.memory.fits,
                "time_breakdown_s": {k: round(v, 5) for k, v in r.time_breakdown.items()},
                "peak_memory_gib": round(r.memory.peak_bytes_per_gpu / 2**30, 2),
                "memory_breakdown_gib": {k: round(v / 2**30, 2) for k, v in r.memory.breakdown.items()},
            })
        best = e.best()
        user = {
            "model": m,
            "cluster": {**p.cluster.model_dump(), "world_size": p.world_size},
            "framework": p.source.framework if p.source else "megatron",
            "global_batch_size": p.training.global_batch_size,
            "precision": p.training.precision,
            "allowed_values": self.allowed_values(),
            "incumbent_best": self._knobs_dict(e.space[best]) if best is not None else None,
            "scored_trials_fastest_first": history,
            "rejected_last_round": self.feedback,
        }
        system = (
            "You tune the parallel configuration of a large-model training run to minimise the projected "
            "iteration time while fitting in GPU memory. DP is derived: world_size / (tp*cp*pp). "
            "Propose configurations that change several axes together (cross-axis moves) which the trials "
            "suggest but have not been tried. Fields you omit keep the incumbent's value. Use only the field "
            f"names in allowed_values. Reply with JSON only: {{\"candidates\": [{{...}}, ...]}} with at most "
            f"{self.per_round} candidates; a candidate may carry a short \"rationale\" string.")
        return [{"role": "system", "content": system}, {"role": "user", "content": json.dumps(user, default=str)}]

    # ----- validation -----
    def to_index(self, raw: object) -> tuple[Optional[int], Optional[str]]:
        """Validate one proposal; (space index, None) or (None, reason it is rejected)."""
        if not isinstance(raw, dict):
            return None, f"candidate {raw!r} is not a JSON object"
        try:
            prop = Proposal.model_validate(raw)
        except ValidationError as err:
            bad = "; ".join(f"{'.'.join(str(x) for x in er['loc'])}: {er['msg']}" for er in err.errors())
            return None, f"candidate {json.dumps(raw, default=str)} is invalid: {bad}"
        e = self.e
        best = e.best()
        base = e.space[best] if best is not None else None
        if base is None:
            return None, "no incumbent configuration yet"
        upd = {FIELD_MAP[k]: (tuple(v) if FIELD_MAP[k] in _TUPLES and v is not None else v)
               for k, v in prop.model_dump(exclude_unset=True).items() if k != "rationale"}
        shown = json.dumps(raw, default=str)
        k = base._replace(**upd)
        i = e.index.get(k)
        if i is not None:
            why = e.reason(i)
            if why is not None:
                return None, f"candidate {shown} rejected by the pre-filter: {why}"
            return i, None
        # the fields the LLM set are fixed; the others follow the incumbent, repaired to the nearest
        # legal candidate (e.g. sequence parallel off when tp becomes 1)
        fixed: dict[int, int] = {}
        for f, v in upd.items():
            col = AXES.index(f)
            code = e.lookups[col].get(v)
            if code is None:
                probs = problems_of(e.plan, k)
                if probs:
                    pf, pv, allowed = probs[0]
                    return None, f"candidate {shown} is illegal: {pf}={pv!r}: {allowed}"
                name = next(n for n, x in FIELD_MAP.items() if x == f)
                return None, (f"candidate {shown}: {name}={v!r} is outside the search space "
                              f"(allowed_values lists what may be tried)")
            fixed[col] = code
        near = e.nearest(best, fixed, limit=1, legal_only=False)
        if not near:
            probs = problems_of(e.plan, k)
            if probs:
                pf, pv, allowed = probs[0]
                return None, f"candidate {shown} is illegal: {pf}={pv!r}: {allowed}"
            return None, f"candidate {shown}: no legal configuration has these values together"
        legal = e.nearest(best, fixed, limit=1, legal_only=True)
        if not legal:
            return None, f"candidate {shown} rejected by the pre-filter: {e.reason(near[0])}"
        i = legal[0]
        return i, None

    # ----- loop -----
    def _client(self):
        from openai import OpenAI

        return OpenAI(base_url=os.environ.get("OPENAI_BASE_URL"), api_key=os.environ.get("OPENAI_API_KEY"),
                      timeout=self.timeout_s, max_retries=self.max_retries)

    def _warn(self, msg: str) -> None:
        self.warnings.append(msg)

    def run(self, engine: Engine | None = None) -> None:
        """Up to ``rounds`` rounds of proposals over ``engine``'s space (default: the one given at
        construction); raises :class:`Exhausted` when the budget is spent."""
        if engine is not None:
            self.e = engine
        try:
            client = self._client()
        except Exception as err:
            self._warn(f"LLM {self.model}: cannot create the client ({type(err).__name__}: {err}); "
                       "continuing with the planner only")
            return
        for rnd in range(self.rounds):
            msgs = self.messages()
            try:
                resp = client.chat.completions.create(model=self.model, messages=msgs, temperature=0)
                text = resp.choices[0].message.content or ""
            except Exception as err:  # timeout, connection refused, HTTP 5xx, bad response
                self._warn(f"LLM {self.model} round {rnd + 1}: endpoint failed ({type(err).__name__}: "
                           f"{str(err)[:200]}); continuing with the planner only")
                return
            self.transcript.append({"round": rnd + 1, "reply": text})
            self.feedback = []
            try:
                data = ProposalSet.model_validate(_extract_json(text))
            except (ValueError, ValidationError) as err:
                msg = f"reply was not the JSON object asked for ({type(err).__name__}: {str(err)[:200]})"
                self.feedback.append(msg)
                self._warn(f"LLM {self.model} round {rnd + 1}: {msg}")
                continue
            for raw in data.candidates[: self.per_round]:
                i, why = self.to_index(raw)
                if i is None:
                    self.feedback.append(why)
                    self._record_rejection(raw, why)
                    continue
                if i in self.e.results:
                    self.feedback.append(f"candidate {json.dumps(raw, default=str)} was already scored")
                    continue
                self.e.evaluate(i, "llm")

    def _record_rejection(self, raw: object, why: str) -> None:
        from primus_launch.tuner.result import Trial

        changes = raw if isinstance(raw, dict) else {"raw": raw}
        self.e.trials.append(Trial(index=len(self.e.trials), source="llm", changes=dict(changes),
                                   status="rejected", reason=why))

