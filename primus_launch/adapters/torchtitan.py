"""TorchTitan adapter: v0.2.2-format job TOML <-> :class:`~primus_launch.plan.Plan`."""

from __future__ import annotations

from primus_launch.adapters.torchtitan_arch import arch_from_flavor

__all__ = ["arch_from_flavor"]
