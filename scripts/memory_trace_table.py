"""Per-term, per-stage agreement of the memory model with the traced framework steps (prints ratios).

Runs the trace cases of ``tests/test_memory_titan.py`` (torchtitan steps), ``tests/test_memory_titan_pp.py``
(torchtitan pipeline stages) and the megatron-core layer measurements of ``tests/test_memory.py``
(``tests/mem_measure.py``) and prints model / trace for every term; the tests assert each within 3 %.

    python scripts/memory_trace_table.py [--only titan|pp|megatron]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

MiB = 2**20


def _row(name: str, terms: list[tuple[str, float, float]]) -> str:
    cells = []
    for term, model, trace in terms:
        r = model / trace if trace else (1.0 if abs(model) < MiB else float("inf"))
        cells.append(f"{term} {model / MiB:.1f}/{trace / MiB:.1f} ({r:.3f})")
    return f"{name:34s} " + "  ".join(cells)


def titan() -> None:
    import test_memory_titan as t

    from primus_launch.projection.memory.estimate import titan_args, titan_stage_memory
    from primus_launch.projection.memory.titan import TITAN_CPU
    from titan_trace import trace

    print("torchtitan step (rank 0): term model/trace MiB (ratio)")
    for name, c in t.CASES.items():
        got = trace(c)
        st = titan_stage_memory(*titan_args(t.plan_of(c)), t.IMPL.get(name, TITAN_CPU))[0]
        pk = got["peak_snapshot"]
        params = t._cat(pk, "Sharded Param") + t._cat(pk, "Buffer")
        opt, grads, acts = t._cat(pk, "OptState"), t._cat(pk, "Sharded Grad"), t._cat(pk, "Activation")
        rest = got["peak"] - params - opt - grads - acts
        print(_row(name, [("total", st.allocated_bytes, got["peak"]), ("param", st.parameters_bytes, params),
                          ("optim", st.optimizer_bytes, opt), ("grad", st.gradients_bytes, grads),
                          ("act", st.activations_bytes, acts), ("trans", st.transient_bytes, rest)]))


def pp() -> None:
    import test_memory_titan_pp as t

    from primus_launch.projection.memory.estimate import titan_args, titan_stage_parts
    from primus_launch.projection.memory.titan import TITAN_CPU
    from titan_trace import trace_pp

    print("torchtitan pipeline stages: term model/trace MiB (ratio)")
    for name, c in t.CASES.items():
        model = titan_stage_parts(*titan_args(t.pp_plan(c)), TITAN_CPU)
        for rank in range(c.pp):
            got = t.terms_of_trace(trace_pp(c, rank))
            want = t.terms_of_model(*model[rank])
            print(_row(f"{name} stage {rank}", [(k, want[k], got[k]) for k in got]))


def megatron() -> None:
    import test_memory as t

    from mem_measure import measure_step
    from primus_launch.plan import ModelArch, Plan
    from primus_launch.projection.memory.activations import MCORE_LOCAL, layer_activation_bytes, mtp_activation_bytes

    print("megatron-core (local spec) per-layer bytes kept: model/trace MiB (ratio)")

    def per_layer(plan, fake=True):
        one = measure_step(plan, 1, post_process=False, fused_swiglu=True, fake=fake)["activations"]
        return measure_step(plan, 2, post_process=False, fused_swiglu=True, fake=fake)["activations"] - one

    arch = t.ARCH.model_copy(update=dict(seq_length=1024))
    la = layer_activation_bytes(arch, seq=1024, mbs=1, tp=1, sp=False, impl=MCORE_LOCAL)
    for mods in [("core_attn",), ("layernorm",), ("mlp",), ("core_attn", "layernorm", "mlp")]:
        plan = t._plan(arch, dict(granularity="selective", modules=mods), dict(tp=1))
        print(_row("dense selective " + "+".join(mods), [("layer", la.selective(mods), per_layer(plan))]))
    moe = ModelArch(num_layers=2, hidden_size=256, ffn_hidden_size=512, num_attention_heads=4, vocab_size=1024,
                    seq_length=128, num_experts=8, moe_router_topk=2, moe_ffn_hidden_size=128,
                    moe_shared_expert_intermediate_size=128, multi_latent_attention=True, q_lora_rank=64,
                    kv_lora_rank=32, qk_head_dim=32, qk_pos_emb_head_dim=16, v_head_dim=32, qk_layernorm=True)
    for tp, sp in [(1, False), (2, True)]:
        lm = layer_activation_bytes(moe, seq=128, mbs=1, tp=tp, sp=sp, moe=True, impl=MCORE_LOCAL)
        for mods in [None, ("layernorm",), ("moe",), ("shared_experts",), ("mla_up_proj",)]:
            if tp > 1 and mods:
                continue
            rc = dict(granularity="selective", modules=mods) if mods else dict(granularity="none")
            plan = Plan(model=moe, parallel=dict(tp=tp, sequence_parallel=sp), training=dict(global_batch_size=1,
                        recompute=rc), cluster=dict(gpus_per_node=tp))
            want = lm.selective(mods) if mods else lm.full
            print(_row(f"moe+mla tp{tp}{'+sp' if sp else ''} {'+'.join(mods) if mods else 'none'}",
                       [("layer", want, per_layer(plan, fake=False))]))
    for tp, sp in [(1, False), (2, False), (2, True)]:
        got = {}
        for n in (0, 1):
            plan = t._plan(arch.model_copy(update=dict(mtp_num_layers=n)), dict(granularity="none"),
                           dict(tp=tp, sequence_parallel=sp))
            got[n] = measure_step(plan, 2, fused_swiglu=True)["activations"]
        want = mtp_activation_bytes(arch.model_copy(update=dict(mtp_num_layers=1)), seq=1024, mbs=1, tp=tp, sp=sp,
                                    impl=MCORE_LOCAL)
        print(_row(f"mtp module tp{tp}{'+sp' if sp else ''}", [("kept", want, got[1] - got[0])]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=("titan", "pp", "megatron"))
    a = ap.parse_args()
    for name, fn in (("titan", titan), ("pp", pp), ("megatron", megatron)):
        if a.only in (None, name):
            fn()


if __name__ == "__main__":
    main()
