"""`python -m advisor` is `dflash-advise`."""
from advisor.cli.app import script

if __name__ == "__main__":   # (a worker process of `advisor.ingest.parallel` imports this module again)
    script()
