"""The attention backends a Megatron plan leaves Transformer Engine (plan/te_attention.py), against their sources.

Megatron's half is run: the installed megatron-core's ``LanguageModule._set_attention_backend`` sets the
``NVTE_*_ATTN`` variables each ``--attention-backend`` value leaves on.  TE's half is its own table of
``get_attention_backend`` (TE v2.14.1 ``attention/dot_product_attention/utils.py``, "Filter: Softmax type"
and "Filter: Context parallelism"), row by row.  A plan no backend can run is a plan error naming the field.
"""

from __future__ import annotations

import os

import pytest

from primus_launch.plan import Cluster, ModelArch, Parallelism, Plan, PlanError, Training
from primus_launch.plan.te_attention import MEGATRON_ENABLED, TE_BACKENDS, te_backends

_VARS = {"flash": "NVTE_FLASH_ATTN", "fused": "NVTE_FUSED_ATTN", "unfused": "NVTE_UNFUSED_ATTN"}


@pytest.mark.parametrize("backend", sorted(MEGATRON_ENABLED))
def test_megatron_attention_backend_env_matches_language_module(backend, monkeypatch):
    """megatron-core's ``_set_attention_backend`` leaves exactly MEGATRON_ENABLED[backend] at 1."""
    from types import SimpleNamespace

    from megatron.core.models.common.language_module.language_module import LanguageModule
    from megatron.core.transformer.enums import AttnBackend

    for v in _VARS.values():
        monkeypatch.delenv(v, raising=False)
    LanguageModule._set_attention_backend(SimpleNamespace(config=SimpleNamespace(
        attention_backend=getattr(AttnBackend, backend))))
    on = {b for b, v in _VARS.items() if os.environ.get(v) == "1"}
    assert frozenset(on) == MEGATRON_ENABLED[backend]


# TE v2.14.1 get_attention_backend, "Filter: Softmax type" table (context_parallel | softmax_type |
# supported backends), with "Filter: Context parallelism" (no Unfused under CP); CP rows for the a2a
# comm type, which the table's FusedAttention rows need with sinks ("cp_comm_type != a2a" disables it)
TE_TABLE = [
    (1, "vanilla", "p2p", {"flash", "fused", "unfused"}),
    (1, "off-by-one", "p2p", {"fused", "unfused"}),
    (1, "learnable", "p2p", {"fused", "unfused"}),
    (2, "vanilla", "p2p", {"flash", "fused"}),
    (2, "off-by-one", "a2a", {"fused"}),
    (2, "learnable", "a2a", {"fused"}),
    (2, "learnable", "p2p", set()),
]


@pytest.mark.parametrize("cp,softmax,comm,expected", TE_TABLE)
def test_te_softmax_and_cp_filters(cp, softmax, comm, expected):
    assert te_backends("auto", softmax, cp, comm) == frozenset(expected)
    for only in TE_BACKENDS:   # --attention-backend X leaves X if TE keeps it
        assert te_backends(only, softmax, cp, comm) == frozenset(expected) & {only}
    assert te_backends("local", softmax, cp, comm) == (frozenset({"local"}) if cp == 1 else frozenset())


def _gpt_oss(gpu: str = "h100-sxm", framework: str = "megatron", **kw) -> Plan:
    from primus_launch.plan import Source

    m = ModelArch(num_layers=4, hidden_size=2880, ffn_hidden_size=2880, num_attention_heads=64, num_query_groups=8,
                  head_dim=64, vocab_size=201088, seq_length=4096, softmax_type=kw.pop("softmax", "learnable"))
    par = Parallelism(cp=kw.pop("cp", 1), cp_comm_type=kw.pop("comm", "p2p"))
    return Plan(model=m, parallel=par, training=Training(global_batch_size=64, micro_batch_size=1, **kw),
                cluster=Cluster(gpu=gpu, num_nodes=1), source=Source(framework=framework))


def test_plans_no_backend_can_run_are_errors_naming_the_field():
    with pytest.raises((PlanError, ValueError), match="parallel.cp_comm_type"):
        _gpt_oss(cp=2)
    with pytest.raises((PlanError, ValueError), match="training.attention_backend"):
        _gpt_oss(attention_backend="flash")
    with pytest.raises((PlanError, ValueError), match="training.attention_backend"):
        _gpt_oss(softmax="vanilla", cp=2, attention_backend="unfused")
    # what runs stays legal: sinks under Ulysses CP, vanilla CP on the ring, TorchTitan's own attention,
    # TE-ROCm (other backends, not judged)
    _gpt_oss(cp=2, comm="a2a")
    _gpt_oss(softmax="vanilla", cp=2)
    _gpt_oss(framework="torchtitan", cp=2)
    _gpt_oss(gpu="mi355x", cp=2)


def test_megatron_argv_with_sinks_and_ring_cp_exits_with_the_field():
    """Through the Megatron adapter, as a user's recipe is read: one PlanError naming the flag."""
    from primus_launch.adapters.megatron import plan_from_argv

    argv = ("--num-layers 2 --hidden-size 256 --ffn-hidden-size 256 --num-attention-heads 4 --seq-length 128 "
            "--vocab-size 1000 --micro-batch-size 1 --global-batch-size 8 --softmax-type learnable "
            "--context-parallel-size 2").split()
    with pytest.raises(PlanError, match="--cp-comm-type"):
        plan_from_argv(argv)
    assert plan_from_argv(argv + ["--cp-comm-type", "a2a"]).parallel.cp_comm_type == "a2a"
