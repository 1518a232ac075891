"""Fixtures shared by the test modules."""

from __future__ import annotations

import pytest


@pytest.fixture
def no_fake_world():
    """The memory tests' trace helpers (``mcore_meta``, ``titan_trace``) leave a fake multi-rank
    default group behind and rebuild theirs when they need it; the measured path's pieces need world
    size 1 (``build_mcore.world_size_one`` refuses a multi-process job): a test that builds pieces
    starts without that group."""
    import torch.distributed as dist
    from megatron.core import parallel_state as ps

    if dist.is_initialized() and dist.get_world_size() != 1:
        ps.destroy_model_parallel()
        dist.destroy_process_group()
    yield


def pytest_configure(config) -> None:
    """The CPU validation harness (``scripts/validation/gloo_lab``) importable as ``gloo_lab``: the
    gloo truth of the collectives and MoE tests and the machine spec of ``test_gloo_lab``."""
    import sys
    from pathlib import Path

    harness = str(Path(__file__).resolve().parents[1] / "scripts" / "validation")
    if harness not in sys.path:
        sys.path.insert(0, harness)
