"""The legality filter of a space's execution flags: for a structural candidate, every combination of the
flags (``Knobs`` fields from ``overlap_grad_reduce`` on: DP / TP overlaps, CUDA graphs, MoE dispatcher and EP
overlap, compile, offloading, optimizer offload, precision and FP8 recipe, optimizer moments) that the rules of
:mod:`rules` let run with it (Megatron-LM ``megatron/training/arguments.py`` and ``transformer_config.py`` on
``core_r0.16.0``; TorchTitan ``job_config.py``), the user's own values first, cached per the few structural
facts the rules read."""

from __future__ import annotations

from typing import Iterator, Optional

from primus_launch.plan import Plan
from primus_launch.tuner import rules
from primus_launch.tuner.knobs import Knobs
from primus_launch.tuner.space_config import SpaceConfig


class FlagOptions:
    """The legal execution-flag tuples (``Knobs`` fields from ``overlap_grad_reduce`` on) for a
    structural candidate, cached per the few structural facts the rules read."""

    def __init__(self, plan: Plan, fw: str, cfg: SpaceConfig, own: Knobs):
        self.plan, self.fw, self.cfg, self.own = plan, fw, cfg, own
        self.cache: dict[tuple, tuple[tuple, ...]] = {}
        m, t = plan.model, plan.training
        gpu = plan.cluster.gpu
        self.nvidia = rules.is_nvidia(gpu)
        self.local = rules.local_layers(plan)   # megatron-core local layers: no TE-only knob (rules.TE_LAYER_KNOBS)
        can = rules.knobs_for(plan) if cfg.execution else frozenset()
        self.can = can
        self.allow_fp8 = "fp8" in cfg.allow and "fp8" in can
        self.allow_moments = "optimizer-dtypes" in cfg.allow and "moments" in can
        self.recipes = rules.fp8_recipes(gpu, fw)
        self.dense = any(not m.is_moe_layer(i) for i in range(m.num_layers))
        self.all_moe = m.is_moe and not self.dense

    def options(self, tp: int, sp: bool, eg: int, pp: int, vpp: int, shard: str, gran: str,
                mods: tuple[str, ...], ep: int, inert: bool = False) -> tuple[tuple, ...]:
        """``eg`` = expert TP x EP (the flex dispatcher's group), ``ep`` = EP; ``inert``: no data-parallel
        communication (DP x CP and expert DP of 1): the recipe's own DP overlaps come first."""
        key = (tp > 1 and sp, tp > 1, eg > 1, ep > 1, pp > 1, vpp > 1, shard, gran, mods if gran == "selective" else (),
               inert)
        hit = self.cache.get(key)
        if hit is None:
            hit = self.cache[key] = tuple(self._build(tp, sp, ep, pp, vpp, shard, gran, mods, eg, inert))
        return hit

    # each helper returns the values of one knob family, the user's own first
    def _precisions(self, shard: str, gran: str, mods: tuple[str, ...]) -> list[tuple[str, Optional[str], bool]]:
        """(precision, fp8 recipe, fp8 param gather): the recipe's own; with ``allow fp8`` also BF16
        and FP8 with each recipe the GPU runs, param gather off and on (Megatron)."""
        own = self.own
        out = [(own.precision, own.fp8_recipe, own.fp8_param_gather)]
        if self.allow_fp8 and own.precision in ("bf16", "fp16", "fp8"):
            if own.precision == "fp8":
                out.append(("bf16", None, False))
            for rec in self.recipes:
                for pg in (False, True):
                    out.append(("fp8", rec, pg))
        return list(dict.fromkeys(out))

    def _build(self, tp, sp, ep, pp, vpp, shard, gran, mods, eg, inert=False) -> Iterator[tuple]:
        own, plan, fw, cfg, can = self.own, self.plan, self.fw, self.cfg, self.can
        m, t = plan.model, plan.training
        # grad-reduce / param-gather overlap, TP comm overlap
        if fw == "torchtitan":
            tpcos = [own.tp_comm_overlap and tp > 1 and sp]
            if tp > 1 and sp and "tp_comm_overlap" in can:  # async TP (needs compile: _ok)
                tpcos = list(dict.fromkeys(tpcos + [True, False]))
            overlaps = [(own.overlap_grad_reduce, own.overlap_param_gather, x) for x in tpcos]
        else:
            tpco_ok = tp > 1 and sp
            tpcos = [own.tp_comm_overlap and tpco_ok]
            if tpco_ok and "tp_comm_overlap" in can and self.nvidia:
                tpcos = list(dict.fromkeys(tpcos + [True, False]))
            if cfg.search_overlap:
                overlaps = []
                for ogr in (True, False):
                    for opg in ((True, False) if shard != "none" and ogr else (False,)):
                        overlaps += [(ogr, opg, x) for x in tpcos]
            else:
                overlaps = [(True, shard != "none", x) for x in tpcos]
                if inert:   # nothing to overlap: the recipe's own flags first (Megatron: param gather needs sharding)
                    mine = (own.overlap_grad_reduce, own.overlap_param_gather and shard != "none")
                    overlaps = list(dict.fromkeys([mine + (x,) for x in tpcos] + overlaps))
            if t.optimizer == "muon" and not t.muon_layer_wise:  # plain muon: no DP overlaps (Megatron asserts)
                overlaps = [(False, False, x) for x in tpcos]
        # CUDA graphs (TE per-scope graphs; local whole-layer graphs for dense models without EP)
        graphs: list[tuple[str, tuple[str, ...]]] = [(own.cuda_graph_impl, own.cuda_graph_scope)]
        if "cuda_graph" in can and self.nvidia and gran != "full":
            if m.is_moe:
                graphs += [("transformer_engine", ("attn",)), ("transformer_engine", ("moe_router", "moe_preprocess")),
                           ("transformer_engine", ("attn", "moe_router", "moe_preprocess"))]
            else:
                graphs += [("transformer_engine", ()), ("transformer_engine", ("attn",))]
            graphs.append(("none", ()))
        graphs = list(dict.fromkeys(graphs))
        if fw == "torchtitan" and pp > 1:
            # torchtitan 0.3 captures its whole-step graph only without pipeline parallelism (the reader refuses
            # disable_cuda_graphs = false with PP; the writer turns the graphs off): the candidate runs without them
            graphs = [("none", ())]
        if fw == "torchtitan" and ep > 1 and m.is_moe and not self._titan_graphs_under_ep():
            # nor with EP over MoE layers unless the dispatcher is one without a host sync (the reader refuses it, the
            # writer sets disable_cuda_graphs): the candidate runs without
            graphs = [("none", ())]
        # MoE communication: dispatcher, EP overlap (+ delayed wgrad)
        disps = [own.dispatcher]
        if m.is_moe and "dispatcher" in can:
            disps += ["alltoall", "allgather"] + (["deepep", "hybridep"] if self.nvidia and eg > 1 else [])
        disps = list(dict.fromkeys(disps))
        ovls = [(own.ep_overlap, own.delay_wgrad)]
        if m.is_moe and "ep_overlap" in can:
            ovls += [(False, False), (True, False)] + ([(True, True)] if not self.local else [])
        ovls = list(dict.fromkeys(ovls))
        # offloading
        offl = [(own.offload_layers, own.offload_modules)]
        if "offload" in can:
            offl.append((0, ()))
            if pp == 1 and gran == "none":
                offl.append((m.num_layers // 2, ()))
            if self.nvidia and not self.local:   # fine-grained offloading: TE layers only (rules.knob_problems)
                offl.append((0, ("core_attn", "attn_proj")))
                if m.is_moe:
                    offl += [(0, ("expert_fc1",)), (0, ("expert_fc1", "moe_act"))]
        offl = list(dict.fromkeys(offl))
        opt_offs = [own.optimizer_offload]
        if "optimizer_offload" in can and t.optimizer == "adam" and shard != "none":
            opt_offs = list(dict.fromkeys(opt_offs + [0.0, 1.0]))
        moms = [own.moments]
        if self.allow_moments and t.optimizer == "adam" and shard != "none":
            moms = list(dict.fromkeys(moms + [("fp32", "fp32"), ("bf16", "bf16")]))
        compiles = [own.compile] + ([not own.compile] if "compile" in can else [])
        precs = self._precisions(shard, gran, mods)
        for ogr, opg, tpco in overlaps:
            for cg in graphs:
                for disp in disps:
                    for ovl in ovls:
                        for comp in compiles:
                            for off in offl:
                                for oo in opt_offs:
                                    for prec in precs:
                                        for mom in moms:
                                            f = (ogr, opg, tpco, cg[0], cg[1], disp, ovl[0], ovl[1], comp,
                                                 off[0], off[1], oo, prec[0], prec[1], prec[2], mom)
                                            if self._ok(f, tp, sp, ep, pp, vpp, shard, gran, mods, eg):
                                                yield f

    def _titan_graphs_under_ep(self) -> bool:
        """Whether the recipe's TorchTitan 0.3 EP dispatcher captures CUDA graphs under EP > 1.  torchtitan 0.3.0
        ``trainer.py`` (``Trainer.Config`` validation) refuses graphs with EP > 1 unless every token dispatcher is
        MinimalAsyncEP or HybridEP with ``non_blocking_capacity_factor`` set; the plan spells MinimalAsyncEP as
        ``alltoall`` and keeps no capacity factor, so only a recipe that itself captured with EP > 1 (which the reader
        accepts only for those) shows its dispatcher qualifies."""
        own, plan = self.own, self.plan
        return own.dispatcher in ("alltoall", "hybridep") and plan.parallel.ep > 1 and own.cuda_graph_impl != "none"

    def _ok(self, f: tuple, tp: int, sp: bool, ep: int, pp: int, vpp: int, shard: str, gran: str,
            mods: tuple[str, ...], eg: int) -> bool:
        """The rules of :mod:`rules` for the flags (given the structural facts): Megatron-LM's
        (:meth:`_megatron_ok`) or TorchTitan's, then the GPU's; the user's own combination passes as it is
        only where it is the recipe's own structure."""
        (ogr, opg, tpco, cg_impl, cg_scope, disp, ovl, dwg, comp, off_l, off_m, oo, prec, rec, pg, mom) = f
        if self.fw == "megatron":
            if not self._megatron_ok(f, tp, sp, ep, pp, vpp, shard, gran, mods, eg):
                return False
        else:  # torchtitan
            if tpco and tp > 1 and not comp:
                return False
            if pg and (prec != "fp8" or shard != "full" or rec not in (None, "tensorwise")):
                return False
        # GPU
        if not self.nvidia and (cg_impl != "none" or disp in ("deepep", "hybridep") or off_m):
            return False
        if prec == "fp8" and rec not in self.recipes + ((None, "delayed") if self.fw == "megatron" else ()):
            return False
        return True

    def _megatron_ok(self, f: tuple, tp: int, sp: bool, ep: int, pp: int, vpp: int, shard: str, gran: str,
                     mods: tuple[str, ...], eg: int) -> bool:
        """Megatron-LM's rules for the flags (``rules.knob_problems``): the MoE dispatchers and EP overlap,
        TE-only knobs, recompute modules x precision, CUDA graphs' scopes, offloading, the optimizer's offload and
        precision-aware state, FP8 parameter gather."""
        (ogr, opg, tpco, cg_impl, cg_scope, disp, ovl, dwg, comp, off_l, off_m, oo, prec, rec, pg, mom) = f
        m, t = self.plan.model, self.plan.training
        sel = gran == "selective"
        msel = set(mods) if sel else set()
        pao = t.precision_aware_optimizer or mom != ("fp32", "fp32") or oo > 0
        if disp in ("deepep", "hybridep") and m.is_moe and eg <= 1:
            return False
        if self.local and (dwg or off_m):   # TE layers only (rules.knob_problems)
            return False
        # recompute modules x precision
        if prec == "fp8" and rec in (None, "delayed") and msel & {"moe_act", "layernorm"}:
            return False
        # EP overlap
        if ovl:
            if not m.is_moe or ep <= 1 or disp == "allgather" or gran == "full" or prec == "fp32":
                return False
            if t.moe_shared_expert_overlap or m.mtp_num_layers > 1 or (m.mtp_num_layers == 1 and pp == 1):
                return False
            if pp > 1 and vpp == 1:
                return False
            if cg_impl == "local" or (cg_impl == "transformer_engine" and {"moe", "mlp"} & set(cg_scope)):
                return False
        if dwg and not ovl:
            return False
        # CUDA graphs
        if cg_impl != "none":
            sc = set(cg_scope)
            whole = not sc or "full_iteration" in sc
            if "full_iteration" in sc or (cg_impl == "local" and ep > 1) or "moe" in sc:
                return False
            if "moe_preprocess" in sc and "moe_router" not in sc:
                return False
            if "moe_preprocess" in sc and disp == "alltoall" and m.is_moe and t.moe_router_padding_for_quantization \
                    and prec in ("fp8", "fp4"):  # apply_knobs keeps the padding only there
                return False
            if sc & {"moe_router", "moe_preprocess"} and not m.is_moe:
                return False
            if "mlp" in sc and self.all_moe:
                return False
            if not sc and m.is_moe:
                return False
            if gran == "full" or off_l:
                return False
            if sel:
                if cg_impl == "transformer_engine" and "moe" in msel and "moe_router" in sc:
                    return False
                if m.attention_dropout and "core_attn" in msel and (whole or "attn" in sc):
                    return False
                if m.hidden_dropout and (("mlp" in msel and (whole or "mlp" in sc))
                                         or ("moe" in msel and (whole or "moe" in sc))):
                    return False
        # offloading
        if off_l:
            if off_l >= m.num_layers or pp > 1 or gran != "none" or off_m:
                return False
        if "attn_proj" in off_m and "core_attn" not in off_m:
            return False
        if oo > 0:
            if not pao:
                return False
            if pg and prec == "fp8" and rec not in (None, "delayed"):
                return False
        if pao and (t.optimizer != "adam" or shard == "none"):
            return False
        # chunked optimizer-state offload (Megatron-LM dev; rules.knob_problems): the distributed
        # optimizer, no --optimizer-cpu-offload
        if t.offload.optimizer_state_fraction > 0 and (oo > 0 or shard != "optimizer"):
            return False
        if pg and prec == "fp8" and shard == "none":
            return False
        return True
