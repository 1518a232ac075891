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


#: run the CLI with the signal sent to itself as torch's native half (``torch._C``) starts importing
_AT_TORCH_IMPORT = r"""
import os, signal, sys
SIG = int(sys.argv.pop(1))
sent = []
def hook(event, args):
    if event == "import" and args[0] == "torch._C" and not sent:
        sent.append(1)
        os.kill(os.getpid(), SIG)
sys.addaudithook(hook)
sys.argv[0] = "primus_launch"
from primus_launch.__main__ import run
rc = run()
print("torch._C loaded:", "torch._C" in sys.modules and hasattr(sys.modules["torch"], "nn"), file=sys.stderr)
sys.exit(rc)
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_a_signal_while_torch_imports_is_raised_once_it_is_imported(tmp_path, sig):
    """The recipe's reader imports torch (the tiny recipe's training script is read through
    ``examples.tiny_mcore_train``): a signal as ``torch._C`` loads ends the run with its one line and exit
    code, and writes no report."""
    import subprocess
    import sys

    shutil.copy(TINY, tmp_path / "r.sh")
    env = dict(os.environ, PYTHONPATH=str(ROOT), PRIMUS_LAUNCH_CACHE=str(tmp_path / "cache"))
    p = subprocess.run([sys.executable, "-c", _AT_TORCH_IMPORT, str(int(sig)), "--project", "r.sh", "--dry-run",
                        "--report", "p.html"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    err = [ln for ln in p.stderr.splitlines() if ln.strip()]
    # the wrapper's own line: run() ends the process (os._exit) on a signal, so it never prints
    assert p.returncode == interrupt.exit_code(sig), p.stderr[-2000:]
    assert err == [interrupt.end_line(sig)]
    assert not (tmp_path / "p.html").exists()


def test_a_signal_inside_a_weakref_callback_prints_no_traceback(capsys):
    """The signal's exception raised in a weakref callback run by the garbage collector (seen: torch's
    ``WeakIdKeyDictionary`` ``remove``, ``Exception ignored in`` plus a traceback above the one line) is
    not reported; the signal is remembered and :func:`interrupt.check` raises it."""
    import weakref

    class Thing:
        pass

    def callback(_ref):
        os.kill(os.getpid(), signal.SIGTERM)
        sum(range(10))  # the handler runs here, inside the callback

    with pytest.raises(interrupt.Terminated), interrupt.handling():
        t = Thing()
        r = weakref.ref(t, callback)
        del t  # the callback runs; its exception is unraisable
        assert r() is None
        assert interrupt.received() == signal.SIGTERM
        interrupt.check()
    assert "Exception ignored" not in capsys.readouterr().err
