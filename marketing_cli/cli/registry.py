"""The resource sub-apps of `mkt`: module, command name and one-line help.

The root `--help` lists them from this table without importing them, and each module takes
its help from here, so there is one copy of each line (cli/main.py, output.MktGroup).
"""

SUBCOMMANDS: list[tuple[str, str, str]] = [
    ("keys", "keys", "Create, list and revoke API keys."),
    ("workspace", "workspace", "Show and update the workspace and its settings."),
    ("billing", "billing", "Plans, allowances, add-ons and usage."),
    ("rates", "rates", "The SMS price list per country and segment."),
    ("merge_tags", "merge-tags", "Merge tags usable in templates."),
    ("jobs", "jobs", "Background jobs: run the due ones, list the queue."),
    ("contacts", "contacts", "Create, upsert, find, tag, import and export contacts."),
    ("suppressions", "suppressions", "The suppression list: people who asked to be erased, kept as keyed hashes."),
    ("fields", "fields", "Create, update, list and delete custom contact fields."),
    ("tags", "tags", "Create, list and delete tags."),
    ("events", "events", "Track custom events and read the automation event log."),
    ("consents", "consents", "Export the consent ledger (who agreed to what, when, how) as CSV."),
    ("segments", "segments", "Create, update, list, inspect and delete segments; recount their members."),
    ("audience", "audience", "Count the recipients an audience reaches on a channel."),
    ("bounces", "bounces", "Record bounces and complaints; import DSN and ARF report files."),
    ("campaigns", "campaigns", "Email campaigns: create, configure, HTML, test emails, send, stats, archive, delete."),
    ("templates", "templates", "Import, list and delete email templates (HTML, ZIP, URL or editor)."),
    ("domains", "domains", "Add sending domains, show the DNS records to publish, verify and delete them."),
    ("senders", "senders", "Add, list and delete sender identities (From addresses on your domains)."),
    ("deliverability", "deliverability", "Per sending domain and provider lane: delivered, deferred, bounced, "
                                         "complaints and their rates."),
    ("sms", "sms", "SMS campaigns, quotes, review, the outbox, the prepaid balance and the sender ID."),
    ("automations", "automations", "Automations: flows of triggers and steps (welcome series, double opt-in, ...)."),
    ("mail", "mail", "Where the workspace's mail goes: an SMTP server or the outbox folder (operator only)."),
    ("database", "db", "The database: its engine and schema version, upgrading it (operator only)."),
    ("openapi", "openapi", "Print the OpenAPI 3.1 document of the HTTP API (GET /v1/openapi.json)."),
]

HELP = {module: text for module, _, text in SUBCOMMANDS}
