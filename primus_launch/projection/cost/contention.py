"""SM contention: communication kernels that run next to compute hold SMs the compute cannot use.

Overlapping communication with compute hides its time but not its SMs: NCCL runs each channel of a
collective as one CTA resident on an SM for the whole operation, DeepEP / HybridEP run their
dispatch and combine kernels on a fixed SM count, and Transformer Engine's userbuffers (Megatron
``--tp-comm-overlap``) either run their communication on copy engines with one SM of bookkeeping or on
a fixed SM count while the GEMM is launched with an SM margin.  Three closed forms:

- a GEMM launched with an SM margin of ``n`` (TE userbuffers ``set_sm_margin``) runs on ``U - n`` of
  the ``U`` SMs for its whole duration: ``t' = t U / (U - n)`` (:func:`margin_factor`);
- a communication kernel holding ``n`` SMs for the ``h`` seconds it overlaps saturated compute
  displaces ``n/U`` of the compute for that time, which the compute makes up afterwards:
  ``extra = h n / U`` (:func:`displaced`), where the compute's kernels take work dynamically
  (Blackwell's cluster launch control, non-persistent grids);
- on Hopper the GEMMs are persistent kernels with a static tile schedule: each of the ``U`` resident
  workers owns a fixed share of the tiles, and the workers whose SMs a communication kernel holds
  start only when it leaves, so the GEMM's tail grows by the overlap instead of by ``n/U`` of it
  (NVIDIA CUTLASS documentation, "Blackwell Cluster Launch Control": "static scheduler is
  susceptible to workload imbalance if the resources of some SMs are unavailable", the limitation
  Blackwell's dynamic scheduling removes).  Measured on H100: a 132-CTA GEMM overlapped by a 24-CTA
  NCCL all-gather fell from ~80 % to ~47 % MFU, its time "nearly doubles"
  (forums.developer.nvidia.com/t/compute-communication-overlap-causes-severe-gemm-performance-
  degradation-because-of-tail-effect/337991): the compute keeps 47/80 of its rate while overlapped,
  ``STATIC_TAIL["hopper"] = 1 - 47/80`` lost, whatever ``n`` (:func:`lost_fraction`; the lower bound
  of the measurement: the all-gather's own length is not stated, a whole-GEMM overlap would lose 1/2).

SM counts (each from the framework's code or the recipes that launch it):

- ``UB_SMS`` / ``UB_METHOD`` (``plan/userbuffers.py``, a framework fact the reader needs too): Transformer Engine's default userbuffers configuration
  (``transformer_engine/pytorch/module/base.py`` ``initialize_ub.get_default_config`` @d0067d0):
  ``ring_exchange`` (all-gather overlap of qkv/fc1 forward and proj/fc2 input-grad) ``num_sm`` 1, on
  copy engines (``use_ce``), no margin; ``pipeline`` (reduce-scatter overlap of proj/fc2 forward) and
  ``bulk`` (qkv/fc1 input-grad and weight-grad) ``num_sm`` 16 with ``set_sm_margin``; proj/fc2 weight
  gradients are ``external`` (no communication kernel of their own).  A plan's
  ``training.tp_comm_overlap_cfg`` (Megatron ``--tp-comm-overlap-cfg`` YAML, Megatron-Bridge's per-model
  ``userbuffers_*`` configs in ``src/megatron/bridge/training/comm_overlap.py``) overrides them per layer GEMM
  as TE's ``initialize_ub`` does (e.g. Bridge's FP8 configs: proj/fc2 fprop ring_exchange with a 1-SM margin,
  qkv/fc1 bulk with 2-32 SMs and no margin).  NeMo's tuned configurations use
  the same methods with 2-24 SMs (NeMo-Framework-Launcher ``conf/training/tp_overlap/ub_cfg_*.yaml``).
- ``DEEPEP_SMS`` = 20: Megatron-Core's default ``moe_deepep_num_sms`` (``transformer_config.py``,
  core_r0.16.0; at dev @d48bd6be ``moe_flex_dispatcher_num_sms`` None -> 20 in ``_DeepepManager``).
  ``HYBRIDEP_SMS`` = (24, 8): HybridEP's own default for its dispatch / combine kernels, 24 inside one
  NVLink domain and 8 across domains (DeepEP ``hybrid-ep`` @cf78085 ``csrc/hybrid_ep/config.cuh``
  ``Configurer``: ``num_sms_dispatch_api.value_or(num_of_nodes == 1 ? 24 : 8)``), which Megatron-LM dev
  @d48bd6be leaves in force (``moe_flex_dispatcher_num_sms`` None, ``moe_hybridep_num_sms`` deprecated).
- ``NCCL_SMS`` = 20: NCCL's channel count is a runtime topology-search result (``src/graph/search.cc``,
  up to ``MAXCHANNELS`` = 64 CTAs); we take the SMs NVIDIA's own Megatron-LM recipes leave free for
  the communication that runs next to compute: ``NVTE_FWD_LAYERNORM_SM_MARGIN`` /
  ``NVTE_BWD_LAYERNORM_SM_MARGIN`` = 20-24 in ``examples/moe_recipes`` ENV_VARS (dev branch), the low
  end, equal to DeepEP's default.  A stated value, not fitted.
"""

