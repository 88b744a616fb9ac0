"""`python -m trainer` runs `dflash-train` (for machines where the package is not installed)."""

from .cli import main

main()
