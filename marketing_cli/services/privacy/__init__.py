"""A person's data across every domain: erase it (GDPR Art. 17) and export it (Art. 15 and 20).

Above automations in the map (docs/architecture.md): an erase reaches the rows of every
domain (contacts, email and SMS messages, flows) and a channel's money (the SMS ledger's
refunds), so it reads them all and none of them reads it. The suppression list an erase
fills lives below, in services/contacts/suppressions.py, because creating, upserting and
importing contacts consult it.

    person         a contact named by id, email address or phone number
    erase          delete a contact = erase it: every row that holds the person, in one
                   transaction; the per-message rows statistics count are stripped of the person
    hand_offs      the person's email and SMS messages: dropped when not yet handed to a
                   transport, stripped when sent; waiting for the ones a worker holds right now
    personal_data  the personal-data export: one JSON document of all that is held
"""
