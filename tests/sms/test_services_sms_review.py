"""The automated review: deterministic, scored, and never flags ordinary messages."""

from __future__ import annotations

import pytest

from marketing_cli.services.sms.review import THRESHOLD, review_message

ORDINARY = [
    "Hi Anna, your order #4521 has shipped and should arrive on Thursday.",
    "Your appointment with Dr. Patel is confirmed for Monday at 10:30.",
    "Thanks for shopping with us! Your receipt is at https://shop.example.com/r/8812",
    "Our autumn sale starts today: 20% off all coats. See https://example.com/sale",
    "Reminder: the library closes early on Friday at 4 pm.",
    "Dear customer, your account statement is ready. Log in to see it.",
    "Your verification code is 482913. It expires in 10 minutes.",
    "Congratulations on your graduation, Sam! Enjoy 15% off with code GRAD15.",
    "The winner of our photo contest will be announced on Sunday. Good luck!",
    "Act now to keep your seat: the workshop is almost full. Details at bit.ly/ws-2026",
    "Hello from ACME USA LLC. Your package is ready for pickup at the Main St. store.",
    "Limited time offer: free shipping on orders over $50 this weekend.",
    "Don't miss our new menu... we think you will love it.",
    "Your table for 4 at Luigi's is booked for 7 pm. Reply C to cancel.",
    "Flash sale! Everything is half price until midnight. Shop at www.example.org",
    "Guaranteed delivery before the holidays if you order by Dec 18.",
    "Hi {{contact.first_name}}, we miss you. Here is 10% off your next visit.",
    "The NASA open day is on Saturday; tickets are free for members.",
    "Café Zoë: ton café offert avec ce message, valable jusqu'à dimanche.",
    "Ihre Bestellung ist unterwegs und kommt morgen an. Danke für Ihren Einkauf!",
    "Your free gift is waiting in store: show this message at the till.",
    "Pay your invoice of $120.00 by Friday to avoid a late fee. Questions? Call us.",
    "Claim your reward points before they expire on 31 March: https://rewards.example.com",
    "You won the raffle at the school fair! Collect your prize at the office.",
    "Wi-Fi is back at the office. Sorry for the trouble this morning.",
]

SPAM = [
    "WIN A FREE IPHONE NOW!!! CLICK bit.ly/free-phone",
    "CONGRATULATIONS YOU HAVE WON A CASH PRIZE!!! Claim at tinyurl.com/x and www.win.com",
    "URGENT!!! Your account has been suspended, verify your account at bit.ly/a or bit.ly/b",
    "FREE MONEY FAST FOR ALL OUR FRIENDS TODAY",
    "Act now!!! Double your money: www.a.com www.b.com www.c.com",
]


@pytest.mark.parametrize("message", ORDINARY)
@pytest.mark.parametrize("first", [True, False])
def test_ordinary_messages_are_never_flagged(message: str, first: bool) -> None:
    result = review_message(message, first_message=first)
    assert not result["flagged"], result
    assert result["score"] < THRESHOLD


@pytest.mark.parametrize("message", SPAM)
def test_spam_is_flagged(message: str) -> None:
    result = review_message(message)
    assert result["flagged"], result


def test_rules_and_scores() -> None:
    result = review_message("SHOP THE BIG SALE TODAY!! bit.ly/x www.example.com")
    fired = {r["rule"]: r["score"] for r in result["rules"]}
    assert fired == {"all_capitals": 3, "repeated_punctuation": 3, "several_links": 3, "url_shortener": 1,
                     "missing_opt_out": 1}
    assert result["score"] == 11 and result["flagged"] and result["threshold"] == THRESHOLD


def test_opt_out_wording_matters_only_for_a_first_message() -> None:
    assert [r["rule"] for r in review_message("See you soon.")["rules"]] == ["missing_opt_out"]
    assert review_message("See you soon. Reply STOP to opt out.")["rules"] == []
    assert review_message("See you soon.", first_message=False)["rules"] == []


def test_the_review_is_deterministic_and_ignores_merge_tags() -> None:
    text = "Hi {{contact.first_name}}!! New arrivals at www.example.com and www.example.org"
    assert review_message(text) == review_message(text)
    assert "FIRST_NAME" not in str(review_message(text))
    assert review_message("{{contact.FIRST_NAME}} {{contact.LAST_NAME}} {{contact.CITY_NAME}} {{contact.ZIP_CODE}} hi")[
        "rules"] == [r for r in review_message("hi")["rules"]]
