"""The header's engines, nodes and link fields (docs/log-schema.md)."""

import pytest

from advisor.errors import LogError
from advisor.ingest.schema import default_placement, parse_header

BASE = {"ev": "run", "t": 0.0, "roles": {"target": 6, "drafter": 4}}


def test_gpus_count_engines():
    h = parse_header({**BASE, "gpus_per_worker": {"target": 2}}, "x", 1)
    assert h.gpus == 16 and h.k("target") == 2 and h.k("drafter") == 1


def test_packed_default_placement():
    h = parse_header({**BASE, "gpus_per_worker": {"target": 2}, "gpus_per_node": 8}, "x", 1)
    assert h.node_of("target") == (0, 0, 0, 0, 1, 1) and h.node_of("drafter") == (1, 1, 1, 1)
    assert default_placement({"target": 3, "drafter": 3}, {"target": 3}, 8) == {
        "target": (0, 0, 1),
        "drafter": (1, 1, 1),
    }


@pytest.mark.parametrize(
    "extra, field",
    [
        ({"gpus_per_worker": {"targets": 2}}, "gpus_per_worker"),
        ({"gpus_per_worker": {"target": 0}}, "gpus_per_worker"),
        ({"gpus_per_worker": {"target": 2}, "gpus": 12}, "gpus"),
        ({"gpus_per_worker": {"target": 4}, "gpus_per_node": 2}, "gpus_per_node"),
        ({"gpus_per_node": 8, "placement": {"target": [0, 0, 0, 0, 0, 0], "drafter": [0, 0, 0, 1]}}, "placement"),
        ({"gpus_per_node": 5, "placement": {"target": [0, 1]}}, "placement"),
        ({"link_bytes_s": 0}, "link_bytes_s"),
        ({"cores": 0}, "cores"),
        ({"cores": 2.5}, "cores"),
        ({"cores": "2"}, "cores"),
        ({"physical_gpus": -1}, "physical_gpus"),
        ({"device": 3}, "device"),
    ],
)
def test_bad_fields_name_the_field(extra, field):
    with pytest.raises(LogError) as e:
        parse_header({**BASE, **extra}, "x", 1)
    assert e.value.field == field


def test_cores_is_kept_with_the_device_fields():
    h = parse_header({**BASE, "device": "cpu", "cores": 4}, "x", 1)
    assert h.extra["cores"] == 4 and h.extra["device"] == "cpu"
