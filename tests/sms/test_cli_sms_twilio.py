"""`mkt sms provider set|show`: per workspace, operator only, and the auth token never printed."""

from __future__ import annotations

from typing import Any, Callable

from tests import factories as f


def test_provider_show_defaults_to_the_outbox(cli: Callable[..., Any], cli_json: Callable[..., Any],
                                              workspace: dict[str, Any]) -> None:
    assert cli_json("sms", "provider", "show") == {"provider": "outbox", "account_sid": None, "base_url": None}
    assert "outbox" in cli("sms", "provider", "show").stdout


def test_set_twilio_and_show_never_print_the_token(cli: Callable[..., Any], cli_json: Callable[..., Any],
                                                   workspace: dict[str, Any]) -> None:
    args = ("sms", "provider", "set", "twilio", "--account-sid", f.TWILIO_SID, "--auth-token", f.TWILIO_TOKEN)
    human = cli(*args, "--base-url", "http://127.0.0.1:9/")
    assert human.exit_code == 0 and f.TWILIO_SID in human.stdout
    assert f.TWILIO_TOKEN not in human.stdout + human.stderr
    shown = cli_json(*args)
    assert shown == {"provider": "twilio", "account_sid": f.TWILIO_SID, "base_url": "https://api.twilio.com"}
    for extra in ((), ("--json",)):
        result = cli("sms", "provider", "show", *extra)
        assert result.exit_code == 0 and f.TWILIO_SID in result.stdout
        assert f.TWILIO_TOKEN not in result.stdout + result.stderr
    assert cli_json("sms", "provider", "set", "outbox")["provider"] == "outbox"
    assert cli_json("sms", "provider", "show")["account_sid"] is None


def test_a_bad_provider_is_an_error_and_changes_nothing(cli: Callable[..., Any], cli_json: Callable[..., Any],
                                                        workspace: dict[str, Any]) -> None:
    result = cli("sms", "provider", "set", "twilio", "--account-sid", "nope", "--auth-token", f.TWILIO_TOKEN)
    assert result.exit_code == 1
    assert "AC followed by 32 hexadecimal characters" in result.stderr
    assert f.TWILIO_TOKEN not in result.stdout + result.stderr
    assert cli_json("sms", "provider", "show")["provider"] == "outbox"


def test_a_bad_sms_rate_or_concurrency_stops_jobs_run_with_a_clear_error(cli: Callable[..., Any],
                                                                         monkeypatch: Any) -> None:
    monkeypatch.setenv("MKT_SMS_RATE", "fast")
    result = cli("jobs", "run")
    assert result.exit_code == 1
    assert "MKT_SMS_RATE must be a number of messages per second from 0 (unlimited) to 100,000, not 'fast'." \
        in result.stderr
    assert "Traceback" not in result.stderr
    monkeypatch.setenv("MKT_SMS_RATE", "10")
    monkeypatch.setenv("MKT_SMS_CONCURRENCY", "0")
    result = cli("jobs", "run")
    assert result.exit_code == 1 and "MKT_SMS_CONCURRENCY must be a whole number from 1 to 100, not '0'." in result.stderr


def test_serve_refuses_a_bad_pacing_value_before_it_starts(cli: Callable[..., Any], monkeypatch: Any) -> None:
    monkeypatch.setenv("MKT_SEND_CONCURRENCY", "many")
    result = cli("serve", "--port", "9")
    assert result.exit_code == 1
    assert result.stderr.strip() == "MKT_SEND_CONCURRENCY must be a whole number from 1 to 100, not 'many'."
