"""Engines of k GPUs in the settings: feasible splits only, errors naming the option (hypothesis)."""

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from advisor.errors import SettingsError
from advisor.settings import Logged, Options, build_settings, engine_pairs


@hsettings(max_examples=200, deadline=None)
@given(st.integers(2, 256), st.integers(1, 8), st.integers(1, 4))
def test_engine_pairs_fill_g_exactly(g, kp, kc):
    pairs = engine_pairs(g, kp, kc)
    assert all(n * kp + m * kc == g and n >= 1 and m >= 1 for n, m in pairs)
    brute = [(n, m) for n in range(g, 0, -1) for m in range(1, g + 1) if n * kp + m * kc == g]
    assert pairs == brute


def test_tp2_on_8():
    assert engine_pairs(8, 2, 1) == [(3, 2), (2, 4), (1, 6)]


def _build(gpus, log_gpus_per_worker=(1, 1), **kw):
    logged = Logged(
        roles=("target", "drafter"),
        gpus=gpus,
        hs_cap=20,
        tokens_mean=1000.0,
        tokens_range=(900.0, 1100.0),
        gpus_per_worker=log_gpus_per_worker,
    )
    return build_settings(Options(**kw), logged)


def test_indivisible_gpus_name_the_option():
    with pytest.raises(SettingsError) as e:
        _build(gpus=9, log_gpus_per_worker=(2, 2))
    assert e.value.option == "--gpus"


def test_nodes_must_be_whole():
    with pytest.raises(SettingsError) as e:
        _build(gpus=16, gpus_per_node=6)
    assert e.value.option == "--gpus-per-node"


@hsettings(max_examples=100, deadline=None)
@given(st.integers(1, 8), st.integers(1, 8), st.integers(1, 4))
def test_split_gpus_of_every_pair(nodes, per_node_half, kp):
    gpn = 2 * per_node_half * kp
    s = _build(gpus=nodes * gpn, log_gpus_per_worker=(kp, 1), gpus_per_node=gpn)
    assert all(s.split_gpus(n, m) == s.gpus for n, m in s.engine_pairs())
    assert s.nodes == (nodes if nodes > 1 else 1)
