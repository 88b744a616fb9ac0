"""The commands' options made from `advisor.settings.Options` by typer's own means.

``gpus: opt("gpus") = None`` gives a command the option of an `Options` field: ``opt`` is an
``Annotated`` type whose ``typer.Option`` carries the field's flag, help and the limits click
checks, and `options_of` builds the `Options` from the parameters named after its fields.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import Annotated, Any

import typer

from advisor.errors import SettingsError
from advisor.settings import Options, option_fields, option_kind


def opt(name: str, **over: Any) -> Any:
    """The type of the command-line option of `Options` field ``name``; ``over`` replaces what
    the field's `advisor.settings.Flag` says (a command's own ``help``)."""
    f = option_fields()[name]
    flag, kind = f.metadata["flag"], option_kind(name)
    limits: dict[str, Any] = {}
    if typing.get_origin(kind) is Mapping:
        kind = str  # role=value text
    elif flag.lo is not None and not flag.lo_open:
        limits["min"] = flag.lo
    if flag.click_hi:
        limits["max"] = flag.hi
    if f.default is None:
        kind = kind | None
    return Annotated[kind, typer.Option(flag.name, **{"help": flag.help, **limits, **over})]


def options_of(params: Mapping[str, Any]) -> Options:
    """The `Options` of a command's parameters (those named after its fields); on an unusable
    option, exit 2 with one line naming it."""
    try:
        return Options(**{name: v for name, v in params.items() if name in option_fields()})
    except SettingsError as e:
        typer.echo(f"dflash-advise: {e}", err=True)
        raise typer.Exit(2) from None
