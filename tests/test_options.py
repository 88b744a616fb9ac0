"""Options: one record, validated by itself, whose flags, defaults and limits the CLI reads."""

from __future__ import annotations

import math
import typing
from collections.abc import Mapping
from dataclasses import fields, replace

import pytest
import typer
import typer.main
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from typer.testing import CliRunner

import advisor.cli.app as app_module
import advisor.cli.follow as follow_module
from advisor.cli.app import app
from advisor.errors import SettingsError
from advisor.settings import (
    DEFAULT_HS_CAP,
    DEFAULT_RESTART_COST_H,
    MAX_GPUS,
    MAX_QUEUE_CAP,
    METRICS,
    Options,
    option_fields,
    option_kind,
    parse_role_values,
)

FLAGS = {name: f.metadata["flag"] for name, f in option_fields().items()}
COMMANDS = typer.main.get_command(app).commands
# command -> its options of Options fields (click's parameters, as typer made them)
OPTION_PARAMS = {cmd: {p.name: p for p in c.params if p.name in FLAGS} for cmd, c in COMMANDS.items()}
ADVISE_FIELDS = list(OPTION_PARAMS["advise"])


# ---------------------------------------------------------------- validation names the option


@pytest.mark.parametrize(
    "name, value",
    [
        ("gpus", 1),
        ("gpus", MAX_GPUS + 1),
        ("gpus", True),
        ("gpus", 8.0),
        ("hs_cap", -1),
        ("hs_cap", MAX_QUEUE_CAP + 1),
        ("token_budget", 0),
        ("restart_cost_h", -1.0),
        ("restart_cost_h", math.inf),
        ("restart_cost_h", math.nan),
        ("restart_cost_h", "1"),
        ("next_run", 1),
        ("exact", "yes"),
        ("interval_s", 0.0),
        ("max_wait_s", -1.0),
        ("gpus_per_worker", "target=0"),
        ("gpus_per_worker", "target"),
        ("gpus_per_worker", {"target": 2.5}),
        ("engine_scaling", "target=9"),
        ("engine_scaling", "target=x"),
        ("gpus_per_node", 0),
        ("link_gbytes_s", 0.0),
        ("link_gbytes_s", 1e9),
        ("min_efficiency", 1.5),
        ("metric", "speed"),
        ("metric", 3),
        ("tokens_per_batch", 0.5),
        ("scv", -0.1),
        ("scv", math.inf),
        ("sync_every", -1),
        ("sync_s", -1.0),
        ("roles", "target=6,target=2"),
        ("roles", "target=6;drafter=2"),
        ("roles", {"target": 0}),
        ("roles", {"target": MAX_GPUS, "drafter": 1}),
        ("roles", 8),
        ("hardware_priors", 0),
        ("restart_cost_h", None),
        ("next_run", None),
        ("interval_s", None),
        ("sync_every", None),
    ],
)
def test_a_bad_value_is_refused_naming_its_flag(name, value):
    with pytest.raises(SettingsError) as e:
        Options(**{name: value})
    assert e.value.option.split()[0] == FLAGS[name].name, str(e.value)
    assert str(e.value).startswith(FLAGS[name].name)


def test_an_unknown_option_is_refused():
    with pytest.raises(TypeError, match="min_effciency"):
        Options(min_effciency=0.9)


def test_options_are_keyword_only_and_frozen():
    with pytest.raises(TypeError):
        Options(8)  # type: ignore[misc]
    o = Options(gpus=8)
    with pytest.raises(AttributeError):
        o.gpus = 16  # type: ignore[misc]


def test_every_field_has_a_flag_and_every_command_option_is_a_fields():
    assert all(flag.name.startswith("--") for name, flag in FLAGS.items() if name != "hardware_priors")
    assert {n for params in OPTION_PARAMS.values() for n in params} == set(FLAGS) - {"hardware_priors"}
    for cmd, params in OPTION_PARAMS.items():
        for name, p in params.items():
            assert p.opts == [FLAGS[name].name], (cmd, name)


def test_no_command_signature_is_rewritten():
    """typer reads each command's options from the command's own signature: Annotated types made
    from the Options fields (advisor.cli.app.opt), none written in through ``__signature__``."""
    assert len(app.registered_commands) == 6
    for c in app.registered_commands:
        assert "__signature__" not in vars(c.callback) and not hasattr(c.callback, "__wrapped__"), c.name


# ---------------------------------------------------------------- role maps: one reader


def test_role_values_read_text_and_mappings_alike():
    assert parse_role_values("--x", "target=6, drafter=2") == {"target": 6, "drafter": 2}
    assert parse_role_values("--x", {"target": 6, "drafter": 2}) == {"target": 6, "drafter": 2}
    assert parse_role_values("--x", "target=0.9", whole=False, lo=0.05, hi=2.0) == {"target": 0.9}
    assert list(parse_role_values("--x", "drafter=1,target=7")) == ["drafter", "target"]  # the order given
    assert Options(roles="target=6,drafter=2") == Options(roles={"target": 6, "drafter": 2})


