import math

from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from advisor.model.link import Placement, link_pool, pool_mva


def test_free_link_gives_drafters_own_rate():
    pl = Placement(producers=(4, 2), consumers=(0, 4))
    r = link_pool(pl, consumer_s=0.5, xfer_s=0.0)
    assert math.isclose(r.consumer_cap_bps, 8.0)
    assert math.isinf(r.link_cap_bps)


def test_saturated_link_caps_the_pool():
    # 4 drafters on node 1, all 4 targets on node 0: every batch crosses the link of 1 s
    pl = Placement(producers=(4, 0), consumers=(0, 4))
    r = link_pool(pl, consumer_s=0.01, xfer_s=1.0)
    assert 0.95 < r.consumer_cap_bps <= 1.0 + 1e-9
    assert math.isclose(r.link_cap_bps, 1.0)
    assert math.isclose(r.crossing_share, 1.0)


def test_one_drafter_is_its_cycle():
    # one drafter, half its batches cross: 1 / (2 + 0.5 x 1)
    assert math.isclose(pool_mva((0, 1), 2.0, (0.0, 0.5), 1.0, 0.0)[1], 1 / 2.5)


def test_exact_and_schweitzer_agree_roughly(monkeypatch):
    import advisor.model.link as link

    pop, visits = (3, 3), (0.5, 0.5)
    exact = sum(pool_mva(pop, 1.0, visits, 0.3, 0.0))
    monkeypatch.setattr(link, "EXACT_MVA_STATES", 1)
    approx = sum(pool_mva(pop, 1.0, visits, 0.3, 0.0))
    assert abs(approx / exact - 1) < 0.05


def test_describe():
    pl = Placement(producers=(4, 2), consumers=(0, 4))
    assert pl.describe("target", "drafter") == "node 0: 4 targets; node 1: 2 targets + 4 drafters"


@hsettings(max_examples=60, deadline=None)
@given(st.integers(1, 6), st.integers(0, 6), st.integers(0, 6), st.floats(0.05, 2.0), st.floats(0.0, 2.0))
def test_pool_below_both_bounds(n0, n1, m1, s, x):
    pl = Placement(producers=(n0, n1), consumers=(1, m1))
    r = link_pool(pl, consumer_s=s, xfer_s=x)
    assert r.consumer_cap_bps <= (1 + m1) / s * (1 + 1e-9)  # never faster than compute alone
    assert math.isinf(r.link_cap_bps) or r.consumer_cap_bps <= r.link_cap_bps * (1 + 1e-6)


def test_node_local_routing_needs_both_roles_on_every_node():
    import pytest

    local = Placement(producers=(7, 7), consumers=(1, 1), routing="local")
    assert local.crossing_share() == 0.0 and local.uniform()
    assert local.describe("target", "drafter") == (
        "node-local: node 0: 7 targets + 1 drafter; node 1: 7 targets + 1 drafter"
    )
    with pytest.raises(ValueError, match="node-local"):
        Placement(producers=(8, 6), consumers=(0, 2), routing="local")
    with pytest.raises(ValueError, match="routing"):
        Placement(producers=(8,), consumers=(0,), routing="ring")


def test_node_local_pool_sends_nothing_over_the_link():
    pool = link_pool(Placement(producers=(7, 7), consumers=(1, 1), routing="local"), 1.0, 5.0)
    assert pool.crossing_share == 0.0 and math.isinf(pool.link_cap_bps)
    assert pool.consumer_cap_bps == 2.0


def test_sync_crosses_the_link_only_between_nodes_of_drafters():
    from advisor.model.link import sync_link_s

    # a ring over L_c nodes: 2 (L_c - 1) S bytes over the one shared link
    assert sync_link_s(Placement(producers=(7, 7), consumers=(1, 1)), 1e9, 1e9) == 2.0
    assert sync_link_s(Placement(producers=(6, 6, 6), consumers=(2, 2, 2)), 1e9, 2e9) == 2.0
    assert sync_link_s(Placement(producers=(8, 6), consumers=(0, 2)), 1e9, 1e9) == 0.0  # one node of drafters
    assert sync_link_s(Placement(producers=(7, 7), consumers=(1, 1)), None, 1e9) == 0.0  # bytes unknown
    assert sync_link_s(Placement(producers=(7, 7), consumers=(1, 1)), 1e9, None) == 0.0  # free link