from __future__ import annotations

from primus_launch.plan.userbuffers import ub_default

# compute rate lost while a communication kernel overlaps it, per architecture whose GEMMs use a
# static persistent schedule (module doc; measured H100 GEMM 80 % -> 47 % MFU under a 24-CTA NCCL kernel)
STATIC_TAIL = {"hopper": 1.0 - 47.0 / 80.0}
DEEPEP_SMS = 20
HYBRIDEP_SMS = (24, 8)   # (inside one NVLink domain, across domains)
NCCL_SMS = 20


def margin_factor(n: int, units: int) -> float:
    """Time factor of a kernel launched with an SM margin of ``n`` on a GPU of ``units`` SMs:
    ``U / (U - n)`` (module doc: TE userbuffers ``set_sm_margin``; 1 without a margin)."""
    if n <= 0 or units <= n:
        return 1.0
    return units / (units - n)


def ub_factors(gemm: str, units: int, cfg: tuple = ()) -> tuple[float, float, float]:
    """(forward, input-grad, weight-grad) time factors of layer GEMM ``gemm`` (``qkv``, ``proj``,
    ``fc1``, ``fc2``) under TE userbuffers: TE's default configuration (module doc) with the plan's
    overrides ``cfg`` (``Training.tp_comm_overlap_cfg``: (name, method, num_sm, set_sm_margin), as
    ``initialize_ub`` merges a user's ``ub_cfgs`` over its defaults): a margin of ``num_sm`` where
    ``set_sm_margin`` holds (TE ``CommOverlapCore``: the GEMM gets ``sm_count - num_comm_sm`` SMs), else
    the ``num_sm`` SMs its communication kernel holds for the GEMM's duration (at most); copy-engine
    ring exchange without a margin takes ``num_sm`` (1) the same way."""
    over = {c[0]: c[1:] for c in cfg}
    out = []
    for ps in ("fprop", "dgrad", "wgrad"):
        name = f"{gemm}_{ps}"
        method, n, margin = over.get(name, ub_default(name))
        if method == "external":
            out.append(1.0)
            continue
        out.append(margin_factor(n, units) if margin else 1.0 + n / units)
    return out[0], out[1], out[2]


def lost_fraction(n: int, units: int, arch: str = "") -> float:
    """Fraction of the compute rate lost while a communication kernel holding ``n`` of ``units`` SMs
    overlaps it (module doc): ``n / units``, at least ``STATIC_TAIL[arch]`` on architectures whose
    GEMMs keep a static persistent schedule."""
    if n <= 0 or units <= 0:
        return 0.0
    return min(1.0, max(n / units, STATIC_TAIL.get(arch, 0.0)))


def displaced(hidden_s: float, n: int, units: int, arch: str = "") -> float:
    """Compute seconds displaced by a communication kernel holding ``n`` of ``units`` SMs for the
    ``hidden_s`` seconds it overlaps compute (module doc)."""
    if hidden_s <= 0 or n <= 0:
        return 0.0
    return hidden_s * lost_fraction(n, units, arch)


def ep_sms(dispatcher: str, domains: int = 1, num_sms: int | None = None) -> int:
    """SMs one EP dispatch / combine holds: DeepEP, HybridEP (by the EP group's NVLink-domain count
    ``domains``), else NCCL's all-to-all / all-gather; ``num_sms``: the recipe's own count for DeepEP /
    HybridEP (``training.moe_dispatcher_num_sms``)."""
    if num_sms and dispatcher in ("deepep", "hybridep"):
        return num_sms
    if dispatcher == "hybridep":
        return HYBRIDEP_SMS[0] if domains <= 1 else HYBRIDEP_SMS[1]
    return DEEPEP_SMS if dispatcher == "deepep" else NCCL_SMS
