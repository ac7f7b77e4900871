"""See before you send (docs/automations.md): a flow walked for one contact on a simulated
clock, writing nothing (`simulate`, POST /v1/automations/:id/simulate), and each message of
a flow sent once to a test address (`send_tests`, POST /v1/automations/:id/test).

    times       the simulated clock: the instants a request gives, the contact's zone, the next local time
    events      the events a simulation is given: read, checked, matched against a goal or a wait
    walk        what is walked (the flow's version, the contact) and the walk's state and timeline
    steps       one simulator per step type (SIMULATORS); the frequency caps on the simulated clock
    replay      the walk from the flow's start: each step's simulator, goal events, the end
    answer      the service: the request read, the replay run read-only, the answer it renders
    test_sends  each message of the flow sent once to a test address

A package rather than seven `simulate_*` modules beside the runner's: the simulator mirrors
the runner (its own `steps`, its own clock) and the names would clash. It re-exports its
face, the names the CLI and the API call (`simulate.simulate`, `simulate.send_tests`, and
`simulate.EVENT_TYPES` in the OpenAPI document); other names are imported from the module
that defines them.
"""

from __future__ import annotations

from marketing_cli.services.automations.simulate.answer import simulate
from marketing_cli.services.automations.simulate.events import EVENT_TYPES
from marketing_cli.services.automations.simulate.test_sends import send_tests

__all__ = ["EVENT_TYPES", "send_tests", "simulate"]
