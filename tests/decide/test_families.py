"""The calibrated families (advisor.decide.families): a run of a shape no family has gets the
uncalibrated draw and says so (issue 51, item 3); a run of a calibrated family keeps the calibration."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from advisor import advise
from advisor.cli.app import main
from advisor.decide.families import CALIBRATED, SOURCE, Shape, domain
from advisor.decide.odds import LEVEL_CORR, STEPS_TEMPERATURE
from advisor.present.text import render

FIX = Path(__file__).resolve().parents[2] / "fixtures"
LOG = FIX / "sweep" / "ded32" / "ded32-4x4-r0.jsonl.gz"  # tiny preset, q_hs 20, q_pre 50, sync 10, 2,048 tokens


def _edited(tmp_path: Path, edit) -> Path:
    """LOG with its header edited by ``edit`` (a function of the header dict), written to tmp_path."""
    lines = gzip.open(LOG, "rt").read().splitlines()
    head = json.loads(lines[0])
    edit(head)
    out = tmp_path / "edited.jsonl"
    out.write_text("\n".join([json.dumps(head), *lines[1:]]) + "\n")
    return out


def _hs_cap(cap: int):
    def edit(head):
        for q in head["queues"]:
            if q["name"] == "hs":
                q["cap"] = cap

    return edit


def test_a_log_of_a_calibrated_family_is_drawn_calibrated_and_names_its_family():
    adv = advise(LOG)
    d = adv.decision
    assert d.domain is not None and d.domain.inside
    assert d.domain.family.name == "tiny-hs20-pre50-sync10-tb2048-tp1-cpu16"
    assert (d.odds.temperature, d.odds.level_corr) == (STEPS_TEMPERATURE, LEVEL_CORR)
    assert f"this run's among them ({d.domain.family.name})" in render(adv)


def test_a_log_outside_every_family_gets_temperature_1_and_says_so(tmp_path):
    log = _edited(tmp_path, _hs_cap(2))
    adv = advise(log)
    d = adv.decision
    assert d.domain is not None and not d.domain.inside and d.domain.differs == ("hs_cap",)
    assert (d.odds.temperature, d.odds.level_corr) == (1.0, 0.0)
    text = render(adv)
    assert "calibrated on real sweeps:" not in text
    assert (
        "not calibrated: this run's shape lies outside every family of real sweeps the odds were calibrated "
        f"on, in {SOURCE} (q_hs 2 batches here; the nearest family, tiny-hs20-pre50-sync10-tb2048-tp1-cpu16, "
        "has q_hs 20 batches), so the spread is drawn as the table states it"
    ) in " ".join(text.split())


def test_the_command_says_so_too(tmp_path, capsys):
    log = _edited(tmp_path, lambda h: h.update(token_budget=1536))
    with pytest.raises(SystemExit) as ex:
        main(["advise", str(log)])
    out = " ".join(capsys.readouterr().out.split())
    assert ex.value.code == 0
    assert "not calibrated: this run's shape lies outside every family" in out
    assert "(a token budget of 1,536 here; the nearest family, " in out and ", has a token budget of 1,024)" in out


def test_a_what_if_shape_is_judged_as_projected(tmp_path):
    # the family is the projected run's: q_hs 2 asked of a q_hs 20 log leaves the families
    adv = advise(LOG, hs_cap=2)
    assert not adv.decision.domain.inside and adv.decision.odds.temperature == 1.0


def test_one_drafter_shows_no_sync_cadence_and_matches_its_family():
    # the trainer writes sync_every 0 for one drafter: the cadence is unknown, not "no sync"
    adv = advise(FIX / "sweep" / "ded16" / "ded16-5x1-r0.jsonl.gz")
    assert adv.decision.domain.shape.sync_every is None and adv.decision.domain.inside
    assert adv.decision.odds.temperature == STEPS_TEMPERATURE


def test_models_are_compared_only_where_the_header_names_them():
    fam = CALIBRATED[0]
    s = fam.shape
    unnamed = Shape(s.hs_cap, s.pre_cap, s.sync_every, s.token_budget, s.gpus_per_worker)
    assert domain(unnamed).inside
    other = Shape(s.hs_cap, s.pre_cap, s.sync_every, s.token_budget, s.gpus_per_worker, "another-target", None)
    dom = domain(other)
    assert not dom.inside and dom.differs == ("target_model",)
    assert not domain(s, []).inside and domain(s, []).nearest is None


def test_a_host_with_dedicated_devices_is_outside_the_host_domain_and_carries_no_family():
    # dedicated devices were never calibrated; the family is not asked (no sentence about it)
    adv = advise(FIX / "reference-7x1.jsonl")
    assert adv.decision.domain is None and adv.decision.odds.temperature == 1.0
    assert "not calibrated" not in render(adv)


def test_a_shared_gpu_of_another_preset_is_outside_every_family():
    # two workers on one H200 share a host's compute (the host domain), but no family has its
    # models or its 32K tokens: it was drawn calibrated before the families, and is not now
    adv = advise(FIX / "h200-1x1.jsonl")
    d = adv.decision
    assert d.domain is not None and not d.domain.inside and d.odds.temperature == 1.0
    assert set(d.domain.differs) >= {"token_budget", "target_model", "drafter_model"}
