"""The service layer: one module per resource, plain functions over a sqlite3 connection.

Each public function takes the connection (and the workspace id where the resource is
workspace-scoped), checks its input, does its work in one transaction and returns exactly
the value the API puts in `data`. Both faces (marketing_cli/cli, marketing_cli/api) call
these functions and nothing else; no module here imports typer or Starlette.
"""

# The service modules that register job handlers (`@jobs.handler`) and schedulers. The
# faces that run jobs (`mkt jobs run`, serve's worker) load them with load_job_handlers();
# marketing_cli/jobs/ itself names no service. A new resource with jobs adds one line.
JOB_MODULES: tuple[str, ...] = (
    "marketing_cli.services.contacts.segments",
    "marketing_cli.services.email.variant_html",
    "marketing_cli.services.delivery.sender",
    "marketing_cli.services.delivery.ab_winner",
    "marketing_cli.services.email.occurrences",
    "marketing_cli.services.sms.expansion",
    "marketing_cli.services.sms.confirmation",
    "marketing_cli.services.automations.runner",
    "marketing_cli.services.automations.webhooks",
)


def load_job_handlers() -> None:
    """Import every service module that registers job handlers (and the env plugins)."""
    from marketing_cli import jobs

    jobs.load_modules(JOB_MODULES)
    jobs.load_handlers()
