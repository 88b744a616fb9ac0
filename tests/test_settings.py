"""Settings: validated once, errors name the option."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given as _given
from hypothesis import strategies as _st

from advisor.errors import SettingsError
from advisor.settings import MAX_GPUS, Capacity, Logged, Options, as_capacity, build_settings, check_roles

LOGGED = Logged(
    roles=("target", "drafter"),
    gpus=8,
    hs_cap=20,
    tokens_mean=30000.0,
    tokens_range=(28000.0, 32000.0),
    token_budget=32768,
)


def make(logged: Logged = LOGGED, **kw):
    return build_settings(Options(**kw), logged)


def test_defaults_come_from_the_log():
    s = make()
    assert s.hs_cap == 20 and s.tokens_per_batch == 30000.0 and s.own_budget and not s.for_next_run


def test_token_budget_keeps_the_fill_and_flags_extrapolation():
    s = make(token_budget=16384)
    assert s.tokens_per_batch == pytest.approx(16384 * 30000 / 32768)
    assert s.extrapolated_tokens
    assert not make(token_budget=32000).extrapolated_tokens


def test_token_budget_needs_a_batch_size_from_the_log():
    """No tokens measured and no logged budget: a batch's size is unknown, so a budget what-if is
    refused; with a logged budget the nominal batch is that budget, filled as logged."""
    unknown = replace(LOGGED, tokens_mean=1.0, tokens_range=(1.0, 1.0), token_budget=None, tokens_measured=False)
    with pytest.raises(SettingsError) as e:
        make(unknown, token_budget=8192)
    assert str(e.value).startswith("--token-budget:") and "no tokens" in str(e.value)
    nominal = replace(LOGGED, tokens_mean=32768.0, tokens_range=(32768.0, 32768.0), tokens_measured=False)
    s = make(nominal, token_budget=8192)
    assert s.tokens_per_batch == 8192 and not s.logged.tokens_measured
    assert make(unknown).own_budget


@pytest.mark.parametrize(
    "kw, option",
    [
        (dict(gpus=1), "--gpus"),
        (dict(gpus=MAX_GPUS + 1), "--gpus"),
        (dict(gpus=True), "--gpus"),
        (dict(hs_cap=-1), "--hs-cap"),
        (dict(token_budget=0), "--token-budget"),
        (dict(restart_cost_h=float("inf")), "--restart-cost"),
        (dict(restart_cost_h=-1.0), "--restart-cost"),
        (dict(roles={"target": 6, "drafter": 3}), "--roles"),
        (dict(roles={"target": 8}), "--roles drafter"),
        (dict(roles={"target": 7, "drafter": 0}), "--roles drafter"),
    ],
)
def test_bad_options_name_the_option(kw, option):
    with pytest.raises(SettingsError) as e:
        make(**kw)
    assert str(e.value).startswith(option + ":")


def test_roles_are_checked_against_the_log_roles_and_g():
    assert check_roles({"drafter": 2, "target": 6}, "target", "drafter", 8) == {"target": 6, "drafter": 2}
    with pytest.raises(SettingsError, match="^--roles verifier: is not a role of the log"):
        check_roles({"target": 6, "verifier": 2}, "target", "drafter", 8)


def test_next_run_from_the_flag_or_an_ended_log():
    ended = replace(LOGGED, run_ended=True)
    assert make(next_run=True).for_next_run and make(ended).for_next_run
    assert make(ended).to_json()["run_ended"] is True


def test_one_limit_for_queue_caps_and_gpus_the_logs_and_the_options():
    from advisor.records import WORKERS, Queue
    from advisor.settings import MAX_QUEUE_CAP

    assert Queue.SPECS["cap"].maximum == MAX_QUEUE_CAP and WORKERS.maximum == MAX_GPUS
    assert make(hs_cap=MAX_QUEUE_CAP).hs_cap == MAX_QUEUE_CAP
    with pytest.raises(SettingsError, match="^--hs-cap:"):
        make(hs_cap=MAX_QUEUE_CAP + 1)


@pytest.mark.parametrize(
    "kw, option",
    [
        (dict(gpus=MAX_GPUS + 1), "--gpus"),
        (dict(roles={"a": MAX_GPUS, "b": 1}), "--roles"),
        (dict(hs_cap=10_001), "--hs-cap"),
        (dict(sync_every=(1 << 53) + 1), "--sync-every"),
    ],
)
def test_limits_name_the_option(kw, option):
    """Options past the limits nobody can mean fail when the options are made, before any log is read."""
    with pytest.raises(SettingsError) as e:
        Options(**kw)
    assert str(e.value).startswith(option + ": ") and "more than the limit" in str(e.value)
    Options(gpus=MAX_GPUS, roles={"a": MAX_GPUS - 1, "b": 1}, hs_cap=10_000, sync_every=1 << 53)


def test_worker_counts_are_limited_each_and_together():
    from advisor.settings import check_counts

    with pytest.raises(SettingsError, match="^--targets: .* more than the limit"):
        check_counts({"--targets": MAX_GPUS + 1, "--drafters": 1})
    with pytest.raises(SettingsError, match=r"^--targets \+ --drafters: the split uses"):
        check_counts({"--targets": MAX_GPUS, "--drafters": 1})
    check_counts({"--targets": MAX_GPUS - 1, "--drafters": 1})


# ---------------------------------------------------------------- capacities: value, range, bound


def test_a_capacity_is_a_value_a_range_or_a_lower_bound():
    assert as_capacity("--target-bps", "0.92").kind == "value"
    r = as_capacity("--target-bps", "0.88..0.95")
    assert (r.kind, r.low, r.high) == ("range", 0.88, 0.95) and r.point == pytest.approx(math.sqrt(0.88 * 0.95))
    b = as_capacity("--target-bps", ">=39")
    assert (b.kind, b.low, b.point) == ("bound", 39.0, 39.0) and math.isinf(b.high)
    assert as_capacity("x", (1, 2)).kind == "range" and as_capacity("x", 3).kind == "value"


@pytest.mark.parametrize("text", ["abc", "1..", "..2", ">39", "<=3", "2..1", "0", ">=0", "-1", "nan", "inf", ""])
def test_a_bad_capacity_names_the_option_and_the_forms(text):
    with pytest.raises(SettingsError) as e:
        as_capacity("--drafter-bps", text)
    msg = str(e.value)
    assert msg.startswith("--drafter-bps") and ("0.88..0.95" in msg or "upper end" in msg)


@_given(lo=_st.floats(1e-3, 1e6), f=_st.floats(1.0, 10.0), kind=_st.sampled_from(["value", "range", "bound"]))
def test_a_capacity_reads_back_from_its_own_text(lo, f, kind):
    c = Capacity(low=lo, high={"value": lo, "range": lo * f, "bound": float("inf")}[kind])
    back = as_capacity("--target-bps", c.text())
    assert back.kind == c.kind or (kind == "range" and back.kind == "value")
    assert back.low == pytest.approx(c.low, rel=1e-3)


@pytest.mark.parametrize(
    "role, plural, one",
    [
        ("target", "targets", "1 target"),
        ("drafter", "drafters", "1 drafter"),
        ("trainer", "trainers", "1 trainer"),
        ("engine", "engines", "1 engine"),
        ("vllm", "vllm workers", "1 vllm worker"),
        ("sglang", "sglang workers", "1 sglang worker"),
        ("GPU0", "GPU0 workers", "1 GPU0 worker"),
    ],
)
def test_role_names_pluralise_as_nouns_or_as_labels(role, plural, one):
    """Issue 35 item 6: "vllms blocked", "for 1 workers": a role named like a noun takes an "s", any
    other name is a label counted in workers; one worker is singular."""
    from advisor.settings import role_count, role_plural

    assert role_plural(role) == plural and role_count(1, role) == one
    assert role_count(3, role) == f"3 {plural}"