@pytest.mark.parametrize(
    "text, words",
    [
        ("target", ["expected role=value pairs"]),
        ("=3", ["expected role=value pairs"]),
        ("target=6,", ["expected role=value pairs"]),
        ("target=6,target=2", ["'target' is given twice"]),
        ("target=six", ["'target=six'", "not a whole number"]),
        ("target=0", ["--x target:", "at least 1"]),
    ],
)
def test_role_values_say_what_is_wrong(text, words):
    with pytest.raises(SettingsError) as e:
        parse_role_values("--x", text, lo=1, hi=MAX_GPUS)
    for w in words:
        assert w in str(e.value)


# ---------------------------------------------------------------- defaults in one place


def _help(cmd):
    r = CliRunner().invoke(app, [cmd, "--help"])
    assert r.exit_code == 0
    return " ".join(r.stdout.split())


def test_the_cli_help_shows_the_options_defaults():
    """The help of each command shows the Options default (or the command's own, from the Flag)."""
    assert Options().restart_cost_h == DEFAULT_RESTART_COST_H
    text = _help("advise")
    assert f"[default: {Options().restart_cost_h}; x>=0.0]" in text
    assert f"[default: {Options().interval_s}; x>={FLAGS['interval_s'].lo}]" in text
    text = _help("what-if")
    assert f"q_hs depth (batches). [default: {DEFAULT_HS_CAP}; x>=0]" in text
    assert f"[default: {Options().tokens_per_batch}; x>=1.0]" in text
    for cmd, params in OPTION_PARAMS.items():
        text = _help(cmd)
        for name, p in params.items():
            assert FLAGS[name].name in text and " ".join(p.help.split()) in text, (cmd, name)
            if p.help != FLAGS[name].help:  # a command's own help: what-if's, plot's, import-tb's
                assert (cmd, name) in {
                    ("what-if", "hs_cap"),
                    ("what-if", "gpus_per_node"),
                    ("what-if", "link_gbytes_s"),
                    ("plot", "min_efficiency"),
                    ("import-tb", "gpus"),
                }, (cmd, name)


# ---------------------------------------------------------------- round trips (hypothesis)


def _values(name):
    """Valid values of one field, from its Flag's limits."""
    flag, kind = FLAGS[name], option_kind(name)
    default = option_fields()[name].default
    if typing.get_origin(kind) is Mapping:
        whole = typing.get_args(kind)[1] is int
        v = st.integers(int(flag.lo), min(int(flag.hi), 1000)) if whole else st.floats(flag.lo, flag.hi)
        s = st.dictionaries(st.sampled_from(["target", "drafter", "verifier"]), v, min_size=1, max_size=3)
    elif kind is bool:
        s = st.booleans()
    elif kind is str:
        s = st.sampled_from(METRICS)
    elif kind is int:
        lo = int(flag.lo or 0)
        s = st.integers(lo, int(flag.hi) if flag.hi is not None else lo + 10**9)
    else:
        s = st.floats(flag.lo, flag.hi if flag.hi is not None else 1e12, exclude_min=flag.lo_open)
    return st.one_of(st.none(), s) if default is None else s


def _options(names):
    return st.fixed_dictionaries({}, optional={n: _values(n) for n in names}).map(lambda kw: Options(**kw))


@hsettings(max_examples=150, deadline=None)
@given(_options(list(FLAGS)))
def test_any_valid_options_round_trip(o):
    assert Options(**{f.name: getattr(o, f.name) for f in fields(Options)}) == o
    assert Options(**o.given()) == o and Options.of(None, **o.given()) == o
    assert Options().over(o) == o and o.over(Options()) == o
    for name in ("roles", "gpus_per_worker", "engine_scaling"):
        m = getattr(o, name)
        if m:
            assert Options(**{name: ",".join(f"{k}={v!r}" for k, v in m.items())}) == Options(**{name: m})


def _argv(o):
    argv = []
    for name in ADVISE_FIELDS:
        v = getattr(o, name)
        if v is None or v is False:
            continue
        flag = FLAGS[name].name
        if v is True:
            argv.append(flag)
        elif isinstance(v, dict):
            argv += [flag, ",".join(f"{k}={x!r}" for k, x in v.items())]
        else:
            argv += [flag, repr(v)]
    return argv


@hsettings(max_examples=60, deadline=None)
@given(_options(ADVISE_FIELDS), st.booleans())
def test_the_command_line_builds_the_same_options(o, follow):
    """`dflash-advise LOG <flags of o>` hands the library exactly ``o`` (with --follow, to the
    follower; without it, the options only --follow reads are refused: test_app.py)."""
    if not follow:
        o = replace(o, **{name: option_fields()[name].default for name in app_module.FOLLOW_ONLY})
    seen = []

    def capture(logs, options, **kw):
        seen.append(options)
        return 0

    def advise(logs, options):
        capture(logs, options)
        raise typer.Exit(0)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(app_module, "_advise_or_die", advise)
        mp.setattr(follow_module, "follow_logs", capture)
        r = CliRunner().invoke(app, ["advise", "LOG", *_argv(o), *(["--follow"] if follow else [])])
    assert r.exit_code == 0, r.output
    assert seen == [o]


def test_a_bad_option_on_the_command_line_is_exit_2_naming_it(tmp_path):
    r = CliRunner().invoke(app, ["advise", str(tmp_path / "never.jsonl"), "--roles", "target=6,,drafter=2"])
    assert r.exit_code == 2 and r.stderr.startswith("dflash-advise: --roles: expected role=value pairs")
