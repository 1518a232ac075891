"""Eager ``nn.RMSNorm``: PyTorch's fused kernel against the composite, by the run's torch (``plan.software.torch``).

Independent truth: the installed torch's own dispatch (its packaged ``native_functions.yaml`` /
``derivatives.yaml``, a Python kernel registered at the CPU key of ``aten::_fused_rms_norm`` that
``F.rms_norm`` must reach, and the CPU composite traced under a dispatch mode).  Fails when torch's dispatch of
``rms_norm`` changes, so that ``cost/torch_rmsnorm.py`` is re-read.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from primus_launch.errors import UserError  # noqa: E402
from primus_launch.plan import Plan, Software  # noqa: E402
from primus_launch.projection.cost.torch_rmsnorm import (FIRST_RELEASE, RMSNORM_TORCH_FUSED,  # noqa: E402
                                                         torch_fuses_rms_norm)

ROOT = Path(__file__).resolve().parents[1]


def _yaml(name: str) -> list:
    import yaml

    import torchgen

    base = Path(torchgen.__file__).parent / "packaged"
    path = base / ("ATen/native/native_functions.yaml" if name == "native" else "autograd/derivatives.yaml")
    return yaml.safe_load(path.read_text())


def test_fused_rms_norm_has_cuda_forward_and_backward_kernels() -> None:
    """native_functions.yaml: ``_fused_rms_norm`` has a CUDA kernel (other devices: the composite) and
    ``_fused_rms_norm_backward`` a CUDA kernel; derivatives.yaml routes an ordinary backward (grad mode off)
    to ``_fused_rms_norm_backward``."""
    funcs = {f["func"].split("(")[0]: f for f in _yaml("native") if "func" in f}
    fwd = funcs["_fused_rms_norm"]["dispatch"]
    assert fwd["CUDA"] == "_fused_rms_norm_cuda"
    assert fwd["CompositeImplicitAutograd"] == "rms_norm_composite"
    assert funcs["_fused_rms_norm_backward"]["dispatch"]["CUDA"] == "_fused_rms_norm_backward_cuda"
    deriv = next(d for d in _yaml("derivatives") if d["name"].startswith("_fused_rms_norm("))
    assert "_fused_rms_norm_backward(grads[0]" in deriv["input, weight"]
    assert "GradMode::is_enabled()" in deriv["input, weight"]


def test_f_rms_norm_reaches_fused_op_forward_and_backward() -> None:
    """With a kernel registered at the CPU key, ``F.rms_norm`` (bf16 input and weight, as under FSDP2's bf16
    param_dtype) calls ``aten::_fused_rms_norm`` forward and ``_fused_rms_norm_backward`` in backward: the path a
    CUDA tensor takes to the fused kernels.  A weight of another dtype falls back to the composite."""
    calls: list[str] = []
    lib = torch.library.Library("aten", "IMPL")
    try:
        def fwd(x, shape, weight, eps):
            calls.append("fwd")
            xf = x.float()
            rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + (eps or 1e-6))
            y = (xf * rstd).to(x.dtype)
            return (y * weight if weight is not None else y), rstd

        def bwd(g, x, shape, rstd, weight, mask):
            calls.append("bwd")
            return torch.zeros_like(x), (torch.zeros_like(weight) if weight is not None else None)

        lib.impl("_fused_rms_norm", fwd, "CPU")
        lib.impl("_fused_rms_norm_backward", bwd, "CPU")
        x = torch.randn(4, 64, dtype=torch.bfloat16, requires_grad=True)
        w = torch.ones(64, dtype=torch.bfloat16, requires_grad=True)
        torch.nn.functional.rms_norm(x, (64,), w, 1e-6).sum().backward()
        assert calls == ["fwd", "bwd"]
        calls.clear()
        with pytest.warns(UserWarning, match="Mismatch dtype"):
            torch.nn.functional.rms_norm(x.detach(), (64,), torch.ones(64, dtype=torch.float32), 1e-6)
        assert calls == []   # weight dtype != input dtype: rms_norm_composite, not the fused op
    finally:
        lib._destroy()


def test_cpu_composite_ops() -> None:
    """Without a fused kernel (CPU) ``F.rms_norm`` decomposes into the composite the older-torch price counts:
    upcast, pow, mean, add, rsqrt, two muls, downcast."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Log(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.ops: list[str] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(func._overloadpacket.__name__)
            return func(*args, **(kwargs or {}))

    x = torch.randn(4, 64, dtype=torch.bfloat16)
    w = torch.ones(64, dtype=torch.bfloat16)
    with Log() as log:
        torch.nn.functional.rms_norm(x, (64,), w, 1e-6)
    ops = [o for o in log.ops if o != "detach"]
    assert ops == ["_to_copy", "pow", "mean", "add_", "rsqrt", "mul", "mul", "_to_copy"]


