"""The terminal face: a typer app (`main.app`) with one module per resource."""
