"""The log contract's field tables (advisor.ingest.schema): unknown fields and their nearest known names."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from advisor.ingest.schema import EVENT_FIELDS, nearest_field, unknown_fields


def test_unknown_fields_of_known_events_only():
    assert unknown_fields({"ev": "step", "t": 1, "blokced": 0.1, "busy": 1}) == ["blokced"]
    assert unknown_fields({"ev": "heartbeat", "x": 1}) == []  # an unknown event is counted as such
    assert unknown_fields({"ev": "run", "t": 0, "device": "cpu", "physical_gpus": 2, "notes": "x"}) == ["notes"]
    assert unknown_fields([1, 2]) == [] and unknown_fields({"t": 1}) == []


def test_nearest_field_finds_misspellings_not_own_fields():
    assert nearest_field("step", "blokced") == "blocked"
    assert nearest_field("step", "bussy") == "busy"
    assert nearest_field("run", "gpu") == "gpus"
    for own in ("mem", "lr", "barrier", "grad_norm", "peak_mem"):  # xfer is a schema field (docs/log-schema.md)
        assert nearest_field("step", own) is None


@given(ev=st.sampled_from(sorted(EVENT_FIELDS)), data=st.data())
def test_a_known_field_is_its_own_nearest(ev, data):
    name = data.draw(st.sampled_from(EVENT_FIELDS[ev]))
    assert nearest_field(ev, name) == name
    assert unknown_fields({"ev": ev, name: 1}) == []


def test_cap_bps_kind_names_header_roles_and_known_kinds():
    """The header's cap_bps_kind (docs/log-schema.md): role -> lower | upper; anything else is
    refused naming the field."""
    import pytest

    from advisor.errors import LogError
    from advisor.ingest.schema import parse_header

    head = {"ev": "run", "v": 1, "t": 0.0, "roles": {"target": 1, "drafter": 3}}
    ok = parse_header({**head, "cap_bps_kind": {"target": "upper", "drafter": "lower"}}, "x.jsonl", 1)
    assert ok.extra["cap_bps_kind"] == {"target": "upper", "drafter": "lower"}
    assert unknown_fields({**head, "cap_bps_kind": {}}) == []
    for bad, words in (({"loader": "upper"}, "not a role"), ({"target": "exact"}, "lower, upper"), ("upper", "object")):
        with pytest.raises(LogError) as e:
            parse_header({**head, "cap_bps_kind": bad}, "x.jsonl", 1)
        assert "cap_bps_kind" in str(e.value) and words in str(e.value)


def test_the_header_unit_is_a_printable_name():
    """The header's unit (docs/log-schema.md): what one batch counts, named in a caveat; a known
    field, a non-empty printable string, refused otherwise naming the field."""
    import pytest

    from advisor.errors import LogError
    from advisor.ingest.schema import parse_header

    head = {"ev": "run", "v": 1, "t": 0.0, "roles": {"target": 1, "drafter": 3}}
    assert parse_header({**head, "unit": "sample"}, "x.jsonl", 1).extra["unit"] == "sample"
    assert unknown_fields({**head, "unit": "sample"}) == []
    for bad in ("", 5, "x" * 201):
        with pytest.raises(LogError) as e:
            parse_header({**head, "unit": bad}, "x.jsonl", 1)
        assert "unit" in str(e.value)