@pytest.mark.parametrize("version,fused", [(None, True), ("2.5.1", False), ("2.8.0", False), ("2.7.0a0+git1963fc8", False),
                                           ("2.9.0", True), ("2.9.0.dev20250801+cu126", True), ("2.13.0+cu130", True),
                                           ("2.10", True)])
def test_release_switch(version, fused) -> None:
    assert torch_fuses_rms_norm(version) is fused
    assert str(FIRST_RELEASE).startswith("2.9")


def _titan_plan(torch_version: str | None, compile_: bool = False) -> Plan:
    from primus_launch.adapters import load_recipe

    plan = load_recipe(ROOT / "recipes/torchtitan/llama3.1_8b.toml")
    t = plan.training.model_copy(update={"compile": compile_})
    return plan.model_copy(update={"training": t, "software": Software(torch=torch_version)})


def _norm_bytes(plan: Plan) -> tuple[float, float, float]:
    from primus_launch.projection.cost.roofline import layer_op_times

    ops = [o for o in layer_op_times(plan)["dense"] if o[0] == "input norm"]
    assert len(ops) == 1
    name, f, bi, bw, info = ops[0]
    return info[3], f, bi


def test_cost_switch_prices_fused_bytes_on_recent_torch() -> None:
    """Eager TorchTitan: the input norm moves 4 B per element forward on torch >= 2.9 (and unstated), 36 B
    (the composite) on older torch; its backward 10 B against 72 B; compiled plans are fused either way."""
    new, old = _norm_bytes(_titan_plan(None)), _norm_bytes(_titan_plan("2.8.0"))
    elems = new[0] / RMSNORM_TORCH_FUSED[0]
    assert old[0] == pytest.approx(36.0 * elems)
    assert new[1] < old[1] and new[2] < old[2]
    assert _norm_bytes(_titan_plan("2.9.1"))[0] == pytest.approx(new[0])
    assert _norm_bytes(_titan_plan(None, True)) == pytest.approx(_norm_bytes(_titan_plan("2.5.1", True)))


def _wrapper(tmp_path: Path, software: str) -> Path:
    shutil.copy(ROOT / "recipes/torchtitan/llama3.1_8b.toml", tmp_path / "job.toml")
    w = tmp_path / "run.primus.toml"
    w.write_text(f'[recipe]\npath = "job.toml"\n\n[cluster]\ngpu = "h100-sxm"\nnodes = 1\n\n{software}')
    return w


def test_wrapper_reads_software_torch(tmp_path: Path) -> None:
    from primus_launch.adapters import load_recipe

    assert load_recipe(_wrapper(tmp_path, '[software]\ntorch = "2.8.0+cu128"\n')).software.torch == "2.8.0+cu128"
    assert load_recipe(_wrapper(tmp_path, "")).software.torch is None


@pytest.mark.parametrize("table,needle", [('[software]\ntorch = "banana"\n', "software.torch='banana'"),
                                          ("[software]\ntorch = 2.8\n", "software.torch"),
                                          ('[software]\ncuda = "12.8"\n', "allowed: torch")])
def test_wrapper_refuses_bad_software(tmp_path: Path, table: str, needle: str) -> None:
    from primus_launch.adapters import load_recipe
    from primus_launch.plan import PlanError

    with pytest.raises((UserError, PlanError)) as e:
        load_recipe(_wrapper(tmp_path, table))
    assert needle in str(e.value) and "\n" not in str(e.value)
