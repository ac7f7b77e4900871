"""mkt: a self-hosted email and SMS marketing service, run from a terminal or over HTTP."""

__version__ = "0.1.0"
