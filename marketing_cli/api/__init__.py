"""The HTTP face: a Starlette app (`create_app`) with one routes module per resource."""
