"""Automations: flows that react to the event log (docs/automations.md).

    format     the flow document: its shape (no database) and the JSON Schema that describes it
    validate   publishing: the graph (cycles, reachability) and the workspace's references
    flows      create, update, publish, pause, resume, archive, list, show; the plan allowance
    triggers   the per-workspace cursor over contact_events -> enrollments (set-based)
    steps      running one due step of one enrollment, in one transaction with its message
    runner     the `automations.run` job: events in, due steps claimed in bounded batches
    webhooks   the webhook outbox and its signed delivery job
    sms        an SMS step's message and charge, and the automations.sms job that hands it over
    caps       frequency caps per channel: the workspace's setting, counted from message rows
    stats      per-step statistics
    simulate   a flow walked for one contact on a simulated clock, and test sends (a package)

This package sits above contacts, email and sms: nothing below imports it.
"""
