"""`python -m advisor` is `dflash-advise`."""
from advisor.cli.app import main

main()
