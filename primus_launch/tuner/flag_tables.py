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
        # the nested loops keep the order of the flag tuples; each loop level skips the values that a rule reading only
        # the knobs bound so far rejects (the _cut_* checks: together, every rule of Megatron-LM / TorchTitan / the GPU)
        for ogr, opg, tpco in overlaps:
            for cg in graphs:
                if self._cut_graph(cg, ep, gran, mods):
                    continue
                for disp in disps:
                    if self._cut_dispatcher(disp, eg):
                        continue
                    for ovl in ovls:
                        if self._cut_ep_overlap(ovl, cg, disp, ep, pp, vpp, gran):
                            continue
                        for comp in compiles:
                            if fw == "torchtitan" and tpco and tp > 1 and not comp:   # async TP needs compile
                                continue
                            for off in offl:
                                if self._cut_offload(off, cg, pp, gran):
                                    continue
                                for oo in opt_offs:
                                    if self._cut_optimizer_offload(oo, shard):
                                        continue
                                    head = (ogr, opg, tpco, cg[0], cg[1], disp, ovl[0], ovl[1], comp, off[0], off[1],
                                            oo)
                                    ok_moms = [mom for mom in moms if not self._cut_moments(mom, oo, shard)]
                                    for prec in precs:
                                        if self._cut_precision(prec, ovl[0], cg, disp, oo, shard, gran, mods):
                                            continue
                                        for mom in ok_moms:
                                            yield head + prec + (mom,)

    # The rules for the flags (given the structural facts), split by the innermost knob each reads: Megatron-LM's
    # (``rules.knob_problems``: MoE dispatchers and EP overlap, TE-only knobs, recompute modules x precision, CUDA
    # graphs' scopes, offloading, the optimizer's offload and precision-aware state, FP8 parameter gather),
    # TorchTitan's (``rules.torchtitan_problems``), then the GPU's (``rules.gpu_problems``).  A flag tuple is legal
    # where no _cut_* rejects its prefixes.
    def _cut_graph(self, cg: tuple[str, tuple[str, ...]], ep: int, gran: str, mods: tuple[str, ...]) -> bool:
        """CUDA-graph clauses that read only the graph, the structure and the model."""
        impl, scope = cg
        if impl == "none":
            return False
        if not self.nvidia:
            return True
        if self.fw != "megatron":
            return False
        m, sc = self.plan.model, set(scope)
        whole = not sc or "full_iteration" in sc
        if "full_iteration" in sc or (impl == "local" and ep > 1) or "moe" in sc:
            return True
        if ("moe_preprocess" in sc and "moe_router" not in sc) or (sc & {"moe_router", "moe_preprocess"}
                                                                   and not m.is_moe):
            return True
        if ("mlp" in sc and self.all_moe) or (not sc and m.is_moe) or gran == "full":
            return True
        if gran == "selective":
            msel = set(mods)
            if impl == "transformer_engine" and "moe" in msel and "moe_router" in sc:
                return True
            if m.attention_dropout and "core_attn" in msel and (whole or "attn" in sc):
                return True
            if m.hidden_dropout and (("mlp" in msel and (whole or "mlp" in sc))
                                     or ("moe" in msel and (whole or "moe" in sc))):
                return True
        return False

    def _cut_dispatcher(self, disp: str, eg: int) -> bool:
        """DeepEP / HybridEP: NVIDIA only; Megatron: an expert group of more than one GPU."""
        if disp not in ("deepep", "hybridep"):
            return False
        return not self.nvidia or (self.fw == "megatron" and self.plan.model.is_moe and eg <= 1)

    def _cut_ep_overlap(self, ovl: tuple[bool, bool], cg: tuple[str, tuple[str, ...]], disp: str, ep: int, pp: int,
                        vpp: int, gran: str) -> bool:
        """Megatron's EP overlap / delayed wgrad clauses that read no precision."""
        if self.fw != "megatron":
            return False
        on, dwg = ovl
        if dwg and (self.local or not on):
            return True
        if not on:
            return False
        m, t = self.plan.model, self.plan.training
        if not m.is_moe or ep <= 1 or disp == "allgather" or gran == "full":
            return True
        if t.moe_shared_expert_overlap or m.mtp_num_layers > 1 or (m.mtp_num_layers == 1 and pp == 1):
            return True
        if pp > 1 and vpp == 1:
            return True
        return cg[0] == "local" or (cg[0] == "transformer_engine" and bool({"moe", "mlp"} & set(cg[1])))

    def _cut_offload(self, off: tuple[int, tuple[str, ...]], cg: tuple[str, tuple[str, ...]], pp: int,
                     gran: str) -> bool:
        """Offloading clauses: fine-grained offloading NVIDIA / TE only; Megatron's layer offloading rules."""
        off_l, off_m = off
        if off_m and not self.nvidia:
            return True
        if self.fw != "megatron":
            return False
        if self.local and off_m:
            return True
        if off_l and (cg[0] != "none" or off_l >= self.plan.model.num_layers or pp > 1 or gran != "none" or off_m):
            return True
        return "attn_proj" in off_m and "core_attn" not in off_m

    def _cut_optimizer_offload(self, oo: float, shard: str) -> bool:
        """Megatron: the optimizer's offload makes the state precision-aware (Adam, distributed optimizer only) and
        excludes the chunked optimizer-state offload."""
        if self.fw != "megatron":
            return False
        t = self.plan.training
        if t.offload.optimizer_state_fraction > 0 and (oo > 0 or shard != "optimizer"):
            return True
        return oo > 0 and (t.optimizer != "adam" or shard == "none")

    def _titan_graphs_under_ep(self) -> bool:
        """Whether the recipe's TorchTitan 0.3 EP dispatcher captures CUDA graphs under EP > 1.  torchtitan 0.3.0
        ``trainer.py`` (``Trainer.Config`` validation) refuses graphs with EP > 1 unless every token dispatcher is
        MinimalAsyncEP or HybridEP with ``non_blocking_capacity_factor`` set; the plan spells MinimalAsyncEP as
        ``alltoall`` and keeps no capacity factor, so only a recipe that itself captured with EP > 1 (which the reader
        accepts only for those) shows its dispatcher qualifies."""
        own, plan = self.own, self.plan
        return own.dispatcher in ("alltoall", "hybridep") and plan.parallel.ep > 1 and own.cuda_graph_impl != "none"

    def _cut_moments(self, mom: tuple[str, str], oo: float, shard: str) -> bool:
        """Megatron: precision-aware optimizer state (its own flag, non-FP32 moments or the optimizer's offload) needs
        Adam and the distributed optimizer; the optimizer's offload needs it."""
        if self.fw != "megatron":
            return False
        t = self.plan.training
        pao = t.precision_aware_optimizer or mom != ("fp32", "fp32") or oo > 0
        return (oo > 0 and not pao) or (pao and (t.optimizer != "adam" or shard == "none"))

    def _cut_precision(self, prec: tuple[str, Optional[str], bool], ep_overlap: bool,
                       cg: tuple[str, tuple[str, ...]], disp: str, oo: float, shard: str, gran: str,
                       mods: tuple[str, ...]) -> bool:
        """Precision, FP8 recipe and FP8 parameter gather against the GPU's recipes and the knobs bound outside."""
        p, rec, pg = prec
        if p == "fp8" and rec not in self.recipes + ((None, "delayed") if self.fw == "megatron" else ()):
            return True
        if self.fw != "megatron":  # torchtitan: FP8 all-gather of FSDP2 shards, tensorwise scaling only
            return pg and (p != "fp8" or shard != "full" or rec not in (None, "tensorwise"))
        if gran == "selective" and p == "fp8" and rec in (None, "delayed") and set(mods) & {"moe_act", "layernorm"}:
            return True
        if ep_overlap and p == "fp32":
            return True
        m, t = self.plan.model, self.plan.training
        if cg[0] != "none" and "moe_preprocess" in cg[1] and disp == "alltoall" and m.is_moe \
                and t.moe_router_padding_for_quantization and p in ("fp8", "fp4"):  # apply_knobs keeps the padding
            return True
        if oo > 0 and pg and p == "fp8" and rec not in (None, "delayed"):
            return True
        return pg and p == "fp8" and shard == "none"
