"""What each operation of the HTTP face accepts and returns, keyed by (method, path).

The single declaration that api/openapi.py turns into the OpenAPI document and api/strict.py
enforces: the routes themselves come from the app (a new route appears in the document by
itself, and tests/platform/test_api_openapi.py fails until it is declared here), and the
limits, enums and names in the declarations are the services' own constants, so a change
there changes the document.

One module per API area, as the route modules are (each names the api/ modules it declares);
this package only assembles their `OPERATIONS`, area after area in the order of `AREAS`:

  common       the building blocks: ids, names, JSON Schema helpers, path parameters, and what
               both channels share (schedule bodies, timelines, the report page)
  account      /v1/workspace, /v1/sms-rates, /v1/merge-tags
  contacts     /v1/contacts..., /v1/fields..., /v1/tags, /v1/events, /v1/consents
  privacy      DELETE /v1/contacts/{id}, /v1/contacts/{id}/personal-data, /v1/suppressions...
  audience     /v1/segments..., /v1/audience/count
  campaigns    /v1/campaigns... (email), but for their series
  series       /v1/campaigns/{campaign_id}/series..., /v1/campaign-series...
  bounces      /v1/bounces
  templates    /v1/templates...
  senders      /v1/domains..., /v1/sender-identities...
  document     /v1/openapi.json, /docs...
  tracking     /t/... (the links in sent email)
  sms          /v1/sms-campaigns..., /v1/sms/quote, /s/{token}, /webhooks/twilio/...
  automations  /v1/automations...

A new operation's entry goes in `OPERATIONS` of its area's module: the one that declares the
api/ module serving the route. A schema two areas share goes in common.py, or stays with the
area that owns it and is imported from there (`audience.AUDIENCE`, in both channels'
campaigns). A new area is a new module, added to `AREAS`. tests/platform/test_api_openapi.py
also fails when two areas declare the same operation. The document lists its paths in the
order of the app's routes (api/app.py ROUTE_MODULES), not in this one.

An operation is a dict:
  summary     one line
  envelope    "A" ({"error": null, "data"}), "B" ({"data"}) or None (not JSON: see `media`)
  status      the success status (200 unless given)
  data        JSON Schema of the envelope's `data` ({} = any JSON value)
  body        JSON Schema of the JSON request body (absent: no body)
  body_media  the body's media types when it is not JSON (contacts import: CSV)
  query       {name: schema} of the query parameters
  query_required  the names of the query parameters that must be sent
  auth        "key" (default), "optional" (a key changes the answer) or "none"
  media       {media type: schema} of a non-JSON success response
  errors      {status: {media type: schema}} of errors that are not the JSON error body
  body_optional  the JSON body may be left out (all its members are optional)
  links       [(method, path, {path parameter: member of the created data})]: what to call next

The face that api/openapi.py and api/strict.py read: `OPERATIONS`, `PATH_PARAMETERS` (from
common.py) and `is_alias`.
"""

from __future__ import annotations

from typing import Any

from marketing_cli.api.schemas import (
    account,
    audience,
    automations,
    bounces,
    campaigns,
    contacts,
    document,
    privacy,
    senders,
    series,
    sms,
    templates,
    tracking,
)
from marketing_cli.api.schemas.common import PATH_PARAMETERS

__all__ = ["AREAS", "OPERATIONS", "PATH_PARAMETERS", "is_alias"]

AREAS = (account, contacts, privacy, audience, campaigns, series, bounces, templates, senders, document, tracking, sms,
         automations)

OPERATIONS: dict[tuple[str, str], dict[str, Any]] = {
    key: operation for area in AREAS for key, operation in area.OPERATIONS.items()}


def is_alias(path: str) -> bool:
    """Routes that repeat a documented operation and are left out of the document.

    `/v1/sms-campaigns//schedule` (an empty id, answered "Please provide a campaign ID.") and
    the tracking paths under any prefix (`/{prefix:path}/t/...`, for a tracking domain that
    proxies a folder) are the same operations as their plain forms.
    """
    return "//" in path or path.startswith("/{prefix:path}/")
