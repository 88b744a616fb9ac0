"""The gate's TOML config: planned split, profile logs, thresholds; loud errors naming the key."""
from __future__ import annotations

import pytest

from advisor.check import run_check
from advisor.schema import LogError


def config(tmp_path, reference, body):
    p = tmp_path / "gate.toml"
    p.write_text(f'profile = ["{reference}"]\n' + body)
    return p


def test_config_plans_another_split(tmp_path, reference):
    p = config(tmp_path, reference, "[roles]\ntarget = 6\ndrafter = 2\n[gate]\nmin_efficiency = 0.4\n")
    adv = run_check([p])
    g = adv.gate
    assert g["roles"] == {"target": 6, "drafter": 2} and g["passed"] and g["threshold"] == 0.4
    assert g["value"] == pytest.approx(0.46, abs=0.02)


def test_config_gpu_util_metric_and_queue(tmp_path, reference):
    p = config(tmp_path, reference, "[queues]\nhs = 2\n[gate]\nmetric = \"gpu_util\"\nmin_gpu_util = 0.95\n")
    adv = run_check([p])
    assert adv.gate["metric"] == "gpu_util" and not adv.gate["passed"]


def test_command_line_overrides_config(tmp_path, reference):
    p = config(tmp_path, reference, "[gate]\nmin_efficiency = 0.99\n")
    assert not run_check([p]).gate["passed"]
    assert run_check([p], min_value=0.5).gate["passed"]


@pytest.mark.parametrize("body,key", [
    ("[roles]\ntarget = 0\ndrafter = 2\n", "roles.target"),
    ("[gate]\nmetric = \"speed\"\n", "gate.metric"),
    ("[gate]\nmin_efficiency = 1.5\n", "gate.min_efficiency"),
    ("gpus = \"eight\"\n", "gpus"),
])
def test_config_errors_name_the_key(tmp_path, reference, body, key):
    with pytest.raises(LogError) as ei:
        run_check([config(tmp_path, reference, body)])
    assert ei.value.field == key and "gate.toml" in str(ei.value)


def test_config_without_profile(tmp_path):
    p = tmp_path / "g.toml"
    p.write_text("[roles]\ntarget = 1\n")
    with pytest.raises(LogError, match="profile"):
        run_check([p])


def test_invalid_toml(tmp_path):
    p = tmp_path / "g.toml"
    p.write_text("profile = [\n")
    with pytest.raises(LogError, match="not valid TOML"):
        run_check([p])
