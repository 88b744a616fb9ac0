"""`python -m advisor` is `dflash-advise`."""
from .cli import main

main()
