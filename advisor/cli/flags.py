"""The commands' options, made from `advisor.settings.Options`: each field's `Flag` gives the flag,
its help, its default and its limits, so that the CLI writes none of them again.

``@with_options(command, *order)`` gives a typer command one option per named `Options` field,
placed in ``order`` among the command's own parameters; the command takes them as ``**given`` and
builds its `Options` with `options_of`. Adding a field to `Options` (with the command in its
`Flag`'s ``commands``) and its name to the command's ``order`` is all a new option needs here.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer

from advisor.errors import SettingsError
from advisor.settings import Options, option_fields

F = TypeVar("F", bound=Callable[..., Any])


def option_param(command: str, name: str) -> inspect.Parameter:
    """The typer parameter of `Options` field ``name`` in ``command``: its flag, type, default,
    help and the limits click checks (the least value; the greatest only where the flag says)."""
    f = option_fields()[name]
    flag = f.metadata["flag"]
    if command not in flag.commands:
        raise ValueError(f"the option {name} is not one of the {command} command's")
    default = flag.cli_default.get(command, f.default)
    limits: dict[str, Any] = {}
    if not flag.role_map and flag.lo is not None and not flag.lo_open:
        limits["min"] = flag.lo
    if flag.click_hi:
        limits["max"] = flag.hi
    kind = flag.cli if default is not None or flag.cli is bool else flag.cli | None
    return inspect.Parameter(
        name,
        inspect.Parameter.KEYWORD_ONLY,
        default=default,
        annotation=Annotated[kind, typer.Option(flag.name, help=flag.help_for(command), **limits)],
    )


def with_options(command: str, *order: str) -> Callable[[F], F]:
    """Give a typer command (whose own parameters end in ``**given``) the `Options` fields named in
    ``order``, in that order among its own parameters (every one of which ``order`` names)."""

    def wrap(fn: F) -> F:
        own = {
            p.name: p
            for p in inspect.signature(fn, eval_str=True).parameters.values()
            if p.kind is not inspect.Parameter.VAR_KEYWORD
        }
        if not set(own) <= set(order):
            raise ValueError(f"{command}: order leaves out {', '.join(sorted(set(own) - set(order)))}")
        params = [
            own[n].replace(kind=inspect.Parameter.KEYWORD_ONLY) if n in own else option_param(command, n) for n in order
        ]
        fn.__signature__ = inspect.Signature(params)  # what typer reads the command's options from
        return fn

    return wrap


def options_of(given: dict[str, Any]) -> Options:
    """The `Options` of a command's ``**given``; on an unusable option, exit 2 with one line naming it."""
    try:
        return Options(**given)
    except SettingsError as e:
        typer.echo(f"dflash-advise: {e}", err=True)
        raise typer.Exit(2) from None
