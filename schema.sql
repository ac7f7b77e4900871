-- The one source of mkt's schema.
--
-- The file is a list of steps, each opened by a line `-- version: N`. A new database
-- runs every step in order; an existing one runs the steps above its
-- `PRAGMA user_version`, each inside the same transaction as the version bump
-- (marketing_cli/db.py). Never edit a step that has been released: add a new one.
--
-- Conventions: timestamps are TEXT in RFC 3339 UTC with a trailing Z (they sort as
-- text); money is TEXT holding a decimal string (read with decimal.Decimal); contact,
-- campaign and variant ids are 24 lowercase hex characters, time-ordered (marketing_cli/ids.py).

-- version: 1
-- Workspaces, API keys, billing, usage counters, SMS rates, fields, the job queue.

CREATE TABLE workspaces (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    conversion_tracking INTEGER NOT NULL DEFAULT 0,
    interaction_tracking INTEGER NOT NULL DEFAULT 1,
    is_approved INTEGER NOT NULL DEFAULT 1,
    is_suspended INTEGER NOT NULL DEFAULT 0,
    allow_contacts_without_email INTEGER NOT NULL DEFAULT 0,
    sms_markup TEXT,                       -- NULL: the platform default markup
    sms_sender_id TEXT,
    created_at TEXT NOT NULL
);

CREATE TABLE api_keys (
    id INTEGER PRIMARY KEY,
    workspace_id INTEGER NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name TEXT,
    prefix TEXT NOT NULL,                  -- the first characters, shown to tell keys apart
    key_hash TEXT NOT NULL UNIQUE,         -- sha256 hex of the whole secret
    created_at TEXT NOT NULL,
    last_used_at TEXT,
    revoked_at TEXT
);
CREATE INDEX api_keys_workspace ON api_keys(workspace_id);

CREATE TABLE plans (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    price TEXT NOT NULL,                   -- USD per period
    conversion_tracking INTEGER NOT NULL
);

CREATE TABLE plan_allowances (
    plan_id INTEGER NOT NULL REFERENCES plans(id),
    resource TEXT NOT NULL,
    allowed INTEGER NOT NULL,
    PRIMARY KEY (plan_id, resource)
) WITHOUT ROWID;

CREATE TABLE addons (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    price TEXT NOT NULL,
    resource TEXT,                         -- the allowance one unit raises, if any
    amount INTEGER NOT NULL DEFAULT 0      -- by how much
);

CREATE TABLE subscriptions (
    workspace_id INTEGER PRIMARY KEY REFERENCES workspaces(id) ON DELETE CASCADE,
    plan_id INTEGER NOT NULL REFERENCES plans(id),
    status TEXT NOT NULL,
    current_period_start TEXT NOT NULL,
    current_period_end TEXT,
    cancel_at_period_end INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE subscription_addons (
    id INTEGER PRIMARY KEY,
    workspace_id INTEGER NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    addon_id INTEGER NOT NULL REFERENCES addons(id),
    quantity INTEGER NOT NULL,
    UNIQUE (workspace_id, addon_id)
);

CREATE TABLE allowance_overrides (
    workspace_id INTEGER NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    resource TEXT NOT NULL,
    allowed INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, resource)
) WITHOUT ROWID;

-- Live usage, kept current as data changes so reading it never counts rows.
-- period is '' for standing counts (contacts, segments, ...), 'YYYY-MM' for monthly
-- ones and 'YYYY-MM-DDTHH' for hourly ones; readers pick the current period.
CREATE TABLE usage_counters (
    workspace_id INTEGER NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    resource TEXT NOT NULL,
    period TEXT NOT NULL DEFAULT '',
    used INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (workspace_id, resource, period)
) WITHOUT ROWID;

CREATE TRIGGER api_keys_count_insert AFTER INSERT ON api_keys BEGIN
    INSERT INTO usage_counters (workspace_id, resource, period, used)
    VALUES (NEW.workspace_id, 'users', '', 1)
    ON CONFLICT (workspace_id, resource, period) DO UPDATE SET used = used + 1;
END;
CREATE TRIGGER api_keys_count_revoke AFTER UPDATE OF revoked_at ON api_keys
WHEN OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL BEGIN
    UPDATE usage_counters SET used = used - 1
    WHERE workspace_id = NEW.workspace_id AND resource = 'users' AND period = '';
END;

