"""cli: the typer app (`dflash-advise`), the CI gate and --follow; parsing and exit codes only."""
