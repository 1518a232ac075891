"""TorchTitan's own start-up validation of a job, run on the CPU at the target world size.

For each case a child process runs what ``torchtitan/train.py`` (v0.2) / ``torchtitan/trainer.py``
(0.3) runs before building the model:

1. ``ConfigManager().parse_args(argv)`` (``torchtitan/config/manager.py``): a v0.2 job TOML through
   ``--job.config_file`` (+ overrides), a 0.3 launch's ``--module M --config C ...``;
2. ``ParallelDims`` (``torchtitan/distributed/parallel_dims.py``) from ``config.parallelism`` at the
   world size (``_validate``: the degrees' product, ETP = TP or 1 in v0.2, ...);
3. ``ParallelDims.build_mesh()`` on torch's fake process group at the full world size (every mesh
   unflatten, including the expert meshes ``efsdp = dp_shard*cp*tp/(etp*ep)``);
4. the model config's ``update_from_config`` (v0.2 ``train_spec.model_args[flavor]``; 0.3
   ``config.model_spec.model``), which checks the model against the job.

The installed torchtitan (0.3.0) is used unless ``--torchtitan DIR`` names a source tree (e.g. the
v0.2.2 tag, ``git archive v0.2.2 torchtitan``) for the v0.2 TOML jobs.  Patched to run without a GPU:
``torchtitan.tools.utils.device_type`` is ``"cpu"`` (:mod:`titan_cpu` does the same), so the device
mesh is built on the CPU over the fake process group; nothing else.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from primus_launch.frameworks.mlm_validate import Verdict


@dataclass
class TitanCase:
    """One TorchTitan job to validate: ``ConfigManager`` arguments and the world size."""

    name: str
    argv: list[str]
    world_size: int


def validate_titan(cases: list[TitanCase], torchtitan: str | Path | None = None,
                   timeout: float = 1800.0) -> list[Verdict]:
    """Run TorchTitan's own validation on every case in one child process (installed torchtitan, or
    the source tree ``torchtitan``)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(Path(__file__).resolve().parents[2]),
                                                    env.get("PYTHONPATH", "")) if p)
    cmd = [sys.executable, "-m", "primus_launch.frameworks.titan_validate"]
    if torchtitan is not None:
        cmd += ["--torchtitan", str(torchtitan)]
    proc = subprocess.run(cmd, input=json.dumps([asdict(c) for c in cases]), capture_output=True, text=True,
                          env=env, timeout=timeout)
    out = proc.stdout.strip().splitlines()
    if proc.returncode or not out:
        raise RuntimeError(f"TorchTitan validation worker failed (rc {proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return [Verdict(**d) for d in json.loads(out[-1])]


# --------------------------------------------------------------------------- the child process
def _cpu_device() -> None:
    from primus_launch.frameworks.titan_cpu import install

    install("cpu")


def _parallel_dims(cfg: object, world_size: int) -> object:
    from torchtitan.distributed.parallel_dims import ParallelDims

    if hasattr(ParallelDims, "from_config"):  # 0.3 (trainer.py init_distributed)
        return ParallelDims.from_config(cfg.parallelism, world_size)  # type: ignore[attr-defined]
    p = cfg.parallelism  # type: ignore[attr-defined]
    return ParallelDims(dp_shard=p.data_parallel_shard_degree, dp_replicate=p.data_parallel_replicate_degree,
                        cp=p.context_parallel_degree, tp=p.tensor_parallel_degree, pp=p.pipeline_parallel_degree,
                        ep=p.expert_parallel_degree, etp=p.expert_tensor_parallel_degree, world_size=world_size)


def _model_config(cfg: object) -> None:
    spec = getattr(cfg, "model_spec", None)
    if spec is not None:  # 0.3 trainer.py: model_spec.model.update_from_config(config=config)
        spec.model.update_from_config(config=cfg)
        return
    from torchtitan.protocols.train_spec import get_train_spec  # v0.2 train.py

    m = cfg.model  # type: ignore[attr-defined]
    spec2 = get_train_spec(m.name)
    spec2.model_args[m.flavor].update_from_config(cfg)


def check_titan_case(case: TitanCase) -> Verdict:
    """TorchTitan's validation of one case in this process (the torchtitan importable here; a default
    process group left by someone else is replaced by the fake one and none is left behind)."""
    import torch
    from torch.testing._internal.distributed.fake_pg import FakeStore

    from torchtitan.config.manager import ConfigManager

    _cpu_device()
    res = Verdict(case.name, False)
    stage = "config"
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            cfg = ConfigManager().parse_args(list(case.argv))
            stage = "parallel_dims"
            dims = _parallel_dims(cfg, case.world_size)
            stage = "mesh"
            _drop_default_group()
            torch.distributed.init_process_group("fake", store=FakeStore(), rank=0, world_size=case.world_size)
            dims.build_mesh()  # type: ignore[attr-defined]
            stage = "model_config"
            _model_config(cfg)
        res.ok = True
    except BaseException as e:  # noqa: BLE001 - every rejection is the answer
        msg = " ".join(str(e).split())
        if isinstance(e, SystemExit):
            lines = [ln for ln in buf.getvalue().splitlines() if ln.strip()]
            msg = " ".join(lines[-3:])[-400:] if lines else f"exit {e.code}"
        res.stage, res.error = stage, (f"{type(e).__name__}: {msg}" if msg else type(e).__name__)
    finally:
        _drop_default_group()
    return res


def _drop_default_group() -> None:
    import torch

    if torch.distributed.is_initialized():
        if "megatron.core.parallel_state" in sys.modules:
            sys.modules["megatron.core.parallel_state"].destroy_model_parallel()
        torch.distributed.destroy_process_group()


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--torchtitan", help="a torchtitan source tree (holds torchtitan/); default: the installed one")
    a = ap.parse_args(argv)
    cases = json.loads(sys.stdin.read())
    if a.torchtitan:
        sys.path.insert(0, str(Path(a.torchtitan).resolve()))
    real_stdout = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):
        import torchtitan.config.manager  # noqa: F401
        import torchtitan.distributed.parallel_dims  # noqa: F401

        out = [asdict(check_titan_case(TitanCase(**c))) for c in cases]
    real_stdout.write(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
