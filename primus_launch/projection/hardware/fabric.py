"""The fabric of a GPU as data: link bandwidths, efficiencies and latencies (:class:`Fabric`), and the
registry of fabrics measured on this machine or stated in a GPU file (``[collectives.<gpu>]`` tables).

The collectives model (:mod:`primus_launch.projection.cost.collectives`) builds each GPU's fabric from
its spec and the fitted curves of its architecture and lays a registered one over it; it reads this
module and subscribes to changes (:func:`on_change`) to forget what it cached.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Fabric:
    """Fitted link efficiencies and latencies of one GPU's fabric (``cost/collectives.py`` module doc)."""

    up_bw: float
    link_bw: float          # one point-to-point link of a mesh (0: switch)
    e_ar: float
    e_g: float
    e_a2a: float
    l_ar: float
    l_g: float
    l_a2a: float
    nic_bw: float
    e_nic: float
    e_nic_a2a: float        # the NIC's efficiency under all-to-all traffic (many peers, small messages)
    l_nic: float
    a_up: float             # per ring-step latency (spec)
    a_nic: float
    e_rdma: dict
    e_nvl: dict
    fitted: bool            # False: the alpha-beta defaults of calibration.py
    # reduce-scatter's own pair, only where it was fitted apart from all-gather (the measured local
    # spec: gloo's reduce-scatter is not its all-gather); None = the gather pair (e_g, l_g)
    e_rs: float | None = None
    l_rs: float | None = None
    e_p2p: float | None = None  # point-to-point efficiency inside a domain; None = e_g
    # latency of an all-to-all across domains (one round of send/recv to every peer); None = l_nic
    l_nic_a2a: float | None = None
    # measured (S, seconds) points per op (all_reduce, all_gather, reduce_scatter, all_to_all, p2p
    # one-way) for a group of points_ranks ranks in one domain (the local spec); None = the fits alone
    points: dict | None = None
    points_ranks: int = 2

    def up(self, k: int) -> float:
        """Scale-up bandwidth a group with ``k`` members in the domain can use."""
        if self.link_bw and k > 1:
            return min(self.up_bw, (k - 1) * self.link_bw)
        return self.up_bw


_LISTENERS: list[Callable[[], None]] = []


def on_change(fn: Callable[[], None]) -> None:
    """Call ``fn`` whenever a fabric is registered or dropped (the cost model's caches)."""
    if fn not in _LISTENERS:
        _LISTENERS.append(fn)


_MEASURED: dict[str, dict] = {}


def register_fabric(gpu: str, fields: dict | None) -> None:
    """Make ``fabric(gpu)`` the architecture / calibration fabric with ``fields`` (``Fabric`` field
    names: per-op ``e_*`` / ``l_*``, ``a_up``, ...) measured on this machine replacing it, priced as a
    fitted fabric (per-op alpha-beta, ``cost/collectives.py``); ``None`` drops a registration.  Calls
    every :func:`on_change` listener (the cost model's caches)."""
    if fields:
        bad = set(fields) - {f.name for f in dataclasses.fields(Fabric)}
        if bad:
            raise ValueError(f"register_fabric: unknown Fabric field(s) {sorted(bad)}")
        _MEASURED[gpu] = dict(fields, fitted=True)
    else:
        _MEASURED.pop(gpu, None)
    for fn in _LISTENERS:
        fn()


def register_fabric_tables(tables: dict) -> list[str]:
    """Register every ``{gpu: fields}`` of a GPU file's ``[collectives.<gpu>]`` tables (per-operation
    link fits, as ``measure.localhw.measure_local_spec`` writes them) with :func:`register_fabric`;
    returns the GPU names."""
    for gpu, fields in tables.items():
        register_fabric(gpu, dict(fields))
    return list(tables)


def measured_fabric_fields(gpu: str) -> dict | None:
    """The fields :func:`register_fabric` registered for ``gpu`` (None: none)."""
    return dict(_MEASURED[gpu]) if gpu in _MEASURED else None
