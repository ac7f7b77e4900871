"""Presentation shared by the faces: a campaign report as one self-contained HTML page.

A face-level package: it imports services (their constants) but no face, holds no SQL, and
is imported only by cli/ and api/ (tests/platform/test_structure.py). `html.render(report)`
turns the dict of services/email/report.py (with its deliverability rows: `email.campaign_report`)
or services/sms/report.py into the page.
"""
