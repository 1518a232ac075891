"""The CPU validation harness's machine spec (``scripts/validation/gloo_lab/localhw.py``): what it
writes is read back by the product's own GPU-file loader, and the collectives model then prices
every op by the fit (and the points) the harness registered -- closed-form identities, with the
Adam / GEMM probes fixed (nothing here times anything)."""

from __future__ import annotations

import pytest


def test_local_spec_registers_each_link_fit(tmp_path, monkeypatch):
    """``measure_local_spec`` with a links result registers each op's own fit: the collectives model
    then gives back every fitted ``t = b / B + c`` (b: bus bytes; p2p: S) exactly, for 2 ranks; the
    TOML's ``[collectives.*]`` table re-registers the same fits; ``links=False`` drops them.  (The
    Adam / GEMM probes are not under test here: fixed values keep it fast.)"""
    from primus_launch.projection.cost import collectives as coll
    from primus_launch.projection.hardware.placement import place
    from gloo_lab import localhw
    from gloo_lab.localhw import OPS, load_measured_fabric, measure_local_spec

    monkeypatch.setattr(localhw, "adam_seconds_per_param", lambda **kw: 1e-9)
    monkeypatch.setattr(localhw, "gemm_flops", lambda *a, **kw: 1e11)

    fit = {"all_reduce": (2e9, 1e-3), "all_gather": (1e9, 2e-3), "reduce_scatter": (0.5e9, 3e-3),
           "all_to_all": (0.25e9, 4e-3), "p2p": (4e9, 5e-4)}
    links = {op: [(1.0, 1.0)] for op in OPS} | {"fit": dict(fit)}
    toml = tmp_path / "hw.toml"
    measure_local_spec("cpu-perop-test", links=links, out_file=toml, link_points=False)
    pl, S = place(2, 1, 2), float(1 << 20)

    def check():
        for op in OPS[:-1]:
            B, c = fit[op]
            assert getattr(coll, op)(S, pl, "cpu-perop-test") == pytest.approx(coll.bus_bytes(op, S, 2) / B + c, rel=1e-9)
        assert coll.p2p(S, False, "cpu-perop-test") == pytest.approx(S / fit["p2p"][0] + fit["p2p"][1], rel=1e-9)

    check()
    coll.register_fabric("cpu-perop-test", None)
    assert load_measured_fabric(toml) == ["cpu-perop-test"]
    check()
    # the file given to the CLI (--gpu-file -> hardware.load_gpu_file) carries the per-op fits too
    from primus_launch.projection.hardware.gpus import load_gpu_file

    coll.register_fabric("cpu-perop-test", None)
    assert load_gpu_file(toml) == ["cpu-perop-test"]
    check()
    measure_local_spec("cpu-perop-test", links=False, out_file=tmp_path / "none.toml")
    assert coll.measured_fabric_fields("cpu-perop-test") is None
    # only all-reduce and p2p timed (per_op=False's links): no partial per-op fabric
    partial = {op: links[op] for op in ("all_reduce", "p2p")} | {"fit": {op: fit[op] for op in ("all_reduce", "p2p")}}
    assert measure_local_spec("cpu-perop-test", links=partial, out_file=tmp_path / "p.toml")["fabric"] == {}
    assert coll.measured_fabric_fields("cpu-perop-test") is None



def test_local_spec_prices_two_rank_calls_from_the_measured_points(tmp_path, monkeypatch):
    """With the points (``measure_local_spec``'s default) a 2-rank call is priced from gloo's
    measured times: exactly the point at a measured size, linear in S between two of them (a point
    above the fit's line stays above it: the bend the line cannot follow), the smallest point's
    time below it, and beyond the largest the op's fitted bandwidth on top of the largest point;
    the TOML's ``[collectives.<gpu>.points]`` table re-registers the same; a group of 4 ranks (the
    points were timed with 2) is still priced by the fit."""
    from primus_launch.projection.cost import collectives as coll
    from primus_launch.projection.hardware.placement import place
    from gloo_lab import localhw
    from gloo_lab.localhw import OPS, load_measured_fabric, measure_local_spec

    monkeypatch.setattr(localhw, "adam_seconds_per_param", lambda **kw: 1e-9)
    monkeypatch.setattr(localhw, "gemm_flops", lambda *a, **kw: 1e11)
    sizes = [4096.0, 262144.0, 524288.0, 1048576.0]
    # a bend: the 512 KiB point costs what the 1 MiB one does
    pts = {op: [(sizes[0], 1e-3 * k), (sizes[1], 1.2e-3 * k), (sizes[2], 2.0e-3 * k), (sizes[3], 2.1e-3 * k)]
           for k, op in enumerate(OPS, start=1)}
    fit = {op: localhw.fit_line([(s if op == "p2p" else coll.bus_bytes(op, s, 2), t) for s, t in pts[op]]) for op in OPS}
    toml = tmp_path / "hw.toml"
    measure_local_spec("cpu-points-test", links=dict(pts, fit=fit), out_file=toml)
    pl2, pl4 = place(2, 1, 2), place(4, 1, 4)

    def price(op, S, pl=pl2):
        return coll.p2p(S, False, "cpu-points-test") if op == "p2p" else getattr(coll, op)(S, pl, "cpu-points-test")

    def check():
        for op in OPS:
            for s, t in pts[op]:
                assert price(op, s) == pytest.approx(t, rel=1e-12)
            t1, t2 = pts[op][1][1], pts[op][2][1]
            assert price(op, 393216.0) == pytest.approx((t1 + t2) / 2, rel=1e-12)   # halfway in S
            B, c = fit[op]
            line = (524288.0 if op == "p2p" else coll.bus_bytes(op, 524288.0, 2)) / B + c
            assert price(op, 524288.0) > line   # the bend the fit's line does not follow
            assert price(op, 1024.0) == pytest.approx(pts[op][0][1], rel=1e-12)
            big = 4.0 * sizes[-1]
            extra = (big - sizes[-1]) * (1.0 if op == "p2p" else coll.bus_bytes(op, 1.0, 2)) / B
            assert price(op, big) == pytest.approx(pts[op][-1][1] + extra, rel=1e-9)
        B, c = fit["all_gather"]
        assert price("all_gather", 524288.0, pl4) == pytest.approx(coll.bus_bytes("all_gather", 524288.0, 4) / B + c,
                                                                     rel=1e-9)

    check()
    assert "[collectives.cpu-points-test.points]" in toml.read_text()
    coll.register_fabric("cpu-points-test", None)
    assert load_measured_fabric(toml) == ["cpu-points-test"]
    check()
    coll.register_fabric("cpu-points-test", None)
