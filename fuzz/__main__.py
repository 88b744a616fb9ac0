"""Run one fuzz target under atheris (coverage-guided, libFuzzer): ``python3 -m fuzz TARGET [libFuzzer args]``.

The advisor's modules are imported inside ``atheris.instrument_imports`` so that their lines
count as coverage (pandas, numpy and polars are not instrumented: the advisor's own branches are
what is explored). The per-input time and memory bounds are libFuzzer's ``-timeout`` and
``-rss_limit_mb`` (`benchmarks/fuzz.py` passes them from `fuzz.targets`). atheris is the
optional extra ``fuzz`` (pyproject.toml); CI replays the corpus without it (tests/fuzz).
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

import atheris


def _import_all() -> None:
    with atheris.instrument_imports(include=["advisor", "fuzz"]):
        import advisor

        for m in pkgutil.walk_packages(advisor.__path__, "advisor."):
            if m.name.endswith("__main__"):
                continue
            importlib.import_module(m.name)
        importlib.import_module("fuzz.targets")


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        sys.exit("usage: python3 -m fuzz TARGET [libFuzzer options] [CORPUS_DIR...]")
    name = sys.argv.pop(1)
    _import_all()
    from fuzz.targets import TARGETS

    if name not in TARGETS:
        sys.exit(f"unknown target {name!r}; one of {', '.join(TARGETS)}")
    atheris.Setup(sys.argv, TARGETS[name])
    atheris.Fuzz()


if __name__ == "__main__":
    main()
