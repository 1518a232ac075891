"""The certificate names what puts the recipe's own plan outside the tuner's space (user14: "the recipe's own
plan, outside the space" gave no reason).  Truth: a candidate of the space itself, one structural field moved to
a value no candidate has -- the nearest candidate differs in that field alone, and the reason names exactly that field in
the plan's own spelling."""

from __future__ import annotations

from tuner_helpers import small_dense_plan

from primus_launch.tuner.certified_run import _outside_settings
from primus_launch.tuner.space import Space, SpaceConfig


def test_nearest_candidate_and_the_named_setting():
    plan = small_dense_plan()
    sp = Space(plan, SpaceConfig.restricted())
    k = sp[len(sp) // 2]
    assert sp.nearest(k) is None                      # a candidate is not outside
    odd = k._replace(mbs=12345)                       # no candidate has this micro-batch
    near = sp.nearest(odd)
    assert sp.index(odd) is None and sp.index(near) is not None
    assert [f for f in odd._fields if getattr(near, f) != getattr(odd, f)] == ["mbs"]
    assert _outside_settings(plan, sp, odd) == "training.micro_batch_size=12345"
