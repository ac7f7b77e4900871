"""The baseline of the start-up benchmark: a minimal two-command typer app."""

import typer

app = typer.Typer()


@app.command()
def hello(name: str = "world") -> None:
    """Say hello."""
    print(f"hello {name}")


@app.command()
def bye() -> None:
    """Say bye."""
    print("bye")


if __name__ == "__main__":
    app()
