"""A signal at a named phase of the measured path's process-group set-up and teardown (issue: exit -6,
a native abort, about once in 70 interrupted measured runs of the bad-input campaign).

The signal is sent from inside the run, at the phase, to this process (``os.kill``: Python runs the
handler at the next bytecode, still inside the phase), so each case is deterministic -- no timing.
Truth: ``torch.distributed`` / megatron-core's own state after the interrupted run (no default process
group, no model-parallel groups left behind: the C++ ``ProcessGroupGloo`` built by ``init_process_group``
is destroyed) and the CLI's rule (one line, exit 130 / 143, no report file).
"""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pytest

from primus_launch import interrupt

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "recipes" / "megatron" / "tiny_gpt_cpu.sh"

#: each test starts at world size 1 (conftest.no_fake_world)
pytestmark = pytest.mark.usefixtures("no_fake_world")


def _signal_inside(monkeypatch, owner, name: str, sig: int, before: bool = False) -> None:
    """Make ``owner.name`` signal this process at its start (``before``) or once its work is done."""
    real = getattr(owner, name)

    def wrapped(*args, **kwargs):
        if before:
            os.kill(os.getpid(), sig)
        out = real(*args, **kwargs)
        if not before:
            os.kill(os.getpid(), sig)
        return out

    monkeypatch.setattr(owner, name, wrapped)


def _phases():
    import torch.distributed as dist
    from megatron.core import parallel_state as ps

    from primus_launch.frameworks import mcore_cpu

    return {"process group built": (mcore_cpu, "init_single_process", False),
            "megatron groups built": (ps, "initialize_model_parallel", False),
            "process group destroyed": (dist, "destroy_process_group", True)}


@pytest.mark.parametrize("phase", ["process group built", "megatron groups built", "process group destroyed"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_a_signal_in_process_group_setup_or_teardown_leaves_nothing_built(monkeypatch, phase, sig):
    import torch.distributed as dist
    from megatron.core import parallel_state as ps

    from primus_launch.projection.measure.build_mcore import world_size_one

    assert not dist.is_initialized()
    owner, name, before = _phases()[phase]
    _signal_inside(monkeypatch, owner, name, sig, before)
    raised = KeyboardInterrupt if sig == signal.SIGINT else interrupt.Terminated
    with pytest.raises(raised), interrupt.handling():
        with world_size_one("cpu"):
            pass
        interrupt.check()  # (unreached when the signal was raised where it belongs)
    assert interrupt.received() == sig
    assert not dist.is_initialized(), "the gloo process group was left behind"
    assert not ps.model_parallel_is_initialized(), "megatron's groups were left behind"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_the_measured_cli_interrupted_in_process_group_setup_ends_with_one_line(monkeypatch, tmp_path, capsys, sig):
    import torch.distributed as dist

    from primus_launch.cli import main
    from primus_launch.frameworks import mcore_cpu

    shutil.copy(TINY, tmp_path / "r.sh")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PRIMUS_LAUNCH_CACHE", str(tmp_path / "cache"))  # cold: the run builds the layers
    _signal_inside(monkeypatch, mcore_cpu, "init_single_process", sig)
    rc = main(["--project", "r.sh", "--measure-device", "cpu", "--report", "p.html"])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert rc == interrupt.exit_code(sig)
    assert err == [interrupt.end_line(sig)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "r.sh"] or \
        sorted(p.name for p in tmp_path.iterdir()) == ["r.sh"]
    assert not dist.is_initialized()
