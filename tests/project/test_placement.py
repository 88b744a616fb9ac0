from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from advisor.project.placement import Nodes, best_placement, node_mixes, packed, placements


def test_node_mixes_fill_the_node():
    assert node_mixes(8, 2, 1) == [(4, 0), (3, 2), (2, 4), (1, 6), (0, 8)]


def test_placements_are_full_and_unique():
    out = placements(6, 4, 2, 8, 2, 1)
    assert {(p.producers, p.consumers) for p in out} == {((4, 2), (0, 4)), ((3, 3), (2, 2))}


def test_spread_beats_packed_when_the_link_binds():
    best = best_placement(6, 4, Nodes(2, 8, (2, 1)), consumer_s=0.1, xfer_s=0.5, scv_x=0.0)
    assert best.producers == (3, 3)


def test_free_link_ties_go_to_fewer_crossings():
    best = best_placement(6, 4, Nodes(2, 8, (2, 1)), consumer_s=0.1, xfer_s=0.0, scv_x=0.0)
    assert best.producers == (3, 3)  # half the batches cross, against two thirds packed
    assert packed(6, 4, 2, 8, 2, 1).producers == (4, 2)


@hsettings(max_examples=50, deadline=None)
@given(
    st.sampled_from([1, 2, 4]), st.sampled_from([1, 2]), st.sampled_from([4, 8]), st.integers(2, 4), st.integers(1, 40)
)
def test_every_placement_fills_every_node(kp, kc, gpn, nodes, n):
    g = gpn * nodes
    m, rest = divmod(g - n * kp, kc)
    if n * kp >= g or rest or m < 1 or max(kp, kc) > gpn:
        return
    for pl in placements(n, m, nodes, gpn, kp, kc):
        assert sum(pl.producers) == n and sum(pl.consumers) == m
        assert all(a * kp + b * kc == gpn for a, b in zip(pl.producers, pl.consumers))


def test_a_costly_sync_keeps_the_drafters_on_one_node():
    from advisor.model.params import SyncFit

    spread = best_placement(12, 4, Nodes(2, 8, (1, 1)), consumer_s=1.0, xfer_s=0.0, scv_x=0.0)
    assert spread.consumers == (2, 2)  # a free link: fewer crossings
    sync = SyncFit(sync_every=1, bytes_per_sync=1e9)
    one = best_placement(12, 4, Nodes(2, 8, (1, 1)), consumer_s=1.0, xfer_s=0.0, scv_x=0.0, sync=sync, link_bytes_s=1e8)
    assert sorted(one.consumers) == [0, 4]  # 20 s of sync a step outweighs the crossings
