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