-- The operator's base (list) price per SMS segment; NULL price: enabled, no rate
-- published. Customers see price * markup (workspaces.sms_markup or the default).
CREATE TABLE sms_rates (
    country_code TEXT PRIMARY KEY,
    price TEXT,
    updated_at TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE fields (
    id INTEGER PRIMARY KEY,
    workspace_id INTEGER NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    label TEXT NOT NULL,
    merge_tag TEXT NOT NULL,
    type TEXT NOT NULL,
    definition TEXT,
    default_value TEXT,
    "order" INTEGER NOT NULL DEFAULT 0,
    immutable INTEGER NOT NULL DEFAULT 0,
    required INTEGER NOT NULL DEFAULT 0,
    default_region TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (workspace_id, merge_tag),
    UNIQUE (workspace_id, label)
);

-- The durable job queue (marketing_cli/jobs.py).
CREATE TABLE jobs (
    id INTEGER PRIMARY KEY,
    workspace_id INTEGER REFERENCES workspaces(id) ON DELETE CASCADE,
    type TEXT NOT NULL,
    payload TEXT NOT NULL DEFAULT '{}',
    dedupe_key TEXT,                       -- at most one pending job per key
    status TEXT NOT NULL DEFAULT 'queued', -- queued, running, done, failed
    attempts INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL DEFAULT 5,
    run_at TEXT NOT NULL,
    lease_owner TEXT,
    lease_expires_at TEXT,
    last_error TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    finished_at TEXT
);
CREATE INDEX jobs_due ON jobs(status, run_at);
CREATE UNIQUE INDEX jobs_pending_key ON jobs(dedupe_key)
    WHERE dedupe_key IS NOT NULL AND status IN ('queued', 'running');

INSERT INTO plans (id, name, price, conversion_tracking) VALUES
    (1, 'free', '0.00', 0),
    (2, 'pro', '49.00', 1);
INSERT INTO plan_allowances (plan_id, resource, allowed) VALUES
    (1, 'contacts', 1000), (1, 'monthly_emails', 10000), (1, 'domains', 1),
    (1, 'users', 3), (1, 'segments', 5), (1, 'automations', 2),
    (1, 'events', 10000), (1, 'hourly_emails', 1000),
    (2, 'contacts', 100000), (2, 'monthly_emails', 1000000), (2, 'domains', 10),
    (2, 'users', 25), (2, 'segments', 250), (2, 'automations', 100),
    (2, 'events', 1000000), (2, 'hourly_emails', 100000);
INSERT INTO addons (id, name, price, resource, amount) VALUES
    (1, 'extra_contacts_10k', '15.00', 'contacts', 10000),
    (2, 'extra_domain', '5.00', 'domains', 1),
    (3, 'extra_user', '8.00', 'users', 1),
    (4, 'dedicated_ip', '30.00', NULL, 0);

-- The default price list: USD per segment, before markup.
INSERT INTO sms_rates (country_code, price, updated_at) VALUES
    ('US', '0.00830', '2026-11-22T00:00:00Z'),
    ('CA', '0.00830', '2026-11-22T00:00:00Z'),
    ('GB', '0.04000', '2026-11-22T00:00:00Z'),
    ('IE', '0.07500', '2026-11-22T00:00:00Z'),
    ('DE', '0.08900', '2026-11-22T00:00:00Z'),
    ('FR', '0.07800', '2026-11-22T00:00:00Z'),
    ('ES', '0.07700', '2026-11-22T00:00:00Z'),
    ('IT', '0.08300', '2026-11-22T00:00:00Z'),
    ('NL', '0.09800', '2026-11-22T00:00:00Z'),
    ('AU', '0.05200', '2026-11-22T00:00:00Z'),
    ('NZ', '0.10600', '2026-11-22T00:00:00Z'),
    ('BR', '0.04250', '2026-11-22T00:00:00Z'),
    ('MX', '0.03300', '2026-11-22T00:00:00Z'),
    ('IN', NULL, '2026-11-22T00:00:00Z');

-- version: 2
-- Contacts, tags and the automation event log.
--
-- Custom field values live in one JSON object per contact (`data`), keyed by the
-- field's id as text (so renaming a merge tag never rewrites contacts); email and
-- phone have columns of their own because they are lookup keys. Field filters use
-- expression indexes on json_extract(data, '$."<id>"') created with each field
-- (docs/architecture.md has the figures behind this choice).

CREATE TABLE contacts (
    id TEXT PRIMARY KEY,
    workspace_id INTEGER NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    email TEXT,                            -- normalised, lower case
    phone TEXT,                            -- E.164
    status TEXT NOT NULL,
    sms_status TEXT,                       -- NULL: never set, reported as SUBSCRIBED
    score INTEGER NOT NULL DEFAULT 0,
    data TEXT NOT NULL DEFAULT '{}',
    total_opens INTEGER NOT NULL DEFAULT 0,
    total_clicks INTEGER NOT NULL DEFAULT 0,
    total_bounces INTEGER NOT NULL DEFAULT 0,
    total_delivered INTEGER NOT NULL DEFAULT 0,
    unique_opens INTEGER NOT NULL DEFAULT 0,    -- deliveries opened at least once
    unique_clicks INTEGER NOT NULL DEFAULT 0,   -- deliveries clicked at least once
    last_opened_at TEXT,
    last_clicked_at TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX contacts_email ON contacts(workspace_id, email);
CREATE INDEX contacts_phone ON contacts(workspace_id, phone) WHERE phone IS NOT NULL;
CREATE INDEX contacts_created ON contacts(workspace_id, created_at, id);
CREATE INDEX contacts_updated ON contacts(workspace_id, updated_at, id);

CREATE TRIGGER contacts_count_insert AFTER INSERT ON contacts BEGIN
    INSERT INTO usage_counters (workspace_id, resource, period, used)
    VALUES (NEW.workspace_id, 'contacts', '', 1)
    ON CONFLICT (workspace_id, resource, period) DO UPDATE SET used = used + 1;
END;
CREATE TRIGGER contacts_count_delete AFTER DELETE ON contacts BEGIN
    UPDATE usage_counters SET used = used - 1
    WHERE workspace_id = OLD.workspace_id AND resource = 'contacts' AND period = '';
END;

CREATE TABLE tags (
    id INTEGER PRIMARY KEY,
    workspace_id INTEGER NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (workspace_id, name)
);

CREATE TABLE contact_tags (
    contact_id TEXT NOT NULL REFERENCES contacts(id) ON DELETE CASCADE,
    tag_id INTEGER NOT NULL REFERENCES tags(id) ON DELETE CASCADE,
    PRIMARY KEY (contact_id, tag_id)
) WITHOUT ROWID;
CREATE INDEX contact_tags_tag ON contact_tags(tag_id, contact_id);

-- Automation events, appended in the transaction of the change that fired them.
-- type: CONTACT_SUBSCRIBED_PENDING, TAG_ADDED, TAG_REMOVED, FIELD_UPDATED, CUSTOM_EVENT.
CREATE TABLE contact_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    workspace_id INTEGER NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    contact_id TEXT NOT NULL,
    type TEXT NOT NULL,
    payload TEXT NOT NULL DEFAULT '{}',
    created_at TEXT NOT NULL
);
CREATE INDEX contact_events_workspace ON contact_events(workspace_id, id);

-- A running contact import or export holds its workspace's row here; field changes are
-- refused meanwhile. expires_at lets a crashed run's lock lapse (the runner renews it).
CREATE TABLE contact_io_locks (
    workspace_id INTEGER PRIMARY KEY REFERENCES workspaces(id) ON DELETE CASCADE,
    kind TEXT NOT NULL,                    -- import or export
    owner TEXT NOT NULL,
    started_at TEXT NOT NULL,
    expires_at TEXT NOT NULL
);

-- version: 3
-- Segments, and the job queue's refinements.
--
-- A segment stores its filters (the API's object, normalised) and the last count; its
-- members are never materialised: the audience resolver and `segments members` evaluate
-- the compiled filters live (marketing_cli/services/segment_filters.py), so a campaign
-- always sends to who matches at send time. contact_count is refreshed by the
-- `segment.count` job (on creation, on refresh, and every 15 minutes when stale).

CREATE TABLE segments (
    id INTEGER PRIMARY KEY,
    workspace_id INTEGER NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    filters TEXT NOT NULL,                 -- the API's filters object, as JSON
    contact_count INTEGER NOT NULL DEFAULT 0,
    counted_at TEXT,                       -- when contact_count was last calculated
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX segments_workspace ON segments(workspace_id);

CREATE TRIGGER segments_count_insert AFTER INSERT ON segments BEGIN
    INSERT INTO usage_counters (workspace_id, resource, period, used)
    VALUES (NEW.workspace_id, 'segments', '', 1)
    ON CONFLICT (workspace_id, resource, period) DO UPDATE SET used = used + 1;
END;
CREATE TRIGGER segments_count_delete AFTER DELETE ON segments BEGIN
    UPDATE usage_counters SET used = used - 1
    WHERE workspace_id = OLD.workspace_id AND resource = 'segments' AND period = '';
END;

-- The queue keeps at most one QUEUED job per dedupe_key (step 1 also covered running
-- jobs): a refresh asked for while a count is running must queue a fresh count, since
-- the running one may have read the data before the change.
DROP INDEX jobs_pending_key;
CREATE UNIQUE INDEX jobs_pending_key ON jobs(dedupe_key)
    WHERE dedupe_key IS NOT NULL AND status = 'queued';
-- For the schedulers: "when did a job with this key last run?"
CREATE INDEX jobs_dedupe_key ON jobs(dedupe_key, updated_at) WHERE dedupe_key IS NOT NULL;
-- For pruning finished jobs.
CREATE INDEX jobs_finished ON jobs(finished_at) WHERE finished_at IS NOT NULL;

-- version: 4
-- Reserved for the hardening pass (locks and leases held by live processes).

-- version: 5
-- Sending domains, their DNS records, and sender identities on them.
--
-- A domain keeps the RSA-2048 private key its DKIM record publishes (PEM, PKCS#8): the
-- sender signs with it, no API answer ever shows it. dns_records are the records the
-- operator must publish, in display order; `verified` is what the last DNS check found.

CREATE TABLE domains (
    id INTEGER PRIMARY KEY,
    workspace_id INTEGER NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    domain_name TEXT NOT NULL,             -- lowercase, IDNA (xn--) form, no trailing dot
    domain_code TEXT NOT NULL UNIQUE,      -- random public code (also the return-path label)
    dkim_selector TEXT NOT NULL,
    dkim_private_key TEXT NOT NULL,        -- PEM; never leaves the service layer
    verified INTEGER NOT NULL DEFAULT 0,
    checked_at TEXT,                       -- last DNS verification
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (workspace_id, domain_name)
);

CREATE TABLE dns_records (
    id INTEGER PRIMARY KEY,
    domain_id INTEGER NOT NULL REFERENCES domains(id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    purpose TEXT NOT NULL,                 -- spf, dkim, dmarc, return_path
    type TEXT NOT NULL,                    -- TXT, MX or CNAME
    host TEXT NOT NULL,
    value TEXT NOT NULL,
    priority INTEGER,
    mandatory INTEGER NOT NULL,
    verified INTEGER NOT NULL DEFAULT 0,
    UNIQUE (domain_id, position)
);

CREATE TABLE sender_identities (
    id INTEGER PRIMARY KEY,
    workspace_id INTEGER NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    domain_id INTEGER NOT NULL REFERENCES domains(id) ON DELETE CASCADE,
    local_part TEXT NOT NULL,
    display_name TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (domain_id, local_part)
);
CREATE INDEX sender_identities_workspace ON sender_identities(workspace_id);

CREATE TRIGGER domains_count_insert AFTER INSERT ON domains BEGIN
    INSERT INTO usage_counters (workspace_id, resource, period, used)
    VALUES (NEW.workspace_id, 'domains', '', 1)
    ON CONFLICT (workspace_id, resource, period) DO UPDATE SET used = used + 1;
END;
CREATE TRIGGER domains_count_delete AFTER DELETE ON domains BEGIN
    UPDATE usage_counters SET used = used - 1
    WHERE workspace_id = OLD.workspace_id AND resource = 'domains' AND period = '';
END;

-- version: 6
-- Templates (POST /v1/templates): editor documents and coded HTML imported from a file,
-- a ZIP archive or a URL. The HTML is stored as uploaded (it is cleaned when it becomes a
-- campaign variant's HTML). A ZIP archive's other files (images, CSS, more pages) are kept
-- in template_assets under their path relative to the entry file's folder.

CREATE TABLE templates (
    id INTEGER PRIMARY KEY,
    workspace_id INTEGER NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    type TEXT NOT NULL CHECK (type IN ('EDITOR', 'CODE')),
    import_format TEXT CHECK (import_format IN ('html', 'zip', 'url')),  -- NULL for EDITOR
    body_json TEXT,                        -- the editor document (JSON) of an EDITOR template
    body_html TEXT,                        -- the HTML of a CODE template, as uploaded
    entry_file TEXT,                       -- zip: the entry file's path in the archive
    source_url TEXT,                       -- url: the address the HTML was fetched from
    size INTEGER NOT NULL DEFAULT 0,       -- bytes of body_html (UTF-8) or body_json
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX templates_workspace ON templates(workspace_id, id);

CREATE TABLE template_assets (
    template_id INTEGER NOT NULL REFERENCES templates(id) ON DELETE CASCADE,
    path TEXT NOT NULL,                    -- relative to the entry file's folder: images/logo.png
    content_type TEXT NOT NULL,
    size INTEGER NOT NULL,
    content BLOB NOT NULL,
    PRIMARY KEY (template_id, path)
) WITHOUT ROWID;

-- version: 7
-- Email campaigns and their variants.
--
-- A campaign's sender, reply-to and audience are written by Configure Campaign; reply_to
-- and audience are the API's JSON (the audience as the normalised array the audience
-- resolver reads). Variants are made with the campaign (A, and B for AB_TESTING) and
-- keep their id for the campaign's life. Per-recipient messages and interactions live in
-- step 9.

CREATE TABLE campaigns (
    id TEXT PRIMARY KEY,                   -- 24 hex
    workspace_id INTEGER NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    type TEXT NOT NULL CHECK (type IN ('SINGLE_VARIANT', 'AB_TESTING')),
    status TEXT NOT NULL DEFAULT 'DRAFT',  -- DRAFT QUEUED PREPROCESSING IN_REVIEW SENDING SENT CANCELLED PAUSED
    sender_identity_id INTEGER REFERENCES sender_identities(id) ON DELETE SET NULL,
    reply_to TEXT,                         -- JSON {display_name, local_part, domain_name} or NULL
    audience TEXT,                         -- JSON array of audience objects, or NULL
    scheduled_at TEXT,
    ab_test TEXT,                          -- JSON of the schedule's ab_test, or NULL
    status_detail TEXT,                    -- why a campaign paused or was held in review
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX campaigns_workspace ON campaigns(workspace_id, created_at, id);
CREATE INDEX campaigns_due ON campaigns(status, scheduled_at);

CREATE TABLE campaign_variants (
    id TEXT PRIMARY KEY,                   -- 24 hex
    campaign_id TEXT NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
    type TEXT NOT NULL CHECK (type IN ('A', 'B')),
    subject TEXT,
    preview_text TEXT,
    template_type TEXT NOT NULL DEFAULT 'EDITOR',  -- EDITOR or CODE
    body_json TEXT,                        -- the editor document (JSON), NULL once HTML is set
    body_html TEXT,                        -- cleaned HTML
    preview_url TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (campaign_id, type)
);

-- Test emails sent, counted for the per-minute, per-hour and per-day limits
-- (services/test_emails.py); rows older than a day are pruned as new ones are written.
CREATE TABLE test_email_sends (
    id INTEGER PRIMARY KEY,
    workspace_id INTEGER NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    campaign_id TEXT,
    recipient TEXT NOT NULL,
    sent_at TEXT NOT NULL
);
CREATE INDEX test_email_sends_workspace ON test_email_sends(workspace_id, sent_at);

-- The preview thumbnail of a variant (the campaign.preview job writes it; served by
-- GET /v1/campaigns/:id/variants/:type/preview).
CREATE TABLE campaign_previews (
    variant_id TEXT PRIMARY KEY REFERENCES campaign_variants(id) ON DELETE CASCADE,
    content_type TEXT NOT NULL,
    body BLOB NOT NULL,
    digest TEXT NOT NULL,                  -- of the HTML and subject it was made from
    created_at TEXT NOT NULL
);

-- version: 8
-- SMS campaigns, the prepaid SMS ledger, per-recipient SMS messages, their clicks, and the
-- outbox provider's table (docs/sms.md).
--
-- Money: the ledger holds decimal strings (USD, up to five decimals); a message's charge
-- is an integer count of 1/100000 USD (`price_units`: segments x the five-decimal price
-- per segment, exact), so a batch's charge is an exact SQL SUM. The ledger is append-only
-- (triggers refuse UPDATE and DELETE); the balance is its sum. A batch of an expansion
-- writes its messages and its one charge entry in one transaction; UNIQUE keys make a
-- re-run after a crash skip what was written (never a second message or charge).

CREATE TABLE sms_campaigns (
    id TEXT PRIMARY KEY,                   -- 24 hex
    workspace_id INTEGER NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    message TEXT NOT NULL DEFAULT '',
    audience TEXT NOT NULL DEFAULT '[]',   -- JSON array of normalised audience objects
    status TEXT NOT NULL DEFAULT 'DRAFT',  -- DRAFT QUEUED COMPLETED CANCELLED ARCHIVED
    scheduled_at TEXT,                     -- LATER: when it is due; NOW: NULL
    queued_at TEXT,
    estimated_cost TEXT,                   -- decimal string, at scheduling
    expanded_at TEXT,                      -- every recipient has its message row
    completed_at TEXT,
    cancelled_at TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX sms_campaigns_workspace ON sms_campaigns(workspace_id, created_at, id);
CREATE INDEX sms_campaigns_status ON sms_campaigns(workspace_id, status, created_at, id);

CREATE TABLE sms_ledger (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    workspace_id INTEGER NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    kind TEXT NOT NULL CHECK (kind IN ('top_up', 'charge', 'refund')),
    amount TEXT NOT NULL,                  -- signed decimal string: top-ups and refunds > 0, charges < 0
    campaign_id TEXT,
    batch INTEGER,                         -- the expansion batch a charge pays for
    reason TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX sms_ledger_workspace ON sms_ledger(workspace_id, id);
CREATE INDEX sms_ledger_campaign ON sms_ledger(campaign_id, kind) WHERE campaign_id IS NOT NULL;
CREATE UNIQUE INDEX sms_ledger_batch ON sms_ledger(campaign_id, batch) WHERE kind = 'charge';
CREATE TRIGGER sms_ledger_no_update BEFORE UPDATE ON sms_ledger BEGIN
    SELECT RAISE(ABORT, 'the SMS ledger is append-only');
END;

-- One row per recipient of a campaign. status: pending (charged, not yet handed to the
-- provider), sending (being handed over), sent (the provider took it), delivered,
-- undelivered, failed, suppressed (no price for its country: never charged), cancelled
-- (never handed over; refunded).
CREATE TABLE sms_messages (
    id INTEGER PRIMARY KEY,
    campaign_id TEXT NOT NULL REFERENCES sms_campaigns(id) ON DELETE CASCADE,
    contact_id TEXT NOT NULL,
    batch INTEGER NOT NULL,
    phone TEXT NOT NULL,                   -- E.164
    country TEXT,                          -- ISO 3166-1 alpha-2 from the number
    body TEXT,                             -- NULL: the campaign's message as written (no merge tags)
    encoding TEXT NOT NULL,
    segments INTEGER NOT NULL,
    price_units INTEGER NOT NULL DEFAULT 0,  -- the charge in 1/100000 USD (0 when suppressed)
    status TEXT NOT NULL,
    provider TEXT,
    provider_ref TEXT,                     -- the provider's id for the message (Twilio's sid)
    handed_at TEXT,
    delivered_at TEXT,
    failed_at TEXT,
    unsubscribed_at TEXT,
    created_at TEXT NOT NULL,
    UNIQUE (campaign_id, contact_id)
);
CREATE INDEX sms_messages_batch ON sms_messages(campaign_id, batch);
CREATE INDEX sms_messages_status ON sms_messages(campaign_id, status);
CREATE INDEX sms_messages_contact ON sms_messages(contact_id);

-- Every click of a tracked link in an SMS (filled by link tracking, a later step).
CREATE TABLE sms_clicks (
    id INTEGER PRIMARY KEY,
    message_id INTEGER NOT NULL REFERENCES sms_messages(id) ON DELETE CASCADE,
    url TEXT NOT NULL,
    country TEXT,
    device_type TEXT,
    operating_system TEXT,
    clicked_at TEXT NOT NULL
);
CREATE INDEX sms_clicks_message ON sms_clicks(message_id, id);

-- The default provider: messages handed over land here (`mkt sms outbox`).
CREATE TABLE sms_outbox (
    id INTEGER PRIMARY KEY,
    workspace_id INTEGER NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    message_id INTEGER NOT NULL UNIQUE REFERENCES sms_messages(id) ON DELETE CASCADE,
    campaign_id TEXT NOT NULL,
    sender TEXT NOT NULL,
    recipient TEXT NOT NULL,
    body TEXT NOT NULL,
    segments INTEGER NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX sms_outbox_workspace ON sms_outbox(workspace_id, id);

-- version: 9
-- Per-recipient email messages, their links and clicks, and the counters that make a
-- campaign's statistics a read of a few small rows (docs/statistics.md).
--
-- email_messages: one row per recipient per campaign (UNIQUE (campaign_id, contact_id)),
-- written when the audience is frozen and moved along by the sender, the tracker and the
-- bounce importer through services/campaign_stats.py. Each *_at column is set once, by
-- the first event of its kind (`... WHERE x_at IS NULL`); the triggers below count a
-- column when it goes from NULL to a value, so every writer keeps the counters right and
-- reading them never scans messages. delivered_at: the transport accepted the message
-- (SMTP 250 or written to the outbox). provider: the mailbox provider of `domain`
-- (campaign_stats.provider_of), fixed when the row is written.
CREATE TABLE email_messages (
    id INTEGER PRIMARY KEY,
    campaign_id TEXT NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
    -- No foreign key: variants go only with their campaign (whose key cascades here), and
    -- a key on variant_id would need a second 10M-entry index for the check on delete.
    variant_id TEXT NOT NULL,
    contact_id TEXT REFERENCES contacts(id) ON DELETE SET NULL,
    email TEXT NOT NULL,
    domain TEXT NOT NULL,                  -- the recipient's mail domain, lower case
    provider TEXT NOT NULL,                -- Gmail, Outlook, ... or Other
    status TEXT NOT NULL DEFAULT 'queued'
        CHECK (status IN ('queued', 'sending', 'delivered', 'failed', 'bounced', 'cancelled')),
    smtp_message_id TEXT,                  -- the Message-ID header, without angle brackets
    token TEXT,                            -- optional opaque per-recipient token (see the index)
    attempts INTEGER NOT NULL DEFAULT 0,
    failure_reason TEXT,
    created_at TEXT NOT NULL,
    delivered_at TEXT,
    opened_at TEXT,                        -- first human open
    open_count INTEGER NOT NULL DEFAULT 0, -- human opens
    machine_opened_at TEXT,                -- first open by a privacy proxy or scanner
    clicked_at TEXT,                       -- first human click
    unsubscribed_at TEXT,
    bounced_at TEXT,
    bounce_type TEXT CHECK (bounce_type IN ('hard', 'soft')),
    complained_at TEXT,
    failed_at TEXT,
    UNIQUE (campaign_id, contact_id)
);
-- The sender's work list and progress: the rows of one campaign in one state.
CREATE INDEX email_messages_status ON email_messages(campaign_id, status, id);
-- Bounce and complaint attribution by the original Message-ID.
CREATE UNIQUE INDEX email_messages_smtp_id ON email_messages(smtp_message_id)
    WHERE smtp_message_id IS NOT NULL;
CREATE UNIQUE INDEX email_messages_token ON email_messages(token) WHERE token IS NOT NULL;
-- "The last campaign sent to this contact" (bounces without a campaign) and contact deletes.
CREATE INDEX email_messages_contact ON email_messages(contact_id, id);

-- The original URLs of a campaign's variants; a tracked link carries the link id.
CREATE TABLE email_links (
    id INTEGER PRIMARY KEY,
    campaign_id TEXT NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
    variant_id TEXT NOT NULL REFERENCES campaign_variants(id) ON DELETE CASCADE,
    url TEXT NOT NULL,
    total_clicks INTEGER NOT NULL DEFAULT 0,   -- every human click
    unique_clicks INTEGER NOT NULL DEFAULT 0,  -- recipients who clicked it (first click each)
    UNIQUE (campaign_id, variant_id, url)
);

-- Every click, human or machine (link scanners), with what the User-Agent and GeoIP told.
CREATE TABLE email_clicks (
    id INTEGER PRIMARY KEY,
    message_id INTEGER NOT NULL REFERENCES email_messages(id) ON DELETE CASCADE,
    link_id INTEGER NOT NULL REFERENCES email_links(id) ON DELETE CASCADE,
    clicked_at TEXT NOT NULL,
    device_type TEXT NOT NULL,             -- desktop, mobile, tablet, other
    os TEXT NOT NULL,                      -- the OS family as ua-parser names it, or Other
    country TEXT NOT NULL,                 -- ISO 3166-1 alpha-2, or Unknown
    machine INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX email_clicks_message ON email_clicks(message_id, link_id);
CREATE INDEX email_clicks_link ON email_clicks(link_id);

-- Per campaign and variant: the aggregate and variant_stats numbers, and the sender's
-- progress (recipients, failed). Kept by the triggers below, never by counting rows.
CREATE TABLE email_campaign_counters (
    campaign_id TEXT NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
    variant_id TEXT NOT NULL,
    recipients INTEGER NOT NULL DEFAULT 0,
    delivered INTEGER NOT NULL DEFAULT 0,
    opened INTEGER NOT NULL DEFAULT 0,
    clicked INTEGER NOT NULL DEFAULT 0,
    bounced INTEGER NOT NULL DEFAULT 0,
    unsubscribed INTEGER NOT NULL DEFAULT 0,
    complained INTEGER NOT NULL DEFAULT 0,
    failed INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (campaign_id, variant_id)
) WITHOUT ROWID;

-- Per campaign breakdowns: dimension country, device_type or os (the recipient's first
-- human click) and provider (deliveries), one row per key.
CREATE TABLE email_campaign_breakdowns (
    campaign_id TEXT NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
    dimension TEXT NOT NULL CHECK (dimension IN ('country', 'device_type', 'os', 'provider')),
    key TEXT NOT NULL,
    count INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (campaign_id, dimension, key)
) WITHOUT ROWID;

CREATE TRIGGER email_messages_count_insert AFTER INSERT ON email_messages BEGIN
    INSERT INTO email_campaign_counters (campaign_id, variant_id, recipients)
    VALUES (NEW.campaign_id, NEW.variant_id, 1)
    ON CONFLICT (campaign_id, variant_id) DO UPDATE SET recipients = recipients + 1;
END;
CREATE TRIGGER email_messages_count_delivered AFTER UPDATE OF delivered_at ON email_messages
WHEN OLD.delivered_at IS NULL AND NEW.delivered_at IS NOT NULL BEGIN
    INSERT INTO email_campaign_counters (campaign_id, variant_id, delivered)
    VALUES (NEW.campaign_id, NEW.variant_id, 1)
    ON CONFLICT (campaign_id, variant_id) DO UPDATE SET delivered = delivered + 1;
    INSERT INTO email_campaign_breakdowns (campaign_id, dimension, key, count)
    VALUES (NEW.campaign_id, 'provider', NEW.provider, 1)
    ON CONFLICT (campaign_id, dimension, key) DO UPDATE SET count = count + 1;
END;
CREATE TRIGGER email_messages_count_opened AFTER UPDATE OF opened_at ON email_messages
WHEN OLD.opened_at IS NULL AND NEW.opened_at IS NOT NULL BEGIN
    INSERT INTO email_campaign_counters (campaign_id, variant_id, opened)
    VALUES (NEW.campaign_id, NEW.variant_id, 1)
    ON CONFLICT (campaign_id, variant_id) DO UPDATE SET opened = opened + 1;
END;
CREATE TRIGGER email_messages_count_clicked AFTER UPDATE OF clicked_at ON email_messages
WHEN OLD.clicked_at IS NULL AND NEW.clicked_at IS NOT NULL BEGIN
    INSERT INTO email_campaign_counters (campaign_id, variant_id, clicked)
    VALUES (NEW.campaign_id, NEW.variant_id, 1)
    ON CONFLICT (campaign_id, variant_id) DO UPDATE SET clicked = clicked + 1;
END;
CREATE TRIGGER email_messages_count_unsubscribed AFTER UPDATE OF unsubscribed_at ON email_messages
WHEN OLD.unsubscribed_at IS NULL AND NEW.unsubscribed_at IS NOT NULL BEGIN
    INSERT INTO email_campaign_counters (campaign_id, variant_id, unsubscribed)
    VALUES (NEW.campaign_id, NEW.variant_id, 1)
    ON CONFLICT (campaign_id, variant_id) DO UPDATE SET unsubscribed = unsubscribed + 1;
END;
CREATE TRIGGER email_messages_count_bounced AFTER UPDATE OF bounced_at ON email_messages
WHEN OLD.bounced_at IS NULL AND NEW.bounced_at IS NOT NULL BEGIN
    INSERT INTO email_campaign_counters (campaign_id, variant_id, bounced)
    VALUES (NEW.campaign_id, NEW.variant_id, 1)
    ON CONFLICT (campaign_id, variant_id) DO UPDATE SET bounced = bounced + 1;
END;
CREATE TRIGGER email_messages_count_complained AFTER UPDATE OF complained_at ON email_messages
WHEN OLD.complained_at IS NULL AND NEW.complained_at IS NOT NULL BEGIN
    INSERT INTO email_campaign_counters (campaign_id, variant_id, complained)
    VALUES (NEW.campaign_id, NEW.variant_id, 1)
    ON CONFLICT (campaign_id, variant_id) DO UPDATE SET complained = complained + 1;
END;
CREATE TRIGGER email_messages_count_failed AFTER UPDATE OF failed_at ON email_messages
WHEN OLD.failed_at IS NULL AND NEW.failed_at IS NOT NULL BEGIN
    INSERT INTO email_campaign_counters (campaign_id, variant_id, failed)
    VALUES (NEW.campaign_id, NEW.variant_id, 1)
    ON CONFLICT (campaign_id, variant_id) DO UPDATE SET failed = failed + 1;
END;

-- version: 10
-- Sending: the installation's secrets (tracking tokens) and the workspace's tracking base URL.

CREATE TABLE instance_secrets (
    name TEXT PRIMARY KEY,
    value BLOB NOT NULL
);
ALTER TABLE workspaces ADD COLUMN tracking_url TEXT;  -- NULL: MKT_PUBLIC_URL, else http://127.0.0.1:8000
-- The sender: when a message may be tried again after a temporary refusal (4xx), the
-- A/B test's held-back recipients until a winner is chosen, and send progress stamps.
ALTER TABLE email_messages ADD COLUMN retry_at TEXT;
CREATE TABLE email_ab_holdout (
    campaign_id TEXT NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
    contact_id TEXT NOT NULL,
    email TEXT NOT NULL,
    PRIMARY KEY (campaign_id, contact_id)
) WITHOUT ROWID;
ALTER TABLE campaigns ADD COLUMN send_started_at TEXT;
ALTER TABLE campaigns ADD COLUMN sent_at TEXT;

-- version: 11
-- SMS providers: the workspace's provider (the outbox when no row) and its Twilio account.
-- auth_token is a secret: no command output, API answer or log line shows it.
CREATE TABLE sms_provider_settings (
    workspace_id INTEGER PRIMARY KEY REFERENCES workspaces(id) ON DELETE CASCADE,
    provider TEXT NOT NULL,                -- outbox | twilio
    account_sid TEXT,
    auth_token TEXT,
    base_url TEXT,
    updated_at TEXT NOT NULL
);
CREATE INDEX sms_provider_settings_account ON sms_provider_settings(account_sid);
-- The provider's refusal of a message (Twilio's error code and message).
ALTER TABLE sms_messages ADD COLUMN error_code TEXT;
ALTER TABLE sms_messages ADD COLUMN error_message TEXT;
-- When a delivery report said the carrier accepted the message (Twilio's "sent"): a message
-- that fails before it is refunded, one that fails after it is not.
ALTER TABLE sms_messages ADD COLUMN carrier_at TEXT;
CREATE INDEX sms_messages_provider_ref ON sms_messages(provider_ref);
-- SMS click tracking: the original URL behind each short link `{base}/s/{token}`; the token
-- carries message_id * 16 + position (services/sms_links.py).
CREATE TABLE sms_links (
    message_id INTEGER NOT NULL REFERENCES sms_messages(id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    url TEXT NOT NULL,
    PRIMARY KEY (message_id, position)
) WITHOUT ROWID;

-- version: 12
-- sms_messages indexes that cost every expansion without serving a query. Expansion writes
-- each recipient's row as `pending` or `suppressed` with no provider_ref: a full
-- (campaign_id, status) index grew at two points (the end of the pending range, in the middle
-- of the index, and the end of the suppressed range) and a provider_ref index took every
-- NULL in front of the references already there, neither as an append (measured: +0.65 s per
-- 1,000,000 rows for the status index alone). The queue queries read only `pending` and
-- `sending` rows: partial indexes hold just those, so written rows are appended and handed
-- rows leave. The contact_id index served no query; the STOP reply looks a number's latest
-- handed message up by phone, which scanned every message.
DROP INDEX sms_messages_status;
DROP INDEX sms_messages_contact;
DROP INDEX sms_messages_provider_ref;
CREATE INDEX sms_messages_pending ON sms_messages(campaign_id, id) WHERE status = 'pending';
CREATE INDEX sms_messages_sending ON sms_messages(campaign_id, id) WHERE status = 'sending';
CREATE INDEX sms_messages_provider_ref ON sms_messages(provider_ref) WHERE provider_ref IS NOT NULL;
CREATE INDEX sms_messages_phone ON sms_messages(phone, handed_at) WHERE handed_at IS NOT NULL;

-- version: 13
-- The mail transport of each workspace (`mkt mail transport set`, operator only): no row is
-- the outbox folder beside the database, so a fresh install mails nobody. smtp_url is kept
-- without its password; smtp_password is a secret, as sms_provider_settings.auth_token is: no
-- command output, API answer or log line shows it. MKT_SMTP_URL (and --smtp-url) override
-- the row for the process that sets them; MKT_OUTBOX / --outbox place an outbox stored
-- without a folder.
CREATE TABLE mail_transport_settings (
    workspace_id INTEGER PRIMARY KEY REFERENCES workspaces(id) ON DELETE CASCADE,
    transport TEXT NOT NULL CHECK (transport IN ('smtp', 'outbox')),
    smtp_url TEXT,                         -- smtp[s]://[user@]host[:port][?...], no password
    smtp_password TEXT,                    -- as written in the URL (percent-encoded)
    outbox_path TEXT,                      -- absolute; NULL: outbox/ beside the database
    updated_at TEXT NOT NULL
);
-- Messages of a campaign that went to an outbox folder, not to their recipients (counted in
-- `delivered` all the same), and the folder they went to: statistics and progress name them.
ALTER TABLE campaigns ADD COLUMN outbox_delivered INTEGER NOT NULL DEFAULT 0;
ALTER TABLE campaigns ADD COLUMN outbox_path TEXT;

-- version: 14
-- A sending domain the operator marked verified without DNS (`mkt domains mark-verified`, CLI
-- only): when. Such a domain is verified whatever a DNS check finds, until the operator takes
-- the mark back (NULL again); services/email/domains.py.
ALTER TABLE domains ADD COLUMN operator_verified_at TEXT;

-- version: 15
-- Why an SMS campaign left QUEUED without being asked to: its sms.expand job failed for good
-- (a permanent error, or its last attempt), so the job's gave-up hook cancelled it and
-- refunded every message never handed to a provider (services/sms/expansion.py).
ALTER TABLE sms_campaigns ADD COLUMN status_detail TEXT;

-- version: 16
-- timelines: per-hour counts of each campaign's events, so a timeline (GET
-- /v1/campaigns/:id/timeline, GET /v1/sms-campaigns/:id/timeline; docs/statistics.md) reads at
-- most a few thousand small rows whatever the number of messages. `hour` is the first 13
-- characters of the event's UTC timestamp ('2026-11-25T17'). The triggers count each event
-- column when it goes from NULL to a value, as the step 9 counters do, so every writer keeps
-- them right; total opens are counted by services/email/stats.py's record_open (the open's
-- time is not kept on the message). The step fills both tables from the events already
-- recorded; before it only the first open of a message had a time, so a message's earlier
-- opens all count in the hour of its first one.
CREATE TABLE email_campaign_hours (
    campaign_id TEXT NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
    hour TEXT NOT NULL,
    variant_id TEXT NOT NULL,
    sent INTEGER NOT NULL DEFAULT 0,       -- handed to the transport: delivered or failed
    delivered INTEGER NOT NULL DEFAULT 0,
    unique_opens INTEGER NOT NULL DEFAULT 0,
    total_opens INTEGER NOT NULL DEFAULT 0,
    unique_clicks INTEGER NOT NULL DEFAULT 0,
    total_clicks INTEGER NOT NULL DEFAULT 0,
    unsubscribed INTEGER NOT NULL DEFAULT 0,
    bounced INTEGER NOT NULL DEFAULT 0,
    complained INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (campaign_id, hour, variant_id)
) WITHOUT ROWID;
CREATE TRIGGER email_hours_delivered AFTER UPDATE OF delivered_at ON email_messages
WHEN OLD.delivered_at IS NULL AND NEW.delivered_at IS NOT NULL BEGIN
    INSERT INTO email_campaign_hours (campaign_id, hour, variant_id, sent, delivered)
    VALUES (NEW.campaign_id, substr(NEW.delivered_at, 1, 13), NEW.variant_id, 1, 1)
    ON CONFLICT (campaign_id, hour, variant_id) DO UPDATE SET sent = sent + 1, delivered = delivered + 1;
END;
CREATE TRIGGER email_hours_failed AFTER UPDATE OF failed_at ON email_messages
WHEN OLD.failed_at IS NULL AND NEW.failed_at IS NOT NULL BEGIN
    INSERT INTO email_campaign_hours (campaign_id, hour, variant_id, sent)
    VALUES (NEW.campaign_id, substr(NEW.failed_at, 1, 13), NEW.variant_id, 1)
    ON CONFLICT (campaign_id, hour, variant_id) DO UPDATE SET sent = sent + 1;
END;
CREATE TRIGGER email_hours_opened AFTER UPDATE OF opened_at ON email_messages
WHEN OLD.opened_at IS NULL AND NEW.opened_at IS NOT NULL BEGIN
    INSERT INTO email_campaign_hours (campaign_id, hour, variant_id, unique_opens)
    VALUES (NEW.campaign_id, substr(NEW.opened_at, 1, 13), NEW.variant_id, 1)
    ON CONFLICT (campaign_id, hour, variant_id) DO UPDATE SET unique_opens = unique_opens + 1;
END;
CREATE TRIGGER email_hours_clicked AFTER UPDATE OF clicked_at ON email_messages
WHEN OLD.clicked_at IS NULL AND NEW.clicked_at IS NOT NULL BEGIN
    INSERT INTO email_campaign_hours (campaign_id, hour, variant_id, unique_clicks)
    VALUES (NEW.campaign_id, substr(NEW.clicked_at, 1, 13), NEW.variant_id, 1)
    ON CONFLICT (campaign_id, hour, variant_id) DO UPDATE SET unique_clicks = unique_clicks + 1;
END;
CREATE TRIGGER email_hours_unsubscribed AFTER UPDATE OF unsubscribed_at ON email_messages
WHEN OLD.unsubscribed_at IS NULL AND NEW.unsubscribed_at IS NOT NULL BEGIN
    INSERT INTO email_campaign_hours (campaign_id, hour, variant_id, unsubscribed)
    VALUES (NEW.campaign_id, substr(NEW.unsubscribed_at, 1, 13), NEW.variant_id, 1)
    ON CONFLICT (campaign_id, hour, variant_id) DO UPDATE SET unsubscribed = unsubscribed + 1;
END;
CREATE TRIGGER email_hours_bounced AFTER UPDATE OF bounced_at ON email_messages
WHEN OLD.bounced_at IS NULL AND NEW.bounced_at IS NOT NULL BEGIN
    INSERT INTO email_campaign_hours (campaign_id, hour, variant_id, bounced)
    VALUES (NEW.campaign_id, substr(NEW.bounced_at, 1, 13), NEW.variant_id, 1)
    ON CONFLICT (campaign_id, hour, variant_id) DO UPDATE SET bounced = bounced + 1;
END;
CREATE TRIGGER email_hours_complained AFTER UPDATE OF complained_at ON email_messages
WHEN OLD.complained_at IS NULL AND NEW.complained_at IS NOT NULL BEGIN
    INSERT INTO email_campaign_hours (campaign_id, hour, variant_id, complained)
    VALUES (NEW.campaign_id, substr(NEW.complained_at, 1, 13), NEW.variant_id, 1)
    ON CONFLICT (campaign_id, hour, variant_id) DO UPDATE SET complained = complained + 1;
END;
CREATE TRIGGER email_hours_click AFTER INSERT ON email_clicks WHEN NEW.machine = 0 BEGIN
    INSERT INTO email_campaign_hours (campaign_id, hour, variant_id, total_clicks)
    SELECT campaign_id, substr(NEW.clicked_at, 1, 13), variant_id, 1 FROM email_messages WHERE id = NEW.message_id
    ON CONFLICT (campaign_id, hour, variant_id) DO UPDATE SET total_clicks = total_clicks + 1;
END;
INSERT INTO email_campaign_hours (campaign_id, hour, variant_id, sent, delivered, unique_opens, total_opens,
                                  unique_clicks, total_clicks, unsubscribed, bounced, complained)
SELECT campaign_id, hour, variant_id, sum(sent), sum(delivered), sum(unique_opens), sum(total_opens),
       sum(unique_clicks), sum(total_clicks), sum(unsubscribed), sum(bounced), sum(complained)
FROM (
    SELECT campaign_id, variant_id, substr(delivered_at, 1, 13) AS hour, 1 AS sent, 1 AS delivered, 0 AS unique_opens,
           0 AS total_opens, 0 AS unique_clicks, 0 AS total_clicks, 0 AS unsubscribed, 0 AS bounced, 0 AS complained
    FROM email_messages WHERE delivered_at IS NOT NULL
    UNION ALL SELECT campaign_id, variant_id, substr(failed_at, 1, 13), 1, 0, 0, 0, 0, 0, 0, 0, 0
    FROM email_messages WHERE failed_at IS NOT NULL
    UNION ALL SELECT campaign_id, variant_id, substr(opened_at, 1, 13), 0, 0, 1, open_count, 0, 0, 0, 0, 0
    FROM email_messages WHERE opened_at IS NOT NULL
    UNION ALL SELECT campaign_id, variant_id, substr(clicked_at, 1, 13), 0, 0, 0, 0, 1, 0, 0, 0, 0
    FROM email_messages WHERE clicked_at IS NOT NULL
    UNION ALL SELECT m.campaign_id, m.variant_id, substr(k.clicked_at, 1, 13), 0, 0, 0, 0, 0, 1, 0, 0, 0
    FROM email_clicks k JOIN email_messages m ON m.id = k.message_id WHERE k.machine = 0
    UNION ALL SELECT campaign_id, variant_id, substr(unsubscribed_at, 1, 13), 0, 0, 0, 0, 0, 0, 1, 0, 0
    FROM email_messages WHERE unsubscribed_at IS NOT NULL
    UNION ALL SELECT campaign_id, variant_id, substr(bounced_at, 1, 13), 0, 0, 0, 0, 0, 0, 0, 1, 0
    FROM email_messages WHERE bounced_at IS NOT NULL
    UNION ALL SELECT campaign_id, variant_id, substr(complained_at, 1, 13), 0, 0, 0, 0, 0, 0, 0, 0, 1
    FROM email_messages WHERE complained_at IS NOT NULL
) GROUP BY campaign_id, hour, variant_id;

-- SMS: sent (handed to the provider), delivered, failed, STOP replies (unsubscribed) and
-- clicks (every click; unique: a message's first). Cost per hour is read from the ledger.
CREATE TABLE sms_campaign_hours (
    campaign_id TEXT NOT NULL REFERENCES sms_campaigns(id) ON DELETE CASCADE,
    hour TEXT NOT NULL,
    sent INTEGER NOT NULL DEFAULT 0,
    delivered INTEGER NOT NULL DEFAULT 0,
    failed INTEGER NOT NULL DEFAULT 0,
    unique_clicks INTEGER NOT NULL DEFAULT 0,
    total_clicks INTEGER NOT NULL DEFAULT 0,
    unsubscribed INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (campaign_id, hour)
) WITHOUT ROWID;
CREATE TRIGGER sms_hours_sent AFTER UPDATE OF handed_at ON sms_messages
WHEN OLD.handed_at IS NULL AND NEW.handed_at IS NOT NULL BEGIN
    INSERT INTO sms_campaign_hours (campaign_id, hour, sent) VALUES (NEW.campaign_id, substr(NEW.handed_at, 1, 13), 1)
    ON CONFLICT (campaign_id, hour) DO UPDATE SET sent = sent + 1;
END;
CREATE TRIGGER sms_hours_delivered AFTER UPDATE OF delivered_at ON sms_messages
WHEN OLD.delivered_at IS NULL AND NEW.delivered_at IS NOT NULL BEGIN
    INSERT INTO sms_campaign_hours (campaign_id, hour, delivered)
    VALUES (NEW.campaign_id, substr(NEW.delivered_at, 1, 13), 1)
    ON CONFLICT (campaign_id, hour) DO UPDATE SET delivered = delivered + 1;
END;
CREATE TRIGGER sms_hours_failed AFTER UPDATE OF failed_at ON sms_messages
WHEN OLD.failed_at IS NULL AND NEW.failed_at IS NOT NULL BEGIN
    INSERT INTO sms_campaign_hours (campaign_id, hour, failed) VALUES (NEW.campaign_id, substr(NEW.failed_at, 1, 13), 1)
    ON CONFLICT (campaign_id, hour) DO UPDATE SET failed = failed + 1;
END;
CREATE TRIGGER sms_hours_unsubscribed AFTER UPDATE OF unsubscribed_at ON sms_messages
WHEN OLD.unsubscribed_at IS NULL AND NEW.unsubscribed_at IS NOT NULL BEGIN
    INSERT INTO sms_campaign_hours (campaign_id, hour, unsubscribed)
    VALUES (NEW.campaign_id, substr(NEW.unsubscribed_at, 1, 13), 1)
    ON CONFLICT (campaign_id, hour) DO UPDATE SET unsubscribed = unsubscribed + 1;
END;
-- A message's first click is its unique one: sms_clicks_message (message_id, id) finds an earlier one.
CREATE TRIGGER sms_hours_click AFTER INSERT ON sms_clicks BEGIN
    INSERT INTO sms_campaign_hours (campaign_id, hour, unique_clicks, total_clicks)
    SELECT campaign_id, substr(NEW.clicked_at, 1, 13),
           NOT EXISTS (SELECT 1 FROM sms_clicks k WHERE k.message_id = NEW.message_id AND k.id < NEW.id), 1
    FROM sms_messages WHERE id = NEW.message_id
    ON CONFLICT (campaign_id, hour) DO UPDATE SET unique_clicks = unique_clicks + excluded.unique_clicks,
                                                  total_clicks = total_clicks + 1;
END;
INSERT INTO sms_campaign_hours (campaign_id, hour, sent, delivered, failed, unique_clicks, total_clicks, unsubscribed)
SELECT campaign_id, hour, sum(sent), sum(delivered), sum(failed), sum(unique_clicks), sum(total_clicks),
       sum(unsubscribed)
FROM (
    SELECT campaign_id, substr(handed_at, 1, 13) AS hour, 1 AS sent, 0 AS delivered, 0 AS failed,
           0 AS unique_clicks, 0 AS total_clicks, 0 AS unsubscribed
    FROM sms_messages WHERE handed_at IS NOT NULL
    UNION ALL SELECT campaign_id, substr(delivered_at, 1, 13), 0, 1, 0, 0, 0, 0 FROM sms_messages
    WHERE delivered_at IS NOT NULL
    UNION ALL SELECT campaign_id, substr(failed_at, 1, 13), 0, 0, 1, 0, 0, 0 FROM sms_messages
    WHERE failed_at IS NOT NULL
    UNION ALL SELECT campaign_id, substr(unsubscribed_at, 1, 13), 0, 0, 0, 0, 0, 1 FROM sms_messages
    WHERE unsubscribed_at IS NOT NULL
    UNION ALL SELECT m.campaign_id, substr(k.clicked_at, 1, 13), 0, 0, 0,
           NOT EXISTS (SELECT 1 FROM sms_clicks e WHERE e.message_id = k.message_id AND e.id < k.id), 1, 0
    FROM sms_clicks k JOIN sms_messages m ON m.id = k.message_id
) GROUP BY campaign_id, hour;

-- version: 17
-- quiet-hours
-- SMS quiet hours (services/sms/gate.py): a message the gate holds waits in status 'held' until
-- held_until (UTC), with the rule that held it; the sms.expand job is queued again for that
-- instant. The partial index finds the earliest release of a campaign without reading its
-- other messages. sms_quiet_hours_off_at: when an operator turned the workspace's quiet hours
-- off (`mkt sms quiet-hours off --override-quiet-hours`, CLI only); NULL = on, the default.
-- operator_log: what an operator changed that an auditor asks about (who, when, what).
ALTER TABLE sms_messages ADD COLUMN held_until TEXT;
ALTER TABLE sms_messages ADD COLUMN held_reason TEXT;
CREATE INDEX sms_messages_held ON sms_messages(campaign_id, held_until) WHERE status = 'held';
ALTER TABLE workspaces ADD COLUMN sms_quiet_hours_off_at TEXT;
CREATE TABLE operator_log (
    id INTEGER PRIMARY KEY,
    workspace_id INTEGER REFERENCES workspaces(id) ON DELETE CASCADE,
    actor TEXT NOT NULL,                   -- the operating-system user who ran the command
    action TEXT NOT NULL,                  -- sms.quiet_hours.off, sms.quiet_hours.on
    detail TEXT,
    created_at TEXT NOT NULL
);
CREATE INDEX operator_log_workspace ON operator_log(workspace_id, id);

-- version: 18
-- recurring
-- Recurring (and feed) campaigns: a series sends a copy of its campaign (which stays a DRAFT,
-- the definition) at each occurrence of an RFC 5545 rule read in `timezone`
-- (services/email/series.py). Each occurrence the runner reached is one row, unique per
-- (series, occurrence): two runners or a replayed job never make two copies. A feed series
-- remembers the items it already sent (`feed_seen`: guids; `feed_cutoff`: the newest date).
CREATE TABLE campaign_series (
    id INTEGER PRIMARY KEY,
    workspace_id INTEGER NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    campaign_id TEXT NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
    rrule TEXT NOT NULL,                   -- normalised (services/email/series.py, kernel/recurrence.py)
    timezone TEXT NOT NULL,                -- IANA zone the rule is read in
    dtstart TEXT NOT NULL,                 -- UTC
    feed_url TEXT,
    feed_seen TEXT,                        -- JSON array of the guids already sent (newest last)
    feed_cutoff TEXT,                      -- UTC: the newest item date already sent
    status TEXT NOT NULL DEFAULT 'ACTIVE' CHECK (status IN ('ACTIVE', 'PAUSED', 'STOPPED', 'FINISHED')),
    next_run_at TEXT,                      -- UTC: the next occurrence not yet handled; NULL once ended
    paused_at TEXT,
    status_detail TEXT,                    -- why a series ended on its own (its rule could not be computed)
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX campaign_series_workspace ON campaign_series(workspace_id, id);
CREATE UNIQUE INDEX campaign_series_live ON campaign_series(campaign_id) WHERE status IN ('ACTIVE', 'PAUSED');

CREATE TABLE campaign_series_occurrences (
    id INTEGER PRIMARY KEY,
    series_id INTEGER NOT NULL REFERENCES campaign_series(id) ON DELETE CASCADE,
    occurrence_at TEXT NOT NULL,           -- UTC: the rule's instant
    status TEXT NOT NULL CHECK (status IN ('SENT', 'MISSED', 'SKIPPED', 'FAILED')),
    campaign_id TEXT REFERENCES campaigns(id) ON DELETE SET NULL,  -- the copy, when one was made
    reason TEXT,
    item_count INTEGER,                    -- feed items in the copy
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (series_id, occurrence_at)
);

-- version: 19
-- local-time
-- Local-time delivery (docs/campaigns.md "Local-time delivery"). The workspace's own zone
-- (an IANA name: the last fallback of a contact's zone, and the zone of times typed without
-- an offset); the zone of the city of a contact's last human open or click (GeoLite2-City's
-- location.time_zone, written by the tracking paths); a campaign's local time ('HH:MM') and
-- the date in the workspace's zone it is read on, and what happens to recipients whose local
-- time had passed when sending was due to start (local_starts_at: a runner that starts late
-- sends those at once rather than count them as missed) (next_day, send_now, skip).
-- Each message row keeps its recipient's zone, which source gave it (field, phone, location,
-- workspace) and its due instant in UTC: the sender claims only due rows and its job is
-- queued again for the next zone's instant (services/contacts/zones.py).
ALTER TABLE workspaces ADD COLUMN timezone TEXT NOT NULL DEFAULT 'UTC';
ALTER TABLE contacts ADD COLUMN located_timezone TEXT;
ALTER TABLE campaigns ADD COLUMN local_time TEXT;
ALTER TABLE campaigns ADD COLUMN local_date TEXT;
ALTER TABLE campaigns ADD COLUMN local_starts_at TEXT;
ALTER TABLE campaigns ADD COLUMN local_time_missed TEXT;
ALTER TABLE sms_campaigns ADD COLUMN local_time TEXT;
ALTER TABLE sms_campaigns ADD COLUMN local_date TEXT;
ALTER TABLE sms_campaigns ADD COLUMN local_starts_at TEXT;
ALTER TABLE sms_campaigns ADD COLUMN local_time_missed TEXT;
-- Recipients left out because their local time had passed (local_time_missed = 'skip').
ALTER TABLE campaigns ADD COLUMN local_time_skipped INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sms_campaigns ADD COLUMN local_time_skipped INTEGER NOT NULL DEFAULT 0;
ALTER TABLE email_messages ADD COLUMN due_at TEXT;
ALTER TABLE email_messages ADD COLUMN zone TEXT;
ALTER TABLE email_messages ADD COLUMN zone_source TEXT;
ALTER TABLE sms_messages ADD COLUMN due_at TEXT;
ALTER TABLE sms_messages ADD COLUMN zone TEXT;
ALTER TABLE sms_messages ADD COLUMN zone_source TEXT;
-- The next zone's instant of a waiting campaign: the smallest due_at among its queued rows.
CREATE INDEX email_messages_due ON email_messages(campaign_id, due_at) WHERE status = 'queued' AND due_at IS NOT NULL;
CREATE INDEX sms_messages_due ON sms_messages(campaign_id, due_at) WHERE status = 'pending' AND due_at IS NOT NULL;

-- version: 20
-- automations
-- A flow (services/automations/) is a draft document plus immutable published versions;
-- enrollments pin the version they entered with. `automation_triggers` holds the triggers
-- of each ACTIVE flow's newest version, flat, so a batch of events becomes enrollments in
-- one INSERT ... SELECT. The per-workspace cursor over contact_events moves in the same
-- transaction as the enrollments it creates.
CREATE TABLE automations (
    id INTEGER PRIMARY KEY,
    workspace_id INTEGER NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'DRAFT' CHECK (status IN ('DRAFT', 'ACTIVE', 'PAUSED', 'ARCHIVED')),
    draft TEXT NOT NULL,                   -- the flow document as last written (JSON)
    current_version INTEGER,               -- the newest published version; NULL before the first
    webhook_secret TEXT NOT NULL,          -- signs the flow's webhook calls (HMAC-SHA256)
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX automations_workspace ON automations(workspace_id, id);

CREATE TABLE automation_versions (
    id INTEGER PRIMARY KEY,
    automation_id INTEGER NOT NULL REFERENCES automations(id) ON DELETE CASCADE,
    version INTEGER NOT NULL,
    flow TEXT NOT NULL,                    -- the validated document, references resolved; never changed
    published_at TEXT NOT NULL,
    UNIQUE (automation_id, version)
);

CREATE TABLE automation_triggers (
    automation_id INTEGER NOT NULL REFERENCES automations(id) ON DELETE CASCADE,
    version_id INTEGER NOT NULL REFERENCES automation_versions(id) ON DELETE CASCADE,
    workspace_id INTEGER NOT NULL,
    position INTEGER NOT NULL,
    event_type TEXT NOT NULL,              -- contact_events.type it reacts to
    matcher TEXT NOT NULL,                 -- JSON: tag_id, field_id, from, to, name, properties
    PRIMARY KEY (automation_id, position)
);
CREATE INDEX automation_triggers_event ON automation_triggers(workspace_id, event_type);

CREATE TABLE automation_cursors (
    workspace_id INTEGER PRIMARY KEY REFERENCES workspaces(id) ON DELETE CASCADE,
    last_event_id INTEGER NOT NULL
);

-- One contact's passage through a flow. Unique on (flow, contact, entry key): 'once' for
-- the default policy, 'event:<id>' or 'manual:<key>' otherwise, so a replayed event enrolls once.
CREATE TABLE automation_enrollments (
    id INTEGER PRIMARY KEY,
    automation_id INTEGER NOT NULL REFERENCES automations(id) ON DELETE CASCADE,
    version_id INTEGER NOT NULL REFERENCES automation_versions(id),
    workspace_id INTEGER NOT NULL,
    contact_id TEXT NOT NULL REFERENCES contacts(id) ON DELETE CASCADE,
    entry_key TEXT NOT NULL,
    entry_event_id INTEGER NOT NULL,       -- its place in the log: the event that enrolled it, or
                                           -- the newest event when enrolled by hand (goals count after it)
    status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused', 'completed', 'exited')),
    step_id TEXT,                          -- the step to run next (NULL once finished)
    seq INTEGER NOT NULL DEFAULT 0,        -- how many steps it ran: the key of its next step run
    next_run_at TEXT,                      -- when the next step is due
    waiting INTEGER NOT NULL DEFAULT 0,    -- 1: in a wait-for-event step (next_run_at = its timeout)
    wait_event_type TEXT,
    wait_matcher TEXT,
    wait_from_event_id INTEGER,            -- only events after this one end the wait
    wait_next TEXT,                        -- where the event leads
    wait_timeout_next TEXT,                -- where the timeout leads
    exit_reason TEXT,                      -- completed, goal, exit step, archived, contact deleted ...
    goal_reached_at TEXT,
    entered_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (automation_id, contact_id, entry_key)
);
-- Due work: only active enrollments are in it, ordered by when they are due (a tick with
-- a million contacts waiting and none due is one index seek).
CREATE INDEX automation_enrollments_due ON automation_enrollments(next_run_at) WHERE status = 'active';
CREATE INDEX automation_enrollments_contact ON automation_enrollments(contact_id, automation_id);
CREATE INDEX automation_enrollments_waiting ON automation_enrollments(contact_id, wait_event_type) WHERE waiting = 1;
CREATE INDEX automation_enrollments_flow ON automation_enrollments(automation_id, status, step_id);

-- Each step an enrollment ran, unique on (enrollment, seq): written in the same transaction
-- as the step's message row or webhook outbox row, so no step runs (or sends) twice.
CREATE TABLE automation_step_runs (
    enrollment_id INTEGER NOT NULL REFERENCES automation_enrollments(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    automation_id INTEGER NOT NULL,
    version_id INTEGER NOT NULL,
    step_id TEXT NOT NULL,
    outcome TEXT NOT NULL,                 -- next, yes, no, timeout, event, sent, skipped, goal, exit ...
    detail TEXT,                           -- why a step was skipped, what a webhook answered ...
    email_message_id INTEGER,
    webhook_id INTEGER,
    ran_at TEXT NOT NULL,
    PRIMARY KEY (enrollment_id, seq)
);
CREATE INDEX automation_step_runs_step ON automation_step_runs(automation_id, version_id, step_id);

-- The hidden campaign that carries one email step's messages through the normal sender
-- (DKIM, tracking, unsubscribe, statistics). email_messages is unique on (campaign,
-- contact), so a contact's second pass through the same step uses the next round.
ALTER TABLE campaigns ADD COLUMN automation_id INTEGER;
CREATE TABLE automation_campaigns (
    version_id INTEGER NOT NULL REFERENCES automation_versions(id) ON DELETE CASCADE,
    step_id TEXT NOT NULL,
    round INTEGER NOT NULL,
    campaign_id TEXT NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
    PRIMARY KEY (version_id, step_id, round)
) WITHOUT ROWID;

-- The webhook outbox: one row per webhook step run, delivered by the automations.webhook job.
CREATE TABLE automation_webhooks (
    id INTEGER PRIMARY KEY,
    workspace_id INTEGER NOT NULL,
    automation_id INTEGER NOT NULL REFERENCES automations(id) ON DELETE CASCADE,
    enrollment_id INTEGER NOT NULL,
    step_id TEXT NOT NULL,
    url TEXT NOT NULL,
    body TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    response_status INTEGER,
    created_at TEXT NOT NULL,
    delivered_at TEXT
);

-- Contacts moved between versions (`mkt automations migrate`): one row per run, with the
-- report of what moved where, stayed or exited.
CREATE TABLE automation_migrations (
    id INTEGER PRIMARY KEY,
    automation_id INTEGER NOT NULL REFERENCES automations(id) ON DELETE CASCADE,
    to_version INTEGER NOT NULL,
    report TEXT NOT NULL,                  -- JSON: the rows `migrate` answered
    created_at TEXT NOT NULL
);

-- Who a flow's segment trigger last saw in its segment (set at publish and resume, then
-- moved by the contacts that have events): entering and leaving are the differences.
CREATE TABLE automation_segment_state (
    automation_id INTEGER NOT NULL REFERENCES automations(id) ON DELETE CASCADE,
    segment_id INTEGER NOT NULL,
    contact_id TEXT NOT NULL REFERENCES contacts(id) ON DELETE CASCADE,
    PRIMARY KEY (automation_id, segment_id, contact_id)
) WITHOUT ROWID;
CREATE INDEX automation_segment_state_contact ON automation_segment_state(contact_id);

-- version: 21
-- automation-steps
-- SMS send steps, frequency caps (services/automations/: steps.py, caps.py, sms.py).
-- A flow's SMS step gets a hidden SMS campaign of its own per round, as its email steps do
-- (sms_campaigns.automation_id; left out of the campaign list): its messages are priced,
-- charged to the ledger (one charge per message, `batch` = the message's own batch) and
-- handed over through the quiet-hours gate like any campaign's. The campaign stays QUEUED
-- with expanded_at set, so it reserves nothing and the automations.sms job hands its
-- messages over.
ALTER TABLE sms_campaigns ADD COLUMN automation_id INTEGER;
CREATE TABLE automation_sms_campaigns (
    version_id INTEGER NOT NULL REFERENCES automation_versions(id) ON DELETE CASCADE,
    step_id TEXT NOT NULL,
    round INTEGER NOT NULL,
    campaign_id TEXT NOT NULL REFERENCES sms_campaigns(id) ON DELETE CASCADE,
    PRIMARY KEY (version_id, step_id, round)
) WITHOUT ROWID;
ALTER TABLE automation_step_runs ADD COLUMN sms_message_id INTEGER;
-- Frequency caps per channel (`mkt automations caps`, /v1/automations/caps): at most
-- max_messages automated messages per contact within window_seconds. They are counted from
-- the message rows: a flow's message that is not exempt (a double opt-in confirmation is)
-- has capped = 1, and a partial index holds just those rows per contact, so campaign
-- messages (which never set it) cost nothing more to write.
CREATE TABLE automation_caps (
    workspace_id INTEGER NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    channel TEXT NOT NULL CHECK (channel IN ('email', 'sms')),
    max_messages INTEGER NOT NULL,
    window_seconds INTEGER NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (workspace_id, channel)
) WITHOUT ROWID;
ALTER TABLE email_messages ADD COLUMN capped INTEGER;
ALTER TABLE sms_messages ADD COLUMN capped INTEGER;
CREATE INDEX email_messages_capped ON email_messages(contact_id, created_at) WHERE capped = 1;
CREATE INDEX sms_messages_capped ON sms_messages(contact_id, created_at) WHERE capped = 1;
-- The SMS ledger's sum up to an entry (services/automations/sms.py): a flow's SMS step checks
-- the balance before each message, and the ledger grows by one charge per automated text,
-- so the step reads the sum at the checkpoint plus the entries after it (ids only grow;
-- entries are never changed or deleted). Moved forward inside the step's transaction.
CREATE TABLE sms_ledger_checkpoints (
    workspace_id INTEGER PRIMARY KEY REFERENCES workspaces(id) ON DELETE CASCADE,
    last_entry_id INTEGER NOT NULL,
    total TEXT NOT NULL                    -- the sum of the workspace's entries up to last_entry_id
);

-- version: 22
-- Nothing changes in a SQLite file. On PostgreSQL the counter triggers that bulk
-- writes fire (contacts inserted and deleted, email_messages inserted) become statement
-- triggers over their transition tables (schema.postgresql.sql step 22 says why); SQLite's
-- row triggers stay, since SQLite has no such cost.

-- version: 23
-- Nothing changes in a SQLite file. On PostgreSQL json_extract and json_type become one
-- expression each, which the planner inlines (schema.postgresql.sql step 23 says why).

-- version: 24
-- Nothing changes in a SQLite file. On PostgreSQL, SMS expansion reads a merge tag's contact
-- field through mkt_field_extract, an inlinable twin of json_extract for a top-level key
-- (schema.postgresql.sql step 24 says why); SQLite's json_extract is already fast.

-- version: 25
-- A contact's time zone candidates, kept on the contact (services/contacts/zones.py): the
-- `timezone` field's value (zone_field) and the id of its phone number's candidate zones
-- (zone_phone_set, a row of phone_zone_sets: phonenumbers' zones of the number, space-
-- separated; the id is derived from that text, so every database gives a list the same id),
-- so resolving a million recipients' zones reads two columns and joins a table of a few rows,
-- not a JSON value and two prefix tables per row. The writers of a contact's phone or data
-- (import, create, upsert, a field set) write the two in the same statement and flip
-- zone_cached between 1 and 2 (zones.FRESH / zones.KEEP); zone_cached NULL means stale: a
-- write that changes phone or data and leaves zone_cached as it was (a writer that does not
-- keep the columns) clears it (the trigger), and the next resolution fills every such row of the
-- workspace in one UPDATE (a partial index finds them). Existing rows start NULL: the first
-- resolution fills them.
ALTER TABLE contacts ADD COLUMN zone_field TEXT;
ALTER TABLE contacts ADD COLUMN zone_phone_set INTEGER;
ALTER TABLE contacts ADD COLUMN zone_cached INTEGER;
CREATE INDEX contacts_zone_stale ON contacts(workspace_id) WHERE zone_cached IS NULL;
CREATE TABLE phone_zone_sets (
    id INTEGER PRIMARY KEY,                 -- zones.set_id(zones): 56 bits of the text's BLAKE2b
    zones TEXT NOT NULL UNIQUE              -- 'America/Boise America/Los_Angeles', phonenumbers' order
);
CREATE TRIGGER contacts_zone_stale AFTER UPDATE OF phone, data ON contacts
WHEN NEW.zone_cached IS NOT NULL AND NEW.zone_cached = OLD.zone_cached
    AND (NEW.phone IS NOT OLD.phone OR NEW.data IS NOT OLD.data) BEGIN
    UPDATE contacts SET zone_cached = NULL WHERE rowid = NEW.rowid;
END;

-- version: 26
-- Many workers on one campaign (services/email/sender.py, services/sms/expansion.py; docs/
-- reliability.md "Many workers"). A worker claims a batch of a campaign's rows (status
-- 'sending') under its job run's claim token, with a claim expiry that its lease renewer
-- pushes forward while it lives; it records a result only while the row still carries its
-- token (fencing: a worker paused past its claim cannot overwrite the new owner's result).
-- An expired claim is claimable again, and the row is then marked uncertain = 1: it may have
-- been handed over before its first worker died, so it may arrive twice.
ALTER TABLE email_messages ADD COLUMN claim_token TEXT;
ALTER TABLE email_messages ADD COLUMN claim_expires_at TEXT;
ALTER TABLE email_messages ADD COLUMN uncertain INTEGER;
ALTER TABLE sms_messages ADD COLUMN claim_token TEXT;
ALTER TABLE sms_messages ADD COLUMN claim_expires_at TEXT;
ALTER TABLE sms_messages ADD COLUMN uncertain INTEGER;
-- The claim reads the queued rows only (partial: sent rows cost the index nothing).
CREATE INDEX email_messages_claim ON email_messages(campaign_id, id) WHERE status = 'queued';
-- The claimed rows by token: the renewer's and the recording's lookup.
CREATE INDEX email_messages_claimed ON email_messages(claim_token) WHERE status = 'sending';
CREATE INDEX sms_messages_claimed ON sms_messages(claim_token) WHERE status = 'sending';

-- version: 27
-- One rate limit across all processes (docs/sending.md "Speed"; issue 22 item 4). Every
-- worker of a workspace, on any machine, books its messages' start times in one row per
-- channel ('email', 'sms'): pace_slots.next_at is the earliest start of the next message,
-- in microseconds since 1970-01-01 UTC (an integer, so the booking is one portable
-- statement: max(next_at, now) + n x interval, with no date function of either engine and
-- no rounding; services/account/pace.py). A workspace's allowance of hourly_emails is
-- reserved when a round is claimed, in the claim's transaction: usage_counters.held counts
-- the messages claimed and not yet recorded in that hour, and email_messages.reserved_hour
-- names the hour whose reservation a claimed message holds (NULL: none). Recording the
-- message moves its reservation to `used` when it was delivered and gives it back otherwise,
-- so `used` still counts delivered messages only and N workers never pass the allowance.
CREATE TABLE pace_slots (
    workspace_id INTEGER NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    channel TEXT NOT NULL,
    next_at INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, channel)
) WITHOUT ROWID;
ALTER TABLE usage_counters ADD COLUMN held INTEGER NOT NULL DEFAULT 0;
ALTER TABLE email_messages ADD COLUMN reserved_hour TEXT;

-- version: 28
-- Nothing changes in a SQLite file. On PostgreSQL, a custom field's typed value
-- (mkt_field_text, mkt_field_number) parses the contact's data once instead of twice: each
-- per-field expression index evaluates its expression and its partial predicate for every
-- contact written, so a workspace's fields cost an import two JSON parses per field per row
-- (schema.postgresql.sql step 28 has the figures).

-- version: 29
-- Nothing changes in a SQLite file. On PostgreSQL, automations compare a trigger's, goal's or
-- wait's values (a custom event's properties, a field's from / to) with the event's as SQLite's
-- json_extract values compare: by JSON type, numbers by value (schema.postgresql.sql step 29).

-- version: 30
-- Nothing changes in a SQLite file. On PostgreSQL, contacts keep their data parsed once as a
-- generated jsonb column that the field functions and field indexes read, instead of parsing
-- the text once per field index for every contact written (schema.postgresql.sql step 30).

-- version: 31
-- Every SMS reply kept, with what it did (services/sms/replies.py; docs/sms.md "Replies and
-- revocation"), so an operator can read the ones the rules did not act on (`mkt sms replies
-- --action none`, GET /v1/sms-replies). action: revoked (the rules read a revocation: STOP,
-- QUIT, END, REVOKE, OPT OUT, CANCEL, UNSUBSCRIBE ... or a phrase of the table), resubscribed
-- (START, UNSTOP), none. rule: what matched ('keyword:stop', 'phrase:en:stop texting me',
-- 'start:unstop'); for a reply that did nothing, a phrase the rules set aside and why
-- ('negated:en:stop texting me', 'question:en:...') or NULL. changed: the contacts whose
-- sms_status it changed (0: already in that state, or no contact has the number).
-- confirmation_id: the sms_messages row of the confirmation text it caused (NULL: none, as for
-- a number already unsubscribed). A person's rows are found by contact_id and by phone (an
-- erase removes both: the body is the person's own words); no foreign key, so deleting a
-- contact decides what happens to them, as with sms_messages.
CREATE TABLE sms_replies (
    id INTEGER PRIMARY KEY,
    workspace_id INTEGER NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    contact_id TEXT,                       -- the number's contact (the first by id when several); NULL: none
    phone TEXT NOT NULL,                   -- From, E.164 as the provider sent it
    body TEXT NOT NULL,
    action TEXT NOT NULL CHECK (action IN ('revoked', 'resubscribed', 'none')),
    rule TEXT,
    changed INTEGER NOT NULL DEFAULT 0,
    confirmation_id INTEGER,
    received_at TEXT NOT NULL
);
CREATE INDEX sms_replies_workspace ON sms_replies(workspace_id, id);
CREATE INDEX sms_replies_action ON sms_replies(workspace_id, action, id);
CREATE INDEX sms_replies_contact ON sms_replies(contact_id) WHERE contact_id IS NOT NULL;
CREATE INDEX sms_replies_phone ON sms_replies(workspace_id, phone);
-- The hidden campaigns that carry revocation confirmations (services/sms/confirmation.py):
-- purpose 'confirmation', QUEUED and expanded from the start like an automation step's, left out
-- of the campaign list and of the quiet-hours gate (a confirmation is not marketing and is due
-- within 5 minutes, 47 CFR 64.1200(a)(12)). NULL: an ordinary campaign.
ALTER TABLE sms_campaigns ADD COLUMN purpose TEXT;

-- version: 32
-- Erasing a person (services/privacy/erase.py; docs/privacy.md): deleting a contact removes
-- every row that holds the person and strips the per-message rows that statistics count.
-- What is kept of the person is a keyed hash of the normalised email address and of the
-- E.164 phone number in `suppressions` (HMAC-SHA256 under the instance secret
-- 'suppression', never the address): creating, upserting or importing that person again is
-- refused until a new double opt-in confirmation or `mkt suppressions remove`. An operator
-- adds a person who asked never to be contacted the same way (reason 'added').
CREATE TABLE suppressions (
    id INTEGER PRIMARY KEY,
    workspace_id INTEGER NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    kind TEXT NOT NULL CHECK (kind IN ('email', 'phone')),
    digest TEXT NOT NULL,                  -- hex HMAC-SHA256 of the normalised value (services/contacts/suppressions.py)
    reason TEXT NOT NULL,                  -- erased (an erase) or added (suppressions add)
    created_at TEXT NOT NULL,
    UNIQUE (workspace_id, kind, digest)
);
-- The webhook calls made about a person, found by their enrollment (the erase deletes them, the
-- export lists them). A person's events are not indexed by contact: the erase and the export read
-- the workspace's log, the erase before its write transaction (services/privacy/erase.py), because
-- an index on contact_id cost every event appended 35% more (214 against 159 us at 1,000,000
-- events, a random leaf each) to spare a rare erase a read of the log (bench/bench_erase.py).
CREATE INDEX automation_webhooks_enrollment ON automation_webhooks(enrollment_id);
-- A flow's statistics count its enrollments and step runs (services/automations/stats.py);
-- an erased person's are deleted, their counts moved here first so the statistics do not
-- change (an enrollment still active or paused is counted exited, 'contact erased').
CREATE TABLE automation_erased (
    automation_id INTEGER NOT NULL REFERENCES automations(id) ON DELETE CASCADE,
    status TEXT NOT NULL,
    exit_reason TEXT NOT NULL,             -- '' for none
    goal_reached INTEGER NOT NULL,         -- 1: the enrollment had reached the flow's goal
    count INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (automation_id, status, exit_reason, goal_reached)
) WITHOUT ROWID;
CREATE TABLE automation_erased_runs (
    automation_id INTEGER NOT NULL REFERENCES automations(id) ON DELETE CASCADE,
    version_id INTEGER NOT NULL REFERENCES automation_versions(id) ON DELETE CASCADE,
    step_id TEXT NOT NULL,
    outcome TEXT NOT NULL,
    detail TEXT NOT NULL,                  -- a skip's or deferral's reason, '' for the other outcomes
    count INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (version_id, step_id, outcome, detail)
) WITHOUT ROWID;

-- version: 33
-- The consent ledger (services/contacts/consents.py; docs/privacy.md "The consent ledger").
-- One row per change of a contact's email consent (`status`) or SMS consent (`sms_status`,
-- NULL read as SUBSCRIBED), appended by the service that made the change, in the change's
-- own transaction: which channel, given / pending / revoked, the status it left, the source
-- (api, command, import with its file and line, confirmation, unsubscribe one-click or
-- page, SMS keyword with the reply's text, bounce, complaint), the wording the person was
-- shown, the IP address and user agent where the person's own request carried them, the
-- time. Rows are never updated; they go only with their contact (deleting a contact erases
-- it, and its ledger with it). AUTOINCREMENT: an id is never used twice, so a reader
-- paging by id never misses or repeats a row.
CREATE TABLE contact_consents (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    workspace_id INTEGER NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    contact_id TEXT NOT NULL REFERENCES contacts(id) ON DELETE CASCADE,
    channel TEXT NOT NULL CHECK (channel IN ('email', 'sms')),
    consent TEXT NOT NULL CHECK (consent IN ('given', 'pending', 'revoked')),
    status TEXT NOT NULL,                  -- the status the change left
    source TEXT NOT NULL,                  -- consents.SOURCES
    consent_text TEXT,                     -- the wording shown when it was collected
    file_name TEXT,                        -- import: the file
    line INTEGER,                          -- import: the line of the file
    message_text TEXT,                     -- SMS keyword: the reply as received
    campaign_id TEXT,                      -- the campaign whose link or reply made the change (no key: kept after it goes)
    ip TEXT,
    user_agent TEXT,
    created_at TEXT NOT NULL
);
-- A contact's ledger (and the cascade of its erase); the workspace's by time (the auditor's export).
CREATE INDEX contact_consents_contact ON contact_consents(contact_id, id);
CREATE INDEX contact_consents_workspace ON contact_consents(workspace_id, created_at, id);

-- One token kind per public path of a message (services/delivery/links.py): open pixel,
-- click, unsubscribe, view online, double opt-in confirmation, and the header that bounce
-- reports return. Before this step a message carried one token of kind "m" on all of them;
-- those mailed tokens keep working where they did, for the messages that existed when this
-- step ran (id <= last_id): no message made later has an "m" token to honour.
CREATE TABLE token_cutovers (
    kind TEXT PRIMARY KEY,
    last_id INTEGER NOT NULL,
    at TEXT NOT NULL
);
INSERT INTO token_cutovers (kind, last_id, at)
    SELECT 'm', COALESCE(MAX(id), 0), strftime('%Y-%m-%dT%H:%M:%fZ', 'now') FROM email_messages;

-- version: 34
-- retired-source
-- A database that `mkt db copy --retire-source` retired once its copy was verified
-- (marketing_cli/storage/copy/retire.py, docs/deploy.md): one row, when and where its data
-- went, and the message every refused write carries. `mkt serve` will not start on it, and
-- the retirement puts on every table a trigger that refuses writes with that message,
-- whichever program makes them. The copy skips the table (its name starts with mkt_copy_).
CREATE TABLE mkt_copy_retired (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    retired_at TEXT NOT NULL,
    successor TEXT NOT NULL,
    message TEXT NOT NULL
);

-- version: 35
-- Bounce classes (services/delivery/bounce_classes.py; docs/deliverability.md "Bounce
-- classes"): the class of a message's synchronous refusal or of its bounce report
-- (unknown_user, unknown_domain, mailbox_full, message_too_large, policy_block,
-- reputation_block, authentication_failure, rate_limit, other_transient, other_permanent);
-- NULL when nothing failed, or for a bounce recorded by hand (`POST /v1/bounces` says only
-- hard or soft). Blocks and authentication failures count against the sending domain
-- (bounces.domain_bounce_classes reads them by campaign), never against the recipient.
ALTER TABLE email_messages ADD COLUMN bounce_class TEXT;
CREATE INDEX email_messages_bounce_class ON email_messages(campaign_id, bounce_class) WHERE bounce_class IS NOT NULL;

-- version: 36
-- The estimate of a campaign's audience (services/estimates/cache.py): the groups last computed
-- from the audience, with the campaign's state then and the moment, as JSON; a list of
-- campaigns reads it instead of counting every campaign's audience again. NULL: none kept.
ALTER TABLE campaigns ADD COLUMN estimate_cache TEXT;
ALTER TABLE sms_campaigns ADD COLUMN estimate_cache TEXT;

-- version: 37
-- Provider lanes (services/delivery/lanes.py, shaping.py; docs/deliverability.md "Provider
-- lanes"). email_messages.lane is the recipient's mailbox provider lane (gmail, yahoo,
-- microsoft, apple; NULL is `other`), set by the send job for the messages queued since its
-- last pass (email_lane_marks.through: the highest message id it looked at), from the
-- domains table lanes.csv and, for the other domains, the lane of their MX hosts, cached in
-- mail_domain_lanes for every worker until expires_at. deferred_since: when a message was
-- first deferred (a 4xx that is not a throttle); it gives up MKT_SEND_GIVE_UP_HOURS later.
-- lane_state: one row per workspace and lane that a relay has pushed back on: its rate now
-- (messages per second, 0 = no rate of its own), the pacer's next start (next_at, in
-- microseconds since 1970, as pace_slots), a suspension, the reply that caused them, and
-- when the rate was last cut or grown (one change per interval, whichever worker sees it).
ALTER TABLE email_messages ADD COLUMN lane TEXT;
ALTER TABLE email_messages ADD COLUMN deferred_since TEXT;
CREATE TABLE email_lane_marks (
    campaign_id TEXT PRIMARY KEY REFERENCES campaigns(id) ON DELETE CASCADE,
    through INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE mail_domain_lanes (
    domain TEXT PRIMARY KEY,
    lane TEXT NOT NULL,
    mx TEXT,                               -- the MX host that decided it (NULL: none, or the lookup failed)
    expires_at TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE lane_state (
    workspace_id INTEGER NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    lane TEXT NOT NULL,
    rate REAL NOT NULL DEFAULT 0,
    next_at INTEGER NOT NULL DEFAULT 0,
    suspended_until TEXT,
    reason TEXT,
    reason_at TEXT,
    cut_at TEXT,
    grown_at TEXT,
    PRIMARY KEY (workspace_id, lane)
) WITHOUT ROWID;

-- version: 38
-- Field values of any length in the per-field indexes contacts_field_<id>. PostgreSQL's btree
-- refuses an entry over 2704 bytes, so there a text-valued field's index holds the value's
-- first 256 characters and a comparison rechecks the whole value (schema.postgresql.sql step
-- 38, marketing_cli/storage/field_sql.py). SQLite's index entries have no such limit: its
-- indexes hold the whole value and stay as they are (nothing to run here).

-- version: 39
-- Circuit breakers (services/delivery/breakers.py; docs/deliverability.md "Circuit
-- breakers"): a workspace's thresholds, in percent as decimal text (NULL: the default:
-- complaints 0.3, unknown users 5, blocks 10), set with `mkt workspace breakers` only (no
-- endpoint changes them). campaigns.breaker_after: after a forced resume, the highest id of
-- the campaign's messages answered then; only later ones count for its breaker (NULL: all).
-- email_messages_complained: the complaints of a campaign's window without reading its rows.
CREATE TABLE breaker_settings (
    workspace_id INTEGER PRIMARY KEY REFERENCES workspaces(id) ON DELETE CASCADE,
    complaints TEXT,
    unknown_users TEXT,
    blocks TEXT
);
ALTER TABLE campaigns ADD COLUMN breaker_after INTEGER;
CREATE INDEX email_messages_complained ON email_messages(campaign_id, id) WHERE complained_at IS NOT NULL;

-- version: 40
-- Warm-up of a sending domain (services/delivery/warmup.py; docs/deliverability.md "Warm-up").
-- domain_warmups: one row per domain warmed up (a new start replaces it): day 1 is the UTC
-- date start_day, schedule the JSON list of [day, lane, cap] rows (a lane missing from a
-- day has no cap that day), origin the schedule's file ("built-in" for the shipped one),
-- stopped_at set by `mkt domains warmup stop`. warmup_counters: the messages of the domain
-- claimed for sending per UTC day and lane, reserved in the claim's transaction (claim.py),
-- so all workers together stay under the day's cap. email_messages.warm_rank: the
-- recipient's engagement when a warm-up holds the send (0 opened or clicked in the last 30
-- days, 1 in the last 90, 2 a contact created in the last 30 days, 3 the rest); a warmed-up
-- claim goes by it (email_messages_warm).
CREATE TABLE domain_warmups (
    domain_id INTEGER PRIMARY KEY REFERENCES domains(id) ON DELETE CASCADE,
    workspace_id INTEGER NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    started_at TEXT NOT NULL,
    start_day TEXT NOT NULL,
    schedule TEXT NOT NULL,
    origin TEXT NOT NULL,
    stopped_at TEXT
);
CREATE INDEX domain_warmups_workspace ON domain_warmups(workspace_id);
CREATE TABLE warmup_counters (
    domain_id INTEGER NOT NULL REFERENCES domains(id) ON DELETE CASCADE,
    day TEXT NOT NULL,
    lane TEXT NOT NULL,
    used INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (domain_id, day, lane)
) WITHOUT ROWID;
ALTER TABLE email_messages ADD COLUMN warm_rank INTEGER;
CREATE INDEX email_messages_warm ON email_messages(campaign_id, warm_rank, id)
    WHERE status = 'queued' AND warm_rank IS NOT NULL;

-- version: 41
-- The field indexes a large import dropped for its load (storage/deferred_indexes.py): one row
-- per import (`owner`: its io lock's owner, contact_io_locks), written in the transaction that
-- dropped them and deleted in the one that builds them again. A row whose import no longer
-- holds its lock (it died) is repaired by the next connection that opens the database.
CREATE TABLE deferred_field_indexes (
    owner TEXT PRIMARY KEY,
    deferred_at TEXT NOT NULL
);

-- version: 42
-- Nothing changes in a SQLite file. On PostgreSQL, contacts' own triggers (the usage counter,
-- the kept time zone's staleness) fire whatever session_replication_role says, so an import
-- batch may skip its statements' per-row foreign key checks and check them once per batch
-- (schema.postgresql.sql step 42, services/contacts/batch_checks.py).
