"""One estimate of a campaign's future, read by every face (CONTRACT section 12; docs/campaigns.md
"What will happen: the estimate"): per group of recipients, who goes now, who waits for their
local time (until when), who is held by SMS quiet hours (which rule, until when), who is
skipped (why) and who is over an allowance or a warm-up cap, with the cost of what will go.

    groups.py   the estimate object, its groups, and what the faces read from it (next release, ETA)
    caps.py     over_cap: the allowances today; `caps.register` for a warm-up's daily cap per lane
    email.py    an email campaign's estimate (audience, or its queued messages once frozen)
    sms.py      an SMS campaign's estimate (audience, or its messages once expanded; quiet hours)
    views.py    the faces' calls: campaign objects, lists, statistics, previews, schedule answers

It sits above email, sms and delivery (it reads all three) and below the faces
(tests/platform/test_structure.py; docs/architecture.md).
"""
