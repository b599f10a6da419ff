"""Each module here exports `register(root: typer.Typer)` and adds its commands or groups."""
