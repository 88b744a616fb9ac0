"""`python -m advisor` is `dflash-advise`."""

from advisor.cli.app import script

if __name__ == "__main__":
    script()
