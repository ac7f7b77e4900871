"""Publishing a flow: the graph and the workspace's references, checked; the version's form.

The graph: every step is reachable from the start, and every cycle passes through a wait
(`wait` or `wait_for_event`), so no contact can loop through steps without time passing.
References: each tag, field (by merge tag), segment, sender and template a step or trigger
names must exist in the workspace. They are resolved here (tag and field names to ids,
a template to its cleaned HTML), so a published version keeps working when a tag or
field is renamed and is not changed by a later edit of the template: publishing again
picks the new content up.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from marketing_cli.errors import MktError
from marketing_cli.services.automations.format import TRIGGER_EVENTS, WAIT_TYPES, pointers_of
from marketing_cli.services.contacts.merge_tags import find_unknown_tags
from marketing_cli.services.contacts.values import EMAIL_TAG, PHONE_TAG, load_fields, normalize_value


def _edges(steps: dict[str, dict[str, Any]], step_id: str) -> list[str]:
    step = steps[step_id]
    return [step[p] for p in pointers_of(step["type"]) if step.get(p) is not None]


def check_graph(flow: dict[str, Any]) -> None:
    steps = {s["id"]: s for s in flow["steps"]}
    seen = {flow["start"]}
    todo = [flow["start"]]
    while todo:
        for target in _edges(steps, todo.pop()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    unreachable = [s["id"] for s in flow["steps"] if s["id"] not in seen]
    if unreachable:
        raise MktError(400, f"No path from the start reaches the step(s): {', '.join(unreachable)}.")
    # A cycle among steps that are not waits: depth-first search over the non-wait subgraph.
    state: dict[str, int] = {}  # 1 on the stack, 2 done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for target in _edges(steps, node):
            if steps[target]["type"] in WAIT_TYPES:
                continue
            if state.get(target) == 1:
                cycle = [*path[path.index(target):], target] if target in path else [node, target]
                raise MktError(400, f"The steps {' -> '.join(cycle)} form a cycle without a wait: add a wait step"
                                    " to it.")
            if target not in state:
                visit(target, [*path, target])
        state[node] = 2

    for step_id, step in steps.items():
        if step_id not in state and step["type"] not in WAIT_TYPES:
            visit(step_id, [step_id])


class _Refs:
    def __init__(self, conn: sqlite3.Connection, workspace_id: int) -> None:
        self.conn = conn
        self.ws = workspace_id
        self.fields = load_fields(conn, workspace_id)

    def tag_id(self, name: str, where: str) -> int:
        row = self.conn.execute("SELECT id FROM tags WHERE workspace_id = ? AND name = ?", (self.ws, name)).fetchone()
        if row is None:
            raise MktError(400, f"{where} names the tag '{name}', which the workspace does not have.")
        return row["id"]

    def field(self, merge_tag: str, where: str) -> Any:
        found = self.fields.by_tag.get(merge_tag)
        if found is None:
            raise MktError(400, f"{where} names the field '{merge_tag}', which the workspace does not have.")
        return found

    def value(self, merge_tag: str, raw: Any, where: str) -> Any:
        f = self.field(merge_tag, where)
        if f.merge_tag in (EMAIL_TAG, PHONE_TAG):
            raise MktError(400, f"{where}: the field '{merge_tag}' is a contact's address and cannot be compared"
                                " or set by a flow.")
        try:
            return normalize_value(f, raw)
        except ValueError as exc:
            raise MktError(400, f"{where}: {exc}") from None

    def exists(self, table: str, item_id: int, what: str, where: str) -> None:
        row = self.conn.execute(f"SELECT 1 FROM {table} WHERE workspace_id = ? AND id = ?",
                                (self.ws, item_id)).fetchone()
        if row is None:
            raise MktError(400, f"{where} names the {what} {item_id}, which the workspace does not have.")


def _matcher(refs: _Refs, condition: dict[str, Any], where: str) -> dict[str, Any]:
    """A trigger, goal or wait-for-event event as the SQL matcher reads it (ids, not names)."""
    kind = condition["type"]
    out: dict[str, Any] = {"type": kind, "event_type": TRIGGER_EVENTS.get(kind)}
    if kind in ("tag_added", "tag_removed"):
        out["tag"] = condition["tag"]
        out["tag_id"] = refs.tag_id(condition["tag"], where)
    elif kind == "field_updated":
        f = refs.field(condition["field"], where)
        out["field"] = condition["field"]
        out["field_id"] = f.id
        for end in ("from", "to"):
            if end in condition:
                out[end] = refs.value(condition["field"], condition[end], where) if condition[end] is not None else None
    elif kind in ("segment_entered", "segment_left"):
        refs.exists("segments", condition["segment_id"], "segment", where)
        out["segment_id"] = condition["segment_id"]
    elif kind == "date_anniversary":
        f = refs.field(condition["field"], where)
        if f.type != "DATE":
            raise MktError(400, f"{where}: the field '{condition['field']}' is not a DATE field, so it has no"
                                " anniversary.")
        out["field"] = condition["field"]
        out["field_id"] = f.id
    elif kind == "custom_event":
        out["name"] = condition["name"]
        out["properties"] = condition.get("properties") or {}
    return out


def _email_step(conn: sqlite3.Connection, refs: _Refs, step: dict[str, Any], where: str) -> dict[str, Any]:
    from marketing_cli.services.email.html_clean import clean_html, inject_preview_span
    from marketing_cli.services.email.schedule import UNVERIFIED, has_unsubscribe_link
    from marketing_cli.services.email.senders import get_sender_identity

    sender = get_sender_identity(conn, refs.ws, step["sender_id"])
    if sender is None:
        raise MktError(400, f"{where} names the sender {step['sender_id']}, which the workspace does not have.")
    if not sender["domain_verified"]:  # as scheduling a campaign refuses it
        raise MktError(400, f"{where}: " + UNVERIFIED.format(domain=sender["domain_name"], domain_id=sender["domain_id"]))
    html = step.get("html")
    if step.get("template_id") is not None:
        row = conn.execute("SELECT body_html FROM templates WHERE workspace_id = ? AND id = ?",
                           (refs.ws, step["template_id"])).fetchone()
        if row is None:
            raise MktError(400, f"{where} names the template {step['template_id']}, which the workspace does not have.")
        if row["body_html"] is None:
            raise MktError(400, f"{where}: the template {step['template_id']} is an editor template without HTML;"
                                " use a code template or give 'html'.")
        html = row["body_html"]
    unknown = [t for t in find_unknown_tags(conn, refs.ws, f"{step['subject']} {html}") if t != "{{confirmation_url}}"]
    if unknown:
        raise MktError(400, f"{where} uses merge tags the workspace does not define: {', '.join(unknown)}.")
    # Every marketing email carries a way out, as a campaign's must; a double opt-in confirmation
    # goes to a contact who is not subscribed yet (its link is the way in).
    if not step.get("confirmation") and not has_unsubscribe_link(html or ""):
        raise MktError(400, f"{where} has no unsubscribe link: add {{{{unsubscribe_url}}}} to its HTML.")
    return {**step, "subject": step["subject"].strip(), "body_html": inject_preview_span(clean_html(html))}


def _sms_step(conn: sqlite3.Connection, refs: _Refs, step: dict[str, Any], where: str) -> dict[str, Any]:
    """The SMS campaigns' checks: the workspace has a sender ID (the From of every text), and the
    body is a message an SMS can carry (merge tags the workspace defines, no email links)."""
    from marketing_cli.services.sms import ledger
    from marketing_cli.services.sms.render import check_message

    if not ledger.get_sender_id(conn, refs.ws)["sms_sender_id"]:
        raise MktError(400, f"{where} sends an SMS, but the workspace has no SMS sender ID: set one with"
                            " `mkt sms sender-id set`.")
    try:
        check_message(conn, refs.ws, step["body"])
    except MktError as exc:
        raise MktError(400, f"{where}: {exc.message}") from None
    return dict(step)


def resolve(conn: sqlite3.Connection, workspace_id: int, flow: dict[str, Any]) -> dict[str, Any]:
    """The version to store: graph checked, every reference found and resolved."""
    check_graph(flow)
    refs = _Refs(conn, workspace_id)
    out = {**flow, "triggers": [], "steps": []}
    for i, trigger in enumerate(flow["triggers"]):
        out["triggers"].append(_matcher(refs, trigger, f"triggers[{i}]"))
    if flow.get("goal") is not None:
        out["goal"] = _matcher(refs, flow["goal"], "goal")
    send_steps = {s["id"] for s in flow["steps"] if s["type"] == "send_email"}
    for i, step in enumerate(flow["steps"]):
        where = f"Step '{step['id']}' (steps[{i}])"
        step = dict(step)
        kind = step["type"]
        if kind == "send_email":
            step = _email_step(conn, refs, step, where)
        elif kind == "send_sms":
            step = _sms_step(conn, refs, step, where)
        elif kind in ("add_tag", "remove_tag"):
            step["tag_id"] = refs.tag_id(step["tag"], where)
        elif kind == "set_field":
            step["field_id"] = refs.field(step["field"], where).id
            step["value"] = refs.value(step["field"], step["value"], where)
        elif kind == "wait_for_event":
            step["event"] = _matcher(refs, step["event"], where)
        elif kind == "split":
            step["condition"] = _condition(refs, step["condition"], send_steps, where)
        out["steps"].append(step)
    return out


def _condition(refs: _Refs, condition: dict[str, Any], send_steps: set[str], where: str) -> dict[str, Any]:
    kind = condition["kind"]
    out = dict(condition)
    if kind == "tag":
        out["tag_id"] = refs.tag_id(condition["tag"], where)
    elif kind == "field":
        out["field_id"] = refs.field(condition["field"], where).id
        if "value" in condition and condition["operator"] not in ("contains",):
            out["value"] = refs.value(condition["field"], condition["value"], where)
    elif kind == "segment":
        refs.exists("segments", condition["segment_id"], "segment", where)
    elif kind == "email_activity" and condition["step"] not in send_steps:
        raise MktError(400, f"{where} asks about the step '{condition['step']}', which is no send_email step.")
    return out
