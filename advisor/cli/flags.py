"""The commands' options, made from `advisor.settings.Options`: each field's `Flag` gives the flag,
its help, its default and its limits, so that the CLI writes none of them again.

``@with_options(command, *order)`` gives a typer command one option per named `Options` field,
placed in ``order`` among the command's own parameters; the command takes them as ``**given`` and
builds its `Options` with `options_of`. Adding a field to `Options` (with the command in its
`Flag`'s ``commands``) and its name to the command's ``order`` is all a new option needs here.
A command with many options of its own may group them in a frozen record (``record=``).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer

from advisor.errors import SettingsError
from advisor.settings import Options, option_fields

F = TypeVar("F", bound=Callable[..., Any])


def option_param(command: str, name: str) -> inspect.Parameter:
    """The typer parameter of `Options` field ``name`` in ``command``: its flag, type, default,
    help and the limits click checks (the least value; the greatest only where the flag says).
    """
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


def with_options(command: str, *order: str, record: type | None = None) -> Callable[[F], F]:
    """Give a typer command (whose own parameters end in ``**given``) the `Options` fields named in
    ``order``.
    """

    def wrap(fn: F) -> F:
        own = {
            p.name: p
            for p in inspect.signature(fn, eval_str=True).parameters.values()
            if p.kind is not inspect.Parameter.VAR_KEYWORD
        }
        into = next((n for n, p in own.items() if record is not None and p.annotation is record), None)
        grouped = dict(inspect.signature(record, eval_str=True).parameters) if into is not None else {}
        own.pop(into, None)
        if not set(own) <= set(order):
            raise ValueError(f"{command}: order leaves out {', '.join(sorted(set(own) - set(order)))}")
        mine = own | grouped
        params = [
            mine[n].replace(kind=inspect.Parameter.KEYWORD_ONLY) if n in mine else option_param(command, n)
            for n in order
        ]
        if into is None:
            fn.__signature__ = inspect.Signature(params)  # what typer reads the command's options from
            return fn

        @functools.wraps(fn)
        def call(**given: Any) -> Any:
            return fn(**{into: record(**{n: given.pop(n) for n in grouped})}, **given)

        call.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        return call  # type: ignore[return-value]

    return wrap


def options_of(given: dict[str, Any]) -> Options:
    """The `Options` of a command's ``**given``; on an unusable option, exit 2 with one line naming it."""
    try:
        return Options(**given)
    except SettingsError as e:
        typer.echo(f"dflash-advise: {e}", err=True)
        raise typer.Exit(2) from None
