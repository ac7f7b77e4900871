-- The PostgreSQL form of schema.sql (marketing_cli/postgres.py): the same versions, the same
-- tables, columns, indexes and constraints (tests/platform/test_engines.py compares them).
-- A PostgreSQL database starts at the baseline, version 20 (steps 1-20 of schema.sql in one);
-- every later step is written here too, with the same number.

-- version: 20

-- SQLite's functions that the services' SQL calls, in PostgreSQL (marketing_cli/postgres.py).

-- A SQLite JSON path ('$', '$.a', '$."7"', '$.a[2]') as a text[] for #> / #>>.
CREATE FUNCTION mkt_json_path(path TEXT) RETURNS TEXT[] LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    parts TEXT[] := '{}';
    rest TEXT := substr(path, 2);
    m TEXT[];
BEGIN
    WHILE rest <> '' LOOP
        m := regexp_match(rest, '^\."((?:[^"]|"")*)"(.*)$');
        IF m IS NULL THEN m := regexp_match(rest, '^\.([^.\[]+)(.*)$'); END IF;
        IF m IS NULL THEN m := regexp_match(rest, '^\[(\d+)\](.*)$'); END IF;
        IF m IS NULL THEN RAISE EXCEPTION 'bad JSON path %', path; END IF;
        parts := parts || m[1];
        rest := m[2];
    END LOOP;
    RETURN parts;
END $$;

-- json_extract: a string unquoted, a number as its text, true/false as 1/0, an object or an
-- array as JSON text, JSON null and a missing member as NULL (SQLite's answers, as text).
CREATE FUNCTION json_extract(doc TEXT, path TEXT) RETURNS TEXT LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE jsonb_typeof(v) WHEN 'string' THEN v #>> '{}' WHEN 'boolean' THEN (CASE WHEN v = 'true'::jsonb THEN '1' ELSE '0' END)
                                WHEN 'null' THEN NULL ELSE v::text END
    FROM (SELECT doc::jsonb #> mkt_json_path(path) AS v) AS x
$$;

CREATE FUNCTION json_type(doc TEXT, path TEXT) RETURNS TEXT LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE jsonb_typeof(v) WHEN 'string' THEN 'text' WHEN 'boolean' THEN v::text
                                WHEN 'number' THEN (CASE WHEN v::text ~ '^-?\d+$' THEN 'integer' ELSE 'real' END)
                                ELSE jsonb_typeof(v) END
    FROM (SELECT doc::jsonb #> mkt_json_path(path) AS v) AS x
$$;

CREATE FUNCTION json_array_length(doc TEXT, path TEXT) RETURNS BIGINT LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN jsonb_typeof(v) = 'array' THEN jsonb_array_length(v) WHEN v IS NULL THEN NULL ELSE 0 END
    FROM (SELECT doc::jsonb #> mkt_json_path(path) AS v) AS x
$$;

CREATE FUNCTION json_array_length(doc TEXT) RETURNS BIGINT LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT json_array_length(doc, '$')
$$;

-- json_each(doc [, path]): key, value (SQLite's scalar answer, as json_extract gives it), type.
CREATE FUNCTION json_each(doc TEXT, path TEXT) RETURNS TABLE (key TEXT, value TEXT, type TEXT)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT e.key, json_extract(e.v::text, '$'), json_type(e.v::text, '$')
    FROM (SELECT doc::jsonb #> mkt_json_path(path) AS j) AS x,
         LATERAL (SELECT k AS key, v FROM jsonb_each(CASE WHEN jsonb_typeof(x.j) = 'object' THEN x.j END) AS o(k, v)
                  UNION ALL
                  SELECT (n - 1)::text, v FROM jsonb_array_elements(CASE WHEN jsonb_typeof(x.j) = 'array' THEN x.j END)
                                         WITH ORDINALITY AS a(v, n)) AS e
$$;

CREATE FUNCTION json_each(doc TEXT) RETURNS TABLE (key TEXT, value TEXT, type TEXT)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT * FROM json_each(doc, '$')
$$;

-- RFC 7396 merge patch, as SQLite's json_patch.
CREATE FUNCTION mkt_merge_patch(target JSONB, patch JSONB) RETURNS JSONB LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    k TEXT;
    v JSONB;
    r JSONB;
BEGIN
    IF patch IS NULL OR jsonb_typeof(patch) <> 'object' THEN RETURN patch; END IF;
    r := CASE WHEN target IS NOT NULL AND jsonb_typeof(target) = 'object' THEN target ELSE '{}'::jsonb END;
    FOR k, v IN SELECT * FROM jsonb_each(patch) LOOP
        IF jsonb_typeof(v) = 'null' THEN
            r := r - k;
        ELSE
            r := jsonb_set(r, ARRAY[k], mkt_merge_patch(r -> k, v));
        END IF;
    END LOOP;
    RETURN r;
END $$;

CREATE FUNCTION json_patch(target TEXT, patch TEXT) RETURNS TEXT LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT mkt_merge_patch(target::jsonb, patch::jsonb)::text
$$;

CREATE FUNCTION json_quote(value TEXT) RETURNS TEXT LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN value IS NULL THEN 'null' ELSE to_jsonb(value)::text END
$$;

-- INTEGER, as strpos answers: substr(text, instr(...) + 1) then finds substr(text, integer).
CREATE FUNCTION instr(haystack TEXT, needle TEXT) RETURNS INTEGER LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT strpos(haystack, needle)
$$;

-- SQLite's two-argument max() and min() are GREATEST and LEAST (NULL when either is NULL).
CREATE FUNCTION max(a TEXT, b TEXT) RETURNS TEXT LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN a IS NULL OR b IS NULL THEN NULL ELSE GREATEST(a, b) END
$$;

CREATE FUNCTION min(a TEXT, b TEXT) RETURNS TEXT LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN a IS NULL OR b IS NULL THEN NULL ELSE LEAST(a, b) END
$$;

CREATE FUNCTION max(a BIGINT, b BIGINT) RETURNS BIGINT LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN a IS NULL OR b IS NULL THEN NULL ELSE GREATEST(a, b) END
$$;

CREATE FUNCTION min(a BIGINT, b BIGINT) RETURNS BIGINT LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN a IS NULL OR b IS NULL THEN NULL ELSE LEAST(a, b) END
$$;

CREATE TABLE workspaces (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    name TEXT NOT NULL,
    conversion_tracking BIGINT NOT NULL DEFAULT 0,
    interaction_tracking BIGINT NOT NULL DEFAULT 1,
    is_approved BIGINT NOT NULL DEFAULT 1,
    is_suspended BIGINT NOT NULL DEFAULT 0,
    allow_contacts_without_email BIGINT NOT NULL DEFAULT 0,
    sms_markup TEXT,                       -- NULL: the platform default markup
    sms_sender_id TEXT,
    created_at TEXT NOT NULL
, tracking_url TEXT, sms_quiet_hours_off_at TEXT, timezone TEXT NOT NULL DEFAULT 'UTC');

CREATE TABLE api_keys (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    workspace_id BIGINT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name TEXT,
    prefix TEXT NOT NULL,                  -- the first characters, shown to tell keys apart
    key_hash TEXT NOT NULL UNIQUE,         -- sha256 hex of the whole secret
    created_at TEXT NOT NULL,
    last_used_at TEXT,
    revoked_at TEXT
);

CREATE TABLE plans (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    price TEXT NOT NULL,                   -- USD per period
    conversion_tracking BIGINT NOT NULL
);

CREATE TABLE plan_allowances (
    plan_id BIGINT NOT NULL REFERENCES plans(id),
    resource TEXT NOT NULL,
    allowed BIGINT NOT NULL,
    PRIMARY KEY (plan_id, resource)
);

CREATE TABLE addons (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    price TEXT NOT NULL,
    resource TEXT,                         -- the allowance one unit raises, if any
    amount BIGINT NOT NULL DEFAULT 0      -- by how much
);

CREATE TABLE subscriptions (
    workspace_id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY REFERENCES workspaces(id) ON DELETE CASCADE,
    plan_id BIGINT NOT NULL REFERENCES plans(id),
    status TEXT NOT NULL,
    current_period_start TEXT NOT NULL,
    current_period_end TEXT,
    cancel_at_period_end BIGINT NOT NULL DEFAULT 0
);

CREATE TABLE subscription_addons (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    workspace_id BIGINT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    addon_id BIGINT NOT NULL REFERENCES addons(id),
    quantity BIGINT NOT NULL,
    UNIQUE (workspace_id, addon_id)
);

CREATE TABLE allowance_overrides (
    workspace_id BIGINT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    resource TEXT NOT NULL,
    allowed BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, resource)
);

CREATE TABLE usage_counters (
    workspace_id BIGINT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    resource TEXT NOT NULL,
    period TEXT NOT NULL DEFAULT '',
    used BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (workspace_id, resource, period)
);

CREATE TABLE sms_rates (
    country_code TEXT PRIMARY KEY,
    price TEXT,
    updated_at TEXT NOT NULL
);

CREATE TABLE fields (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    workspace_id BIGINT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    label TEXT NOT NULL,
    merge_tag TEXT NOT NULL,
    type TEXT NOT NULL,
    definition TEXT,
    default_value TEXT,
    "order" BIGINT NOT NULL DEFAULT 0,
    immutable BIGINT NOT NULL DEFAULT 0,
    required BIGINT NOT NULL DEFAULT 0,
    default_region TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (workspace_id, merge_tag),
    UNIQUE (workspace_id, label)
);

CREATE TABLE jobs (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    workspace_id BIGINT REFERENCES workspaces(id) ON DELETE CASCADE,
    type TEXT NOT NULL,
    payload TEXT NOT NULL DEFAULT '{}',
    dedupe_key TEXT,                       -- at most one pending job per key
    status TEXT NOT NULL DEFAULT 'queued', -- queued, running, done, failed
    attempts BIGINT NOT NULL DEFAULT 0,
    max_attempts BIGINT NOT NULL DEFAULT 5,
    run_at TEXT NOT NULL,
    lease_owner TEXT,
    lease_expires_at TEXT,
    last_error TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    finished_at TEXT
);

CREATE TABLE contacts (
    id TEXT PRIMARY KEY,
    workspace_id BIGINT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    email TEXT,                            -- normalised, lower case
    phone TEXT,                            -- E.164
    status TEXT NOT NULL,
    sms_status TEXT,                       -- NULL: never set, reported as SUBSCRIBED
    score BIGINT NOT NULL DEFAULT 0,
    data TEXT NOT NULL DEFAULT '{}',
    total_opens BIGINT NOT NULL DEFAULT 0,
    total_clicks BIGINT NOT NULL DEFAULT 0,
    total_bounces BIGINT NOT NULL DEFAULT 0,
    total_delivered BIGINT NOT NULL DEFAULT 0,
    unique_opens BIGINT NOT NULL DEFAULT 0,    -- deliveries opened at least once
    unique_clicks BIGINT NOT NULL DEFAULT 0,   -- deliveries clicked at least once
    last_opened_at TEXT,
    last_clicked_at TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
, located_timezone TEXT);

CREATE TABLE tags (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    workspace_id BIGINT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (workspace_id, name)
);

CREATE TABLE contact_tags (
    contact_id TEXT NOT NULL REFERENCES contacts(id) ON DELETE CASCADE,
    tag_id BIGINT NOT NULL REFERENCES tags(id) ON DELETE CASCADE,
    PRIMARY KEY (contact_id, tag_id)
);

CREATE TABLE contact_events (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    workspace_id BIGINT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    contact_id TEXT NOT NULL,
    type TEXT NOT NULL,
    payload TEXT NOT NULL DEFAULT '{}',
    created_at TEXT NOT NULL
);

CREATE TABLE contact_io_locks (
    workspace_id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY REFERENCES workspaces(id) ON DELETE CASCADE,
    kind TEXT NOT NULL,                    -- import or export
    owner TEXT NOT NULL,
    started_at TEXT NOT NULL,
    expires_at TEXT NOT NULL
);

CREATE TABLE segments (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    workspace_id BIGINT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    filters TEXT NOT NULL,                 -- the API's filters object, as JSON
    contact_count BIGINT NOT NULL DEFAULT 0,
    counted_at TEXT,                       -- when contact_count was last calculated
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

CREATE TABLE domains (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    workspace_id BIGINT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    domain_name TEXT NOT NULL,             -- lowercase, IDNA (xn--) form, no trailing dot
    domain_code TEXT NOT NULL UNIQUE,      -- random public code (also the return-path label)
    dkim_selector TEXT NOT NULL,
    dkim_private_key TEXT NOT NULL,        -- PEM; never leaves the service layer
    verified BIGINT NOT NULL DEFAULT 0,
    checked_at TEXT,                       -- last DNS verification
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL, operator_verified_at TEXT,
    UNIQUE (workspace_id, domain_name)
);

CREATE TABLE dns_records (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    domain_id BIGINT NOT NULL REFERENCES domains(id) ON DELETE CASCADE,
    position BIGINT NOT NULL,
    purpose TEXT NOT NULL,                 -- spf, dkim, dmarc, return_path
    type TEXT NOT NULL,                    -- TXT, MX or CNAME
    host TEXT NOT NULL,
    value TEXT NOT NULL,
    priority BIGINT,
    mandatory BIGINT NOT NULL,
    verified BIGINT NOT NULL DEFAULT 0,
    UNIQUE (domain_id, position)
);

CREATE TABLE sender_identities (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    workspace_id BIGINT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    domain_id BIGINT NOT NULL REFERENCES domains(id) ON DELETE CASCADE,
    local_part TEXT NOT NULL,
    display_name TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (domain_id, local_part)
);

CREATE TABLE templates (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    workspace_id BIGINT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    type TEXT NOT NULL CHECK (type IN ('EDITOR', 'CODE')),
    import_format TEXT CHECK (import_format IN ('html', 'zip', 'url')),  -- NULL for EDITOR
    body_json TEXT,                        -- the editor document (JSON) of an EDITOR template
    body_html TEXT,                        -- the HTML of a CODE template, as uploaded
    entry_file TEXT,                       -- zip: the entry file's path in the archive
    source_url TEXT,                       -- url: the address the HTML was fetched from
    size BIGINT NOT NULL DEFAULT 0,       -- bytes of body_html (UTF-8) or body_json
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

CREATE TABLE template_assets (
    template_id BIGINT NOT NULL REFERENCES templates(id) ON DELETE CASCADE,
    path TEXT NOT NULL,                    -- relative to the entry file's folder: images/logo.png
    content_type TEXT NOT NULL,
    size BIGINT NOT NULL,
    content BYTEA NOT NULL,
    PRIMARY KEY (template_id, path)
);

CREATE TABLE campaigns (
    id TEXT PRIMARY KEY,                   -- 24 hex
    workspace_id BIGINT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    type TEXT NOT NULL CHECK (type IN ('SINGLE_VARIANT', 'AB_TESTING')),
    status TEXT NOT NULL DEFAULT 'DRAFT',  -- DRAFT QUEUED PREPROCESSING IN_REVIEW SENDING SENT CANCELLED PAUSED
    sender_identity_id BIGINT REFERENCES sender_identities(id) ON DELETE SET NULL,
    reply_to TEXT,                         -- JSON {display_name, local_part, domain_name} or NULL
    audience TEXT,                         -- JSON array of audience objects, or NULL
    scheduled_at TEXT,
    ab_test TEXT,                          -- JSON of the schedule's ab_test, or NULL
    status_detail TEXT,                    -- why a campaign paused or was held in review
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
, send_started_at TEXT, sent_at TEXT, outbox_delivered BIGINT NOT NULL DEFAULT 0, outbox_path TEXT, local_time TEXT, local_date TEXT, local_starts_at TEXT, local_time_missed TEXT, local_time_skipped BIGINT NOT NULL DEFAULT 0, automation_id BIGINT);

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

CREATE TABLE test_email_sends (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    workspace_id BIGINT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    campaign_id TEXT,
    recipient TEXT NOT NULL,
    sent_at TEXT NOT NULL
);

CREATE TABLE campaign_previews (
    variant_id TEXT PRIMARY KEY REFERENCES campaign_variants(id) ON DELETE CASCADE,
    content_type TEXT NOT NULL,
    body BYTEA NOT NULL,
    digest TEXT NOT NULL,                  -- of the HTML and subject it was made from
    created_at TEXT NOT NULL
);

CREATE TABLE sms_campaigns (
    id TEXT PRIMARY KEY,                   -- 24 hex
    workspace_id BIGINT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
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
, status_detail TEXT, local_time TEXT, local_date TEXT, local_starts_at TEXT, local_time_missed TEXT, local_time_skipped BIGINT NOT NULL DEFAULT 0);

CREATE TABLE sms_ledger (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    workspace_id BIGINT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    kind TEXT NOT NULL CHECK (kind IN ('top_up', 'charge', 'refund')),
    amount TEXT NOT NULL,                  -- signed decimal string: top-ups and refunds > 0, charges < 0
    campaign_id TEXT,
    batch BIGINT,                         -- the expansion batch a charge pays for
    reason TEXT NOT NULL,
    created_at TEXT NOT NULL
);

CREATE TABLE sms_messages (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    campaign_id TEXT NOT NULL REFERENCES sms_campaigns(id) ON DELETE CASCADE,
    contact_id TEXT NOT NULL,
    batch BIGINT NOT NULL,
    phone TEXT NOT NULL,                   -- E.164
    country TEXT,                          -- ISO 3166-1 alpha-2 from the number
    body TEXT,                             -- NULL: the campaign's message as written (no merge tags)
    encoding TEXT NOT NULL,
    segments BIGINT NOT NULL,
    price_units BIGINT NOT NULL DEFAULT 0,  -- the charge in 1/100000 USD (0 when suppressed)
    status TEXT NOT NULL,
    provider TEXT,
    provider_ref TEXT,                     -- the provider's id for the message (Twilio's sid)
    handed_at TEXT,
    delivered_at TEXT,
    failed_at TEXT,
    unsubscribed_at TEXT,
    created_at TEXT NOT NULL, error_code TEXT, error_message TEXT, carrier_at TEXT, held_until TEXT, held_reason TEXT, due_at TEXT, zone TEXT, zone_source TEXT,
    UNIQUE (campaign_id, contact_id)
);

CREATE TABLE sms_clicks (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    message_id BIGINT NOT NULL REFERENCES sms_messages(id) ON DELETE CASCADE,
    url TEXT NOT NULL,
    country TEXT,
    device_type TEXT,
    operating_system TEXT,
    clicked_at TEXT NOT NULL
);

CREATE TABLE sms_outbox (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    workspace_id BIGINT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    message_id BIGINT NOT NULL UNIQUE REFERENCES sms_messages(id) ON DELETE CASCADE,
    campaign_id TEXT NOT NULL,
    sender TEXT NOT NULL,
    recipient TEXT NOT NULL,
    body TEXT NOT NULL,
    segments BIGINT NOT NULL,
    created_at TEXT NOT NULL
);

CREATE TABLE email_messages (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
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
    attempts BIGINT NOT NULL DEFAULT 0,
    failure_reason TEXT,
    created_at TEXT NOT NULL,
    delivered_at TEXT,
    opened_at TEXT,                        -- first human open
    open_count BIGINT NOT NULL DEFAULT 0, -- human opens
    machine_opened_at TEXT,                -- first open by a privacy proxy or scanner
    clicked_at TEXT,                       -- first human click
    unsubscribed_at TEXT,
    bounced_at TEXT,
    bounce_type TEXT CHECK (bounce_type IN ('hard', 'soft')),
    complained_at TEXT,
    failed_at TEXT, retry_at TEXT, due_at TEXT, zone TEXT, zone_source TEXT,
    UNIQUE (campaign_id, contact_id)
);

CREATE TABLE email_links (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    campaign_id TEXT NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
    variant_id TEXT NOT NULL REFERENCES campaign_variants(id) ON DELETE CASCADE,
    url TEXT NOT NULL,
    total_clicks BIGINT NOT NULL DEFAULT 0,   -- every human click
    unique_clicks BIGINT NOT NULL DEFAULT 0,  -- recipients who clicked it (first click each)
    UNIQUE (campaign_id, variant_id, url)
);

CREATE TABLE email_clicks (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    message_id BIGINT NOT NULL REFERENCES email_messages(id) ON DELETE CASCADE,
    link_id BIGINT NOT NULL REFERENCES email_links(id) ON DELETE CASCADE,
    clicked_at TEXT NOT NULL,
    device_type TEXT NOT NULL,             -- desktop, mobile, tablet, other
    os TEXT NOT NULL,                      -- the OS family as ua-parser names it, or Other
    country TEXT NOT NULL,                 -- ISO 3166-1 alpha-2, or Unknown
    machine BIGINT NOT NULL DEFAULT 0
);

CREATE TABLE email_campaign_counters (
    campaign_id TEXT NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
    variant_id TEXT NOT NULL,
    recipients BIGINT NOT NULL DEFAULT 0,
    delivered BIGINT NOT NULL DEFAULT 0,
    opened BIGINT NOT NULL DEFAULT 0,
    clicked BIGINT NOT NULL DEFAULT 0,
    bounced BIGINT NOT NULL DEFAULT 0,
    unsubscribed BIGINT NOT NULL DEFAULT 0,
    complained BIGINT NOT NULL DEFAULT 0,
    failed BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (campaign_id, variant_id)
);

CREATE TABLE email_campaign_breakdowns (
    campaign_id TEXT NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
    dimension TEXT NOT NULL CHECK (dimension IN ('country', 'device_type', 'os', 'provider')),
    key TEXT NOT NULL,
    count BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (campaign_id, dimension, key)
);

CREATE TABLE instance_secrets (
    name TEXT PRIMARY KEY,
    value BYTEA NOT NULL
);

CREATE TABLE email_ab_holdout (
    campaign_id TEXT NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
    contact_id TEXT NOT NULL,
    email TEXT NOT NULL,
    PRIMARY KEY (campaign_id, contact_id)
);

CREATE TABLE sms_provider_settings (
    workspace_id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY REFERENCES workspaces(id) ON DELETE CASCADE,
    provider TEXT NOT NULL,                -- outbox | twilio
    account_sid TEXT,
    auth_token TEXT,
    base_url TEXT,
    updated_at TEXT NOT NULL
);

CREATE TABLE sms_links (
    message_id BIGINT NOT NULL REFERENCES sms_messages(id) ON DELETE CASCADE,
    position BIGINT NOT NULL,
    url TEXT NOT NULL,
    PRIMARY KEY (message_id, position)
);

CREATE TABLE mail_transport_settings (
    workspace_id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY REFERENCES workspaces(id) ON DELETE CASCADE,
    transport TEXT NOT NULL CHECK (transport IN ('smtp', 'outbox')),
    smtp_url TEXT,                         -- smtp[s]://[user@]host[:port][?...], no password
    smtp_password TEXT,                    -- as written in the URL (percent-encoded)
    outbox_path TEXT,                      -- absolute; NULL: outbox/ beside the database
    updated_at TEXT NOT NULL
);

CREATE TABLE email_campaign_hours (
    campaign_id TEXT NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
    hour TEXT NOT NULL,
    variant_id TEXT NOT NULL,
    sent BIGINT NOT NULL DEFAULT 0,       -- handed to the transport: delivered or failed
    delivered BIGINT NOT NULL DEFAULT 0,
    unique_opens BIGINT NOT NULL DEFAULT 0,
    total_opens BIGINT NOT NULL DEFAULT 0,
    unique_clicks BIGINT NOT NULL DEFAULT 0,
    total_clicks BIGINT NOT NULL DEFAULT 0,
    unsubscribed BIGINT NOT NULL DEFAULT 0,
    bounced BIGINT NOT NULL DEFAULT 0,
    complained BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (campaign_id, hour, variant_id)
);

CREATE TABLE sms_campaign_hours (
    campaign_id TEXT NOT NULL REFERENCES sms_campaigns(id) ON DELETE CASCADE,
    hour TEXT NOT NULL,
    sent BIGINT NOT NULL DEFAULT 0,
    delivered BIGINT NOT NULL DEFAULT 0,
    failed BIGINT NOT NULL DEFAULT 0,
    unique_clicks BIGINT NOT NULL DEFAULT 0,
    total_clicks BIGINT NOT NULL DEFAULT 0,
    unsubscribed BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (campaign_id, hour)
);

CREATE TABLE operator_log (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    workspace_id BIGINT REFERENCES workspaces(id) ON DELETE CASCADE,
    actor TEXT NOT NULL,                   -- the operating-system user who ran the command
    action TEXT NOT NULL,                  -- sms.quiet_hours.off, sms.quiet_hours.on
    detail TEXT,
    created_at TEXT NOT NULL
);

CREATE TABLE campaign_series (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    workspace_id BIGINT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
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

CREATE TABLE campaign_series_occurrences (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    series_id BIGINT NOT NULL REFERENCES campaign_series(id) ON DELETE CASCADE,
    occurrence_at TEXT NOT NULL,           -- UTC: the rule's instant
    status TEXT NOT NULL CHECK (status IN ('SENT', 'MISSED', 'SKIPPED', 'FAILED')),
    campaign_id TEXT REFERENCES campaigns(id) ON DELETE SET NULL,  -- the copy, when one was made
    reason TEXT,
    item_count BIGINT,                    -- feed items in the copy
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (series_id, occurrence_at)
);

CREATE TABLE automations (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    workspace_id BIGINT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'DRAFT' CHECK (status IN ('DRAFT', 'ACTIVE', 'PAUSED', 'ARCHIVED')),
    draft TEXT NOT NULL,                   -- the flow document as last written (JSON)
    current_version BIGINT,               -- the newest published version; NULL before the first
    webhook_secret TEXT NOT NULL,          -- signs the flow's webhook calls (HMAC-SHA256)
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

CREATE TABLE automation_versions (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    automation_id BIGINT NOT NULL REFERENCES automations(id) ON DELETE CASCADE,
    version BIGINT NOT NULL,
    flow TEXT NOT NULL,                    -- the validated document, references resolved; never changed
    published_at TEXT NOT NULL,
    UNIQUE (automation_id, version)
);

CREATE TABLE automation_triggers (
    automation_id BIGINT NOT NULL REFERENCES automations(id) ON DELETE CASCADE,
    version_id BIGINT NOT NULL REFERENCES automation_versions(id) ON DELETE CASCADE,
    workspace_id BIGINT NOT NULL,
    position BIGINT NOT NULL,
    event_type TEXT NOT NULL,              -- contact_events.type it reacts to
    matcher TEXT NOT NULL,                 -- JSON: tag_id, field_id, from, to, name, properties
    PRIMARY KEY (automation_id, position)
);

CREATE TABLE automation_cursors (
    workspace_id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY REFERENCES workspaces(id) ON DELETE CASCADE,
    last_event_id BIGINT NOT NULL
);

CREATE TABLE automation_enrollments (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    automation_id BIGINT NOT NULL REFERENCES automations(id) ON DELETE CASCADE,
    version_id BIGINT NOT NULL REFERENCES automation_versions(id),
    workspace_id BIGINT NOT NULL,
    contact_id TEXT NOT NULL REFERENCES contacts(id) ON DELETE CASCADE,
    entry_key TEXT NOT NULL,
    entry_event_id BIGINT NOT NULL,       -- its place in the log: the event that enrolled it, or
                                           -- the newest event when enrolled by hand (goals count after it)
    status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused', 'completed', 'exited')),
    step_id TEXT,                          -- the step to run next (NULL once finished)
    seq BIGINT NOT NULL DEFAULT 0,        -- how many steps it ran: the key of its next step run
    next_run_at TEXT,                      -- when the next step is due
    waiting BIGINT NOT NULL DEFAULT 0,    -- 1: in a wait-for-event step (next_run_at = its timeout)
    wait_event_type TEXT,
    wait_matcher TEXT,
    wait_from_event_id BIGINT,            -- only events after this one end the wait
    wait_next TEXT,                        -- where the event leads
    wait_timeout_next TEXT,                -- where the timeout leads
    exit_reason TEXT,                      -- completed, goal, exit step, archived, contact deleted ...
    goal_reached_at TEXT,
    entered_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (automation_id, contact_id, entry_key)
);

CREATE TABLE automation_step_runs (
    enrollment_id BIGINT NOT NULL REFERENCES automation_enrollments(id) ON DELETE CASCADE,
    seq BIGINT NOT NULL,
    automation_id BIGINT NOT NULL,
    version_id BIGINT NOT NULL,
    step_id TEXT NOT NULL,
    outcome TEXT NOT NULL,                 -- next, yes, no, timeout, event, sent, skipped, goal, exit ...
    detail TEXT,                           -- why a step was skipped, what a webhook answered ...
    email_message_id BIGINT,
    webhook_id BIGINT,
    ran_at TEXT NOT NULL,
    PRIMARY KEY (enrollment_id, seq)
);

CREATE TABLE automation_campaigns (
    version_id BIGINT NOT NULL REFERENCES automation_versions(id) ON DELETE CASCADE,
    step_id TEXT NOT NULL,
    round BIGINT NOT NULL,
    campaign_id TEXT NOT NULL REFERENCES campaigns(id) ON DELETE CASCADE,
    PRIMARY KEY (version_id, step_id, round)
);

CREATE TABLE automation_webhooks (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    workspace_id BIGINT NOT NULL,
    automation_id BIGINT NOT NULL REFERENCES automations(id) ON DELETE CASCADE,
    enrollment_id BIGINT NOT NULL,
    step_id TEXT NOT NULL,
    url TEXT NOT NULL,
    body TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts BIGINT NOT NULL DEFAULT 0,
    last_error TEXT,
    response_status BIGINT,
    created_at TEXT NOT NULL,
    delivered_at TEXT
);

CREATE TABLE automation_migrations (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    automation_id BIGINT NOT NULL REFERENCES automations(id) ON DELETE CASCADE,
    to_version BIGINT NOT NULL,
    report TEXT NOT NULL,                  -- JSON: the rows `migrate` answered
    created_at TEXT NOT NULL
);

CREATE TABLE automation_segment_state (
    automation_id BIGINT NOT NULL REFERENCES automations(id) ON DELETE CASCADE,
    segment_id BIGINT NOT NULL,
    contact_id TEXT NOT NULL REFERENCES contacts(id) ON DELETE CASCADE,
    PRIMARY KEY (automation_id, segment_id, contact_id)
);

CREATE INDEX api_keys_workspace ON api_keys(workspace_id);

CREATE INDEX jobs_due ON jobs(status, run_at);

CREATE UNIQUE INDEX contacts_email ON contacts(workspace_id, email);

CREATE INDEX contacts_phone ON contacts(workspace_id, phone) WHERE phone IS NOT NULL;

CREATE INDEX contacts_created ON contacts(workspace_id, created_at, id);

CREATE INDEX contacts_updated ON contacts(workspace_id, updated_at, id);

CREATE INDEX contact_tags_tag ON contact_tags(tag_id, contact_id);

CREATE INDEX contact_events_workspace ON contact_events(workspace_id, id);

CREATE INDEX segments_workspace ON segments(workspace_id);

CREATE UNIQUE INDEX jobs_pending_key ON jobs(dedupe_key)
    WHERE dedupe_key IS NOT NULL AND status = 'queued';

CREATE INDEX jobs_dedupe_key ON jobs(dedupe_key, updated_at) WHERE dedupe_key IS NOT NULL;

CREATE INDEX jobs_finished ON jobs(finished_at) WHERE finished_at IS NOT NULL;

CREATE INDEX sender_identities_workspace ON sender_identities(workspace_id);

CREATE INDEX templates_workspace ON templates(workspace_id, id);

CREATE INDEX campaigns_workspace ON campaigns(workspace_id, created_at, id);

CREATE INDEX campaigns_due ON campaigns(status, scheduled_at);

CREATE INDEX test_email_sends_workspace ON test_email_sends(workspace_id, sent_at);

CREATE INDEX sms_campaigns_workspace ON sms_campaigns(workspace_id, created_at, id);

CREATE INDEX sms_campaigns_status ON sms_campaigns(workspace_id, status, created_at, id);

CREATE INDEX sms_ledger_workspace ON sms_ledger(workspace_id, id);

CREATE INDEX sms_ledger_campaign ON sms_ledger(campaign_id, kind) WHERE campaign_id IS NOT NULL;

CREATE UNIQUE INDEX sms_ledger_batch ON sms_ledger(campaign_id, batch) WHERE kind = 'charge';

CREATE INDEX sms_messages_batch ON sms_messages(campaign_id, batch);

CREATE INDEX sms_clicks_message ON sms_clicks(message_id, id);

CREATE INDEX sms_outbox_workspace ON sms_outbox(workspace_id, id);

CREATE INDEX email_messages_status ON email_messages(campaign_id, status, id);

CREATE UNIQUE INDEX email_messages_smtp_id ON email_messages(smtp_message_id)
    WHERE smtp_message_id IS NOT NULL;

CREATE UNIQUE INDEX email_messages_token ON email_messages(token) WHERE token IS NOT NULL;

CREATE INDEX email_messages_contact ON email_messages(contact_id, id);

CREATE INDEX email_clicks_message ON email_clicks(message_id, link_id);

CREATE INDEX email_clicks_link ON email_clicks(link_id);

CREATE INDEX sms_provider_settings_account ON sms_provider_settings(account_sid);

CREATE INDEX sms_messages_pending ON sms_messages(campaign_id, id) WHERE status = 'pending';

CREATE INDEX sms_messages_sending ON sms_messages(campaign_id, id) WHERE status = 'sending';

CREATE INDEX sms_messages_provider_ref ON sms_messages(provider_ref) WHERE provider_ref IS NOT NULL;

CREATE INDEX sms_messages_phone ON sms_messages(phone, handed_at) WHERE handed_at IS NOT NULL;

CREATE INDEX sms_messages_held ON sms_messages(campaign_id, held_until) WHERE status = 'held';

CREATE INDEX operator_log_workspace ON operator_log(workspace_id, id);

CREATE INDEX campaign_series_workspace ON campaign_series(workspace_id, id);

CREATE UNIQUE INDEX campaign_series_live ON campaign_series(campaign_id) WHERE status IN ('ACTIVE', 'PAUSED');

CREATE INDEX email_messages_due ON email_messages(campaign_id, due_at) WHERE status = 'queued' AND due_at IS NOT NULL;

CREATE INDEX sms_messages_due ON sms_messages(campaign_id, due_at) WHERE status = 'pending' AND due_at IS NOT NULL;

CREATE INDEX automations_workspace ON automations(workspace_id, id);

CREATE INDEX automation_triggers_event ON automation_triggers(workspace_id, event_type);

CREATE INDEX automation_enrollments_due ON automation_enrollments(next_run_at) WHERE status = 'active';

CREATE INDEX automation_enrollments_contact ON automation_enrollments(contact_id, automation_id);

CREATE INDEX automation_enrollments_waiting ON automation_enrollments(contact_id, wait_event_type) WHERE waiting = 1;

CREATE INDEX automation_enrollments_flow ON automation_enrollments(automation_id, status, step_id);

CREATE INDEX automation_step_runs_step ON automation_step_runs(automation_id, version_id, step_id);

CREATE INDEX automation_segment_state_contact ON automation_segment_state(contact_id);

CREATE FUNCTION api_keys_count_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO usage_counters (workspace_id, resource, period, used)
    VALUES (NEW.workspace_id, 'users', '', 1)
    ON CONFLICT (workspace_id, resource, period) DO UPDATE SET used = usage_counters.used + 1;
    RETURN NULL;
END $$;

CREATE TRIGGER api_keys_count_insert AFTER INSERT ON api_keys FOR EACH ROW EXECUTE FUNCTION api_keys_count_insert();

CREATE FUNCTION api_keys_count_revoke() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE usage_counters SET used = used - 1
    WHERE workspace_id = NEW.workspace_id AND resource = 'users' AND period = '';
    RETURN NULL;
END $$;

CREATE TRIGGER api_keys_count_revoke AFTER UPDATE OF revoked_at ON api_keys FOR EACH ROW
WHEN (OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL) EXECUTE FUNCTION api_keys_count_revoke();

CREATE FUNCTION contacts_count_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO usage_counters (workspace_id, resource, period, used)
    VALUES (NEW.workspace_id, 'contacts', '', 1)
    ON CONFLICT (workspace_id, resource, period) DO UPDATE SET used = usage_counters.used + 1;
    RETURN NULL;
END $$;

CREATE TRIGGER contacts_count_insert AFTER INSERT ON contacts FOR EACH ROW EXECUTE FUNCTION contacts_count_insert();

CREATE FUNCTION contacts_count_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE usage_counters SET used = used - 1
    WHERE workspace_id = OLD.workspace_id AND resource = 'contacts' AND period = '';
    RETURN NULL;
END $$;

CREATE TRIGGER contacts_count_delete AFTER DELETE ON contacts FOR EACH ROW EXECUTE FUNCTION contacts_count_delete();

CREATE FUNCTION segments_count_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO usage_counters (workspace_id, resource, period, used)
    VALUES (NEW.workspace_id, 'segments', '', 1)
    ON CONFLICT (workspace_id, resource, period) DO UPDATE SET used = usage_counters.used + 1;
    RETURN NULL;
END $$;

CREATE TRIGGER segments_count_insert AFTER INSERT ON segments FOR EACH ROW EXECUTE FUNCTION segments_count_insert();

CREATE FUNCTION segments_count_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE usage_counters SET used = used - 1
    WHERE workspace_id = OLD.workspace_id AND resource = 'segments' AND period = '';
    RETURN NULL;
END $$;

CREATE TRIGGER segments_count_delete AFTER DELETE ON segments FOR EACH ROW EXECUTE FUNCTION segments_count_delete();

CREATE FUNCTION domains_count_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO usage_counters (workspace_id, resource, period, used)
    VALUES (NEW.workspace_id, 'domains', '', 1)
    ON CONFLICT (workspace_id, resource, period) DO UPDATE SET used = usage_counters.used + 1;
    RETURN NULL;
END $$;

CREATE TRIGGER domains_count_insert AFTER INSERT ON domains FOR EACH ROW EXECUTE FUNCTION domains_count_insert();

CREATE FUNCTION domains_count_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE usage_counters SET used = used - 1
    WHERE workspace_id = OLD.workspace_id AND resource = 'domains' AND period = '';
    RETURN NULL;
END $$;

CREATE TRIGGER domains_count_delete AFTER DELETE ON domains FOR EACH ROW EXECUTE FUNCTION domains_count_delete();

CREATE FUNCTION sms_ledger_no_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the SMS ledger is append-only';
    RETURN NEW;
END $$;

CREATE TRIGGER sms_ledger_no_update BEFORE UPDATE ON sms_ledger FOR EACH ROW EXECUTE FUNCTION sms_ledger_no_update();

CREATE FUNCTION email_messages_count_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO email_campaign_counters (campaign_id, variant_id, recipients)
    VALUES (NEW.campaign_id, NEW.variant_id, 1)
    ON CONFLICT (campaign_id, variant_id) DO UPDATE SET recipients = email_campaign_counters.recipients + 1;
    RETURN NULL;
END $$;

CREATE TRIGGER email_messages_count_insert AFTER INSERT ON email_messages FOR EACH ROW EXECUTE FUNCTION email_messages_count_insert();

CREATE FUNCTION email_messages_count_delivered() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO email_campaign_counters (campaign_id, variant_id, delivered)
    VALUES (NEW.campaign_id, NEW.variant_id, 1)
    ON CONFLICT (campaign_id, variant_id) DO UPDATE SET delivered = email_campaign_counters.delivered + 1;
    INSERT INTO email_campaign_breakdowns (campaign_id, dimension, key, count)
    VALUES (NEW.campaign_id, 'provider', NEW.provider, 1)
    ON CONFLICT (campaign_id, dimension, key) DO UPDATE SET count = email_campaign_breakdowns.count + 1;
    RETURN NULL;
END $$;

CREATE TRIGGER email_messages_count_delivered AFTER UPDATE OF delivered_at ON email_messages FOR EACH ROW
WHEN (OLD.delivered_at IS NULL AND NEW.delivered_at IS NOT NULL) EXECUTE FUNCTION email_messages_count_delivered();

CREATE FUNCTION email_messages_count_opened() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO email_campaign_counters (campaign_id, variant_id, opened)
    VALUES (NEW.campaign_id, NEW.variant_id, 1)
    ON CONFLICT (campaign_id, variant_id) DO UPDATE SET opened = email_campaign_counters.opened + 1;
    RETURN NULL;
END $$;

CREATE TRIGGER email_messages_count_opened AFTER UPDATE OF opened_at ON email_messages FOR EACH ROW
WHEN (OLD.opened_at IS NULL AND NEW.opened_at IS NOT NULL) EXECUTE FUNCTION email_messages_count_opened();

CREATE FUNCTION email_messages_count_clicked() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO email_campaign_counters (campaign_id, variant_id, clicked)
    VALUES (NEW.campaign_id, NEW.variant_id, 1)
    ON CONFLICT (campaign_id, variant_id) DO UPDATE SET clicked = email_campaign_counters.clicked + 1;
    RETURN NULL;
END $$;

CREATE TRIGGER email_messages_count_clicked AFTER UPDATE OF clicked_at ON email_messages FOR EACH ROW
WHEN (OLD.clicked_at IS NULL AND NEW.clicked_at IS NOT NULL) EXECUTE FUNCTION email_messages_count_clicked();

CREATE FUNCTION email_messages_count_unsubscribed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO email_campaign_counters (campaign_id, variant_id, unsubscribed)
    VALUES (NEW.campaign_id, NEW.variant_id, 1)
    ON CONFLICT (campaign_id, variant_id) DO UPDATE SET unsubscribed = email_campaign_counters.unsubscribed + 1;
    RETURN NULL;
END $$;

CREATE TRIGGER email_messages_count_unsubscribed AFTER UPDATE OF unsubscribed_at ON email_messages FOR EACH ROW
WHEN (OLD.unsubscribed_at IS NULL AND NEW.unsubscribed_at IS NOT NULL) EXECUTE FUNCTION email_messages_count_unsubscribed();

CREATE FUNCTION email_messages_count_bounced() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO email_campaign_counters (campaign_id, variant_id, bounced)
    VALUES (NEW.campaign_id, NEW.variant_id, 1)
    ON CONFLICT (campaign_id, variant_id) DO UPDATE SET bounced = email_campaign_counters.bounced + 1;
    RETURN NULL;
END $$;

CREATE TRIGGER email_messages_count_bounced AFTER UPDATE OF bounced_at ON email_messages FOR EACH ROW
WHEN (OLD.bounced_at IS NULL AND NEW.bounced_at IS NOT NULL) EXECUTE FUNCTION email_messages_count_bounced();

CREATE FUNCTION email_messages_count_complained() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO email_campaign_counters (campaign_id, variant_id, complained)
    VALUES (NEW.campaign_id, NEW.variant_id, 1)
    ON CONFLICT (campaign_id, variant_id) DO UPDATE SET complained = email_campaign_counters.complained + 1;
    RETURN NULL;
END $$;

CREATE TRIGGER email_messages_count_complained AFTER UPDATE OF complained_at ON email_messages FOR EACH ROW
WHEN (OLD.complained_at IS NULL AND NEW.complained_at IS NOT NULL) EXECUTE FUNCTION email_messages_count_complained();

CREATE FUNCTION email_messages_count_failed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO email_campaign_counters (campaign_id, variant_id, failed)
    VALUES (NEW.campaign_id, NEW.variant_id, 1)
    ON CONFLICT (campaign_id, variant_id) DO UPDATE SET failed = email_campaign_counters.failed + 1;
    RETURN NULL;
END $$;

CREATE TRIGGER email_messages_count_failed AFTER UPDATE OF failed_at ON email_messages FOR EACH ROW
WHEN (OLD.failed_at IS NULL AND NEW.failed_at IS NOT NULL) EXECUTE FUNCTION email_messages_count_failed();

CREATE FUNCTION email_hours_delivered() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO email_campaign_hours (campaign_id, hour, variant_id, sent, delivered)
    VALUES (NEW.campaign_id, substr(NEW.delivered_at, 1, 13), NEW.variant_id, 1, 1)
    ON CONFLICT (campaign_id, hour, variant_id) DO UPDATE SET sent = email_campaign_hours.sent + 1, delivered = email_campaign_hours.delivered + 1;
    RETURN NULL;
END $$;

CREATE TRIGGER email_hours_delivered AFTER UPDATE OF delivered_at ON email_messages FOR EACH ROW
WHEN (OLD.delivered_at IS NULL AND NEW.delivered_at IS NOT NULL) EXECUTE FUNCTION email_hours_delivered();

CREATE FUNCTION email_hours_failed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO email_campaign_hours (campaign_id, hour, variant_id, sent)
    VALUES (NEW.campaign_id, substr(NEW.failed_at, 1, 13), NEW.variant_id, 1)
    ON CONFLICT (campaign_id, hour, variant_id) DO UPDATE SET sent = email_campaign_hours.sent + 1;
    RETURN NULL;
END $$;

CREATE TRIGGER email_hours_failed AFTER UPDATE OF failed_at ON email_messages FOR EACH ROW
WHEN (OLD.failed_at IS NULL AND NEW.failed_at IS NOT NULL) EXECUTE FUNCTION email_hours_failed();

CREATE FUNCTION email_hours_opened() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO email_campaign_hours (campaign_id, hour, variant_id, unique_opens)
    VALUES (NEW.campaign_id, substr(NEW.opened_at, 1, 13), NEW.variant_id, 1)
    ON CONFLICT (campaign_id, hour, variant_id) DO UPDATE SET unique_opens = email_campaign_hours.unique_opens + 1;
    RETURN NULL;
END $$;

CREATE TRIGGER email_hours_opened AFTER UPDATE OF opened_at ON email_messages FOR EACH ROW
WHEN (OLD.opened_at IS NULL AND NEW.opened_at IS NOT NULL) EXECUTE FUNCTION email_hours_opened();

CREATE FUNCTION email_hours_clicked() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO email_campaign_hours (campaign_id, hour, variant_id, unique_clicks)
    VALUES (NEW.campaign_id, substr(NEW.clicked_at, 1, 13), NEW.variant_id, 1)
    ON CONFLICT (campaign_id, hour, variant_id) DO UPDATE SET unique_clicks = email_campaign_hours.unique_clicks + 1;
    RETURN NULL;
END $$;

CREATE TRIGGER email_hours_clicked AFTER UPDATE OF clicked_at ON email_messages FOR EACH ROW
WHEN (OLD.clicked_at IS NULL AND NEW.clicked_at IS NOT NULL) EXECUTE FUNCTION email_hours_clicked();

CREATE FUNCTION email_hours_unsubscribed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO email_campaign_hours (campaign_id, hour, variant_id, unsubscribed)
    VALUES (NEW.campaign_id, substr(NEW.unsubscribed_at, 1, 13), NEW.variant_id, 1)
    ON CONFLICT (campaign_id, hour, variant_id) DO UPDATE SET unsubscribed = email_campaign_hours.unsubscribed + 1;
    RETURN NULL;
END $$;

CREATE TRIGGER email_hours_unsubscribed AFTER UPDATE OF unsubscribed_at ON email_messages FOR EACH ROW
WHEN (OLD.unsubscribed_at IS NULL AND NEW.unsubscribed_at IS NOT NULL) EXECUTE FUNCTION email_hours_unsubscribed();

CREATE FUNCTION email_hours_bounced() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO email_campaign_hours (campaign_id, hour, variant_id, bounced)
    VALUES (NEW.campaign_id, substr(NEW.bounced_at, 1, 13), NEW.variant_id, 1)
    ON CONFLICT (campaign_id, hour, variant_id) DO UPDATE SET bounced = email_campaign_hours.bounced + 1;
    RETURN NULL;
END $$;

CREATE TRIGGER email_hours_bounced AFTER UPDATE OF bounced_at ON email_messages FOR EACH ROW
WHEN (OLD.bounced_at IS NULL AND NEW.bounced_at IS NOT NULL) EXECUTE FUNCTION email_hours_bounced();

CREATE FUNCTION email_hours_complained() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO email_campaign_hours (campaign_id, hour, variant_id, complained)
    VALUES (NEW.campaign_id, substr(NEW.complained_at, 1, 13), NEW.variant_id, 1)
    ON CONFLICT (campaign_id, hour, variant_id) DO UPDATE SET complained = email_campaign_hours.complained + 1;
    RETURN NULL;
END $$;

CREATE TRIGGER email_hours_complained AFTER UPDATE OF complained_at ON email_messages FOR EACH ROW
WHEN (OLD.complained_at IS NULL AND NEW.complained_at IS NOT NULL) EXECUTE FUNCTION email_hours_complained();

CREATE FUNCTION email_hours_click() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO email_campaign_hours (campaign_id, hour, variant_id, total_clicks)
    SELECT campaign_id, substr(NEW.clicked_at, 1, 13), variant_id, 1 FROM email_messages WHERE id = NEW.message_id
    ON CONFLICT (campaign_id, hour, variant_id) DO UPDATE SET total_clicks = email_campaign_hours.total_clicks + 1;
    RETURN NULL;
END $$;

CREATE TRIGGER email_hours_click AFTER INSERT ON email_clicks FOR EACH ROW
WHEN (NEW.machine = 0) EXECUTE FUNCTION email_hours_click();

CREATE FUNCTION sms_hours_sent() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO sms_campaign_hours (campaign_id, hour, sent) VALUES (NEW.campaign_id, substr(NEW.handed_at, 1, 13), 1)
    ON CONFLICT (campaign_id, hour) DO UPDATE SET sent = sms_campaign_hours.sent + 1;
    RETURN NULL;
END $$;

CREATE TRIGGER sms_hours_sent AFTER UPDATE OF handed_at ON sms_messages FOR EACH ROW
WHEN (OLD.handed_at IS NULL AND NEW.handed_at IS NOT NULL) EXECUTE FUNCTION sms_hours_sent();

CREATE FUNCTION sms_hours_delivered() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO sms_campaign_hours (campaign_id, hour, delivered)
    VALUES (NEW.campaign_id, substr(NEW.delivered_at, 1, 13), 1)
    ON CONFLICT (campaign_id, hour) DO UPDATE SET delivered = sms_campaign_hours.delivered + 1;
    RETURN NULL;
END $$;

CREATE TRIGGER sms_hours_delivered AFTER UPDATE OF delivered_at ON sms_messages FOR EACH ROW
WHEN (OLD.delivered_at IS NULL AND NEW.delivered_at IS NOT NULL) EXECUTE FUNCTION sms_hours_delivered();

CREATE FUNCTION sms_hours_failed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO sms_campaign_hours (campaign_id, hour, failed) VALUES (NEW.campaign_id, substr(NEW.failed_at, 1, 13), 1)
    ON CONFLICT (campaign_id, hour) DO UPDATE SET failed = sms_campaign_hours.failed + 1;
    RETURN NULL;
END $$;

CREATE TRIGGER sms_hours_failed AFTER UPDATE OF failed_at ON sms_messages FOR EACH ROW
WHEN (OLD.failed_at IS NULL AND NEW.failed_at IS NOT NULL) EXECUTE FUNCTION sms_hours_failed();

CREATE FUNCTION sms_hours_unsubscribed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO sms_campaign_hours (campaign_id, hour, unsubscribed)
    VALUES (NEW.campaign_id, substr(NEW.unsubscribed_at, 1, 13), 1)
    ON CONFLICT (campaign_id, hour) DO UPDATE SET unsubscribed = sms_campaign_hours.unsubscribed + 1;
    RETURN NULL;
END $$;

CREATE TRIGGER sms_hours_unsubscribed AFTER UPDATE OF unsubscribed_at ON sms_messages FOR EACH ROW
WHEN (OLD.unsubscribed_at IS NULL AND NEW.unsubscribed_at IS NOT NULL) EXECUTE FUNCTION sms_hours_unsubscribed();

CREATE FUNCTION sms_hours_click() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO sms_campaign_hours (campaign_id, hour, unique_clicks, total_clicks)
    SELECT campaign_id, substr(NEW.clicked_at, 1, 13),
           (NOT EXISTS (SELECT 1 FROM sms_clicks k WHERE k.message_id = NEW.message_id AND k.id < NEW.id))::INT, 1
    FROM sms_messages WHERE id = NEW.message_id
    ON CONFLICT (campaign_id, hour) DO UPDATE SET unique_clicks = sms_campaign_hours.unique_clicks + excluded.unique_clicks,
                                                  total_clicks = sms_campaign_hours.total_clicks + 1;
    RETURN NULL;
END $$;

CREATE TRIGGER sms_hours_click AFTER INSERT ON sms_clicks FOR EACH ROW EXECUTE FUNCTION sms_hours_click();

INSERT INTO plans (id, name, price, conversion_tracking) VALUES
    (1, 'free', '0.00', 0),
    (2, 'pro', '49.00', 1);

SELECT setval(pg_get_serial_sequence('plans', 'id'), (SELECT max(id) FROM plans));

INSERT INTO plan_allowances (plan_id, resource, allowed) VALUES
    (1, 'automations', 2),
    (1, 'contacts', 1000),
    (1, 'domains', 1),
    (1, 'events', 10000),
    (1, 'hourly_emails', 1000),
    (1, 'monthly_emails', 10000),
    (1, 'segments', 5),
    (1, 'users', 3),
    (2, 'automations', 100),
    (2, 'contacts', 100000),
    (2, 'domains', 10),
    (2, 'events', 1000000),
    (2, 'hourly_emails', 100000),
    (2, 'monthly_emails', 1000000),
    (2, 'segments', 250),
    (2, 'users', 25);

INSERT INTO addons (id, name, price, resource, amount) VALUES
    (1, 'extra_contacts_10k', '15.00', 'contacts', 10000),
    (2, 'extra_domain', '5.00', 'domains', 1),
    (3, 'extra_user', '8.00', 'users', 1),
    (4, 'dedicated_ip', '30.00', NULL, 0);

SELECT setval(pg_get_serial_sequence('addons', 'id'), (SELECT max(id) FROM addons));

INSERT INTO sms_rates (country_code, price, updated_at) VALUES
    ('AU', '0.05200', '2026-11-22T00:00:00Z'),
    ('BR', '0.04250', '2026-11-22T00:00:00Z'),
    ('CA', '0.00830', '2026-11-22T00:00:00Z'),
    ('DE', '0.08900', '2026-11-22T00:00:00Z'),
    ('ES', '0.07700', '2026-11-22T00:00:00Z'),
    ('FR', '0.07800', '2026-11-22T00:00:00Z'),
    ('GB', '0.04000', '2026-11-22T00:00:00Z'),
    ('IE', '0.07500', '2026-11-22T00:00:00Z'),
    ('IN', NULL, '2026-11-22T00:00:00Z'),
    ('IT', '0.08300', '2026-11-22T00:00:00Z'),
    ('MX', '0.03300', '2026-11-22T00:00:00Z'),
    ('NL', '0.09800', '2026-11-22T00:00:00Z'),
    ('NZ', '0.10600', '2026-11-22T00:00:00Z'),
    ('US', '0.00830', '2026-11-22T00:00:00Z');


-- contacts
-- A custom field's value typed by the field's type (marketing_cli/dialect.py,
-- contacts_field_value): json_extract answers text here, where SQLite's answers in the stored
-- JSON type. Single-SELECT SQL functions, so PostgreSQL inlines them, and IMMUTABLE, so the
-- per-field expression index contacts_field_<id> is built on the same expression the
-- searches and segments write. A value of another JSON type reads as NULL.
CREATE FUNCTION mkt_field_text(doc TEXT, key TEXT) RETURNS TEXT LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN jsonb_typeof(doc::jsonb -> key) = 'string' THEN doc::jsonb ->> key END
$$;

CREATE FUNCTION mkt_field_number(doc TEXT, key TEXT) RETURNS NUMERIC LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN jsonb_typeof(doc::jsonb -> key) = 'number' THEN (doc::jsonb ->> key)::numeric END
$$;

CREATE FUNCTION mkt_field_boolean(doc TEXT, key TEXT) RETURNS BIGINT LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE doc::jsonb -> key WHEN 'true'::jsonb THEN 1 WHEN 'false'::jsonb THEN 0 END
$$;


-- json_patch for a contact's data (dialect.contacts_json_merge): the stored text itself when the
-- patch changes nothing, so an import that repeats what a contact holds leaves its row as it
-- was (json_patch answers jsonb's text, respaced and reordered, even for an empty patch).
CREATE FUNCTION mkt_json_merge(target TEXT, patch TEXT) RETURNS TEXT LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    merged JSONB := mkt_merge_patch(target::jsonb, patch::jsonb);
BEGIN
    IF merged IS NOT DISTINCT FROM target::jsonb THEN
        RETURN target;
    END IF;
    RETURN merged::text;
END $$;


-- sms

-- SMS rendering and measuring where SQL cannot call Python (services/sms/render.py): SQLite
-- registers Python functions of these names on the connection; these are their PostgreSQL twins.

-- A NUMBER field's value (json_extract's text) as kernel/merge.format_value writes it: a whole
-- number without a fraction, another as Python writes a float (the JSON's own digits, which
-- Python wrote; below 1e-4 Python's exponent form, which float8's shortest output shares).
CREATE FUNCTION mkt_sms_number(v TEXT) RETURNS TEXT LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN v IS NULL THEN NULL
                WHEN v::numeric = trunc(v::numeric) THEN trunc(v::numeric)::text
                WHEN abs(v::numeric) < 0.0001 THEN v::float8::text
                ELSE v::numeric::text END
$$;

-- Whether a character joins the grapheme cluster before it (segments._extends: Unicode's Mn, Me
-- and Mc characters as of Unicode 14.0.0, the zero-width joiner, emoji modifiers and tags).
CREATE FUNCTION mkt_sms_extends(code INT) RETURNS BOOLEAN LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT chr(code) ~ '[\u0300-\u036F\u0483-\u0489\u0591-\u05BD\u05BF\u05C1-\u05C2\u05C4-\u05C5\u05C7\u0610-\u061A\u064B-\u065F\u0670\u06D6-\u06DC\u06DF-\u06E4\u06E7-\u06E8\u06EA-\u06ED\u0711\u0730-\u074A\u07A6-\u07B0\u07EB-\u07F3\u07FD\u0816-\u0819\u081B-\u0823\u0825-\u0827\u0829-\u082D\u0859-\u085B\u0898-\u089F\u08CA-\u08E1\u08E3-\u0903\u093A-\u093C\u093E-\u094F\u0951-\u0957\u0962-\u0963\u0981-\u0983\u09BC\u09BE-\u09C4\u09C7-\u09C8\u09CB-\u09CD\u09D7\u09E2-\u09E3\u09FE\u0A01-\u0A03\u0A3C\u0A3E-\u0A42\u0A47-\u0A48\u0A4B-\u0A4D\u0A51\u0A70-\u0A71\u0A75\u0A81-\u0A83\u0ABC\u0ABE-\u0AC5\u0AC7-\u0AC9\u0ACB-\u0ACD\u0AE2-\u0AE3\u0AFA-\u0AFF\u0B01-\u0B03\u0B3C\u0B3E-\u0B44\u0B47-\u0B48\u0B4B-\u0B4D\u0B55-\u0B57\u0B62-\u0B63\u0B82\u0BBE-\u0BC2\u0BC6-\u0BC8\u0BCA-\u0BCD\u0BD7\u0C00-\u0C04\u0C3C\u0C3E-\u0C44\u0C46-\u0C48\u0C4A-\u0C4D\u0C55-\u0C56\u0C62-\u0C63\u0C81-\u0C83\u0CBC\u0CBE-\u0CC4\u0CC6-\u0CC8\u0CCA-\u0CCD\u0CD5-\u0CD6\u0CE2-\u0CE3\u0D00-\u0D03\u0D3B-\u0D3C\u0D3E-\u0D44\u0D46-\u0D48\u0D4A-\u0D4D\u0D57\u0D62-\u0D63\u0D81-\u0D83\u0DCA\u0DCF-\u0DD4\u0DD6\u0DD8-\u0DDF\u0DF2-\u0DF3\u0E31\u0E34-\u0E3A\u0E47-\u0E4E\u0EB1\u0EB4-\u0EBC\u0EC8-\u0ECD\u0F18-\u0F19\u0F35\u0F37\u0F39\u0F3E-\u0F3F\u0F71-\u0F84\u0F86-\u0F87\u0F8D-\u0F97\u0F99-\u0FBC\u0FC6\u102B-\u103E\u1056-\u1059\u105E-\u1060\u1062-\u1064\u1067-\u106D\u1071-\u1074\u1082-\u108D\u108F\u109A-\u109D\u135D-\u135F\u1712-\u1715\u1732-\u1734\u1752-\u1753\u1772-\u1773\u17B4-\u17D3\u17DD\u180B-\u180D\u180F\u1885-\u1886\u18A9\u1920-\u192B\u1930-\u193B\u1A17-\u1A1B\u1A55-\u1A5E\u1A60-\u1A7C\u1A7F\u1AB0-\u1ACE\u1B00-\u1B04\u1B34-\u1B44\u1B6B-\u1B73\u1B80-\u1B82\u1BA1-\u1BAD\u1BE6-\u1BF3\u1C24-\u1C37\u1CD0-\u1CD2\u1CD4-\u1CE8\u1CED\u1CF4\u1CF7-\u1CF9\u1DC0-\u1DFF\u200D\u20D0-\u20F0\u2CEF-\u2CF1\u2D7F\u2DE0-\u2DFF\u302A-\u302F\u3099-\u309A\uA66F-\uA672\uA674-\uA67D\uA69E-\uA69F\uA6F0-\uA6F1\uA802\uA806\uA80B\uA823-\uA827\uA82C\uA880-\uA881\uA8B4-\uA8C5\uA8E0-\uA8F1\uA8FF\uA926-\uA92D\uA947-\uA953\uA980-\uA983\uA9B3-\uA9C0\uA9E5\uAA29-\uAA36\uAA43\uAA4C-\uAA4D\uAA7B-\uAA7D\uAAB0\uAAB2-\uAAB4\uAAB7-\uAAB8\uAABE-\uAABF\uAAC1\uAAEB-\uAAEF\uAAF5-\uAAF6\uABE3-\uABEA\uABEC-\uABED\uFB1E\uFE00-\uFE0F\uFE20-\uFE2F\U000101FD\U000102E0\U00010376-\U0001037A\U00010A01-\U00010A03\U00010A05-\U00010A06\U00010A0C-\U00010A0F\U00010A38-\U00010A3A\U00010A3F\U00010AE5-\U00010AE6\U00010D24-\U00010D27\U00010EAB-\U00010EAC\U00010F46-\U00010F50\U00010F82-\U00010F85\U00011000-\U00011002\U00011038-\U00011046\U00011070\U00011073-\U00011074\U0001107F-\U00011082\U000110B0-\U000110BA\U000110C2\U00011100-\U00011102\U00011127-\U00011134\U00011145-\U00011146\U00011173\U00011180-\U00011182\U000111B3-\U000111C0\U000111C9-\U000111CC\U000111CE-\U000111CF\U0001122C-\U00011237\U0001123E\U000112DF-\U000112EA\U00011300-\U00011303\U0001133B-\U0001133C\U0001133E-\U00011344\U00011347-\U00011348\U0001134B-\U0001134D\U00011357\U00011362-\U00011363\U00011366-\U0001136C\U00011370-\U00011374\U00011435-\U00011446\U0001145E\U000114B0-\U000114C3\U000115AF-\U000115B5\U000115B8-\U000115C0\U000115DC-\U000115DD\U00011630-\U00011640\U000116AB-\U000116B7\U0001171D-\U0001172B\U0001182C-\U0001183A\U00011930-\U00011935\U00011937-\U00011938\U0001193B-\U0001193E\U00011940\U00011942-\U00011943\U000119D1-\U000119D7\U000119DA-\U000119E0\U000119E4\U00011A01-\U00011A0A\U00011A33-\U00011A39\U00011A3B-\U00011A3E\U00011A47\U00011A51-\U00011A5B\U00011A8A-\U00011A99\U00011C2F-\U00011C36\U00011C38-\U00011C3F\U00011C92-\U00011CA7\U00011CA9-\U00011CB6\U00011D31-\U00011D36\U00011D3A\U00011D3C-\U00011D3D\U00011D3F-\U00011D45\U00011D47\U00011D8A-\U00011D8E\U00011D90-\U00011D91\U00011D93-\U00011D97\U00011EF3-\U00011EF6\U00016AF0-\U00016AF4\U00016B30-\U00016B36\U00016F4F\U00016F51-\U00016F87\U00016F8F-\U00016F92\U00016FE4\U00016FF0-\U00016FF1\U0001BC9D-\U0001BC9E\U0001CF00-\U0001CF2D\U0001CF30-\U0001CF46\U0001D165-\U0001D169\U0001D16D-\U0001D172\U0001D17B-\U0001D182\U0001D185-\U0001D18B\U0001D1AA-\U0001D1AD\U0001D242-\U0001D244\U0001DA00-\U0001DA36\U0001DA3B-\U0001DA6C\U0001DA75\U0001DA84\U0001DA9B-\U0001DA9F\U0001DAA1-\U0001DAAF\U0001E000-\U0001E006\U0001E008-\U0001E018\U0001E01B-\U0001E021\U0001E023-\U0001E024\U0001E026-\U0001E02A\U0001E130-\U0001E136\U0001E2AE\U0001E2EC-\U0001E2EF\U0001E8D0-\U0001E8D6\U0001E944-\U0001E94A\U0001F3FB-\U0001F3FF\U000E0020-\U000E007F\U000E0100-\U000E01EF]'
$$;

-- May a UCS-2 segment end before the UTF-16 unit `at` (0-based) of `u`? (segments._ucs2_boundary)
CREATE FUNCTION mkt_sms_boundary(u INT[], at INT) RETURNS BOOLEAN LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    unit INT := u[at + 1];
    code INT := unit;
    run INT := 0;
    i INT;
BEGIN
    IF unit BETWEEN 56320 AND 57343 THEN RETURN false; END IF;
    IF unit BETWEEN 55296 AND 56319 THEN code := 65536 + ((unit - 55296) << 10) + (u[at + 2] - 56320); END IF;
    IF mkt_sms_extends(code) THEN RETURN false; END IF;
    IF u[at] = 8205 OR (u[at] = 13 AND unit = 10) THEN RETURN false; END IF;
    IF code BETWEEN 127462 AND 127487 THEN
        i := at - 2;
        WHILE i >= 0 AND u[i + 1] = 55356 AND u[i + 2] BETWEEN 56806 AND 56831 LOOP
            run := run + 1;
            i := i - 2;
        END LOOP;
        RETURN run % 2 = 0;
    END IF;
    RETURN true;
END $$;

-- A message's measure: segments * 2, plus 1 for UCS-2 (segments.count_segments, the same rules).
CREATE FUNCTION mkt_sms_measure(body TEXT) RETURNS INT LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    ext INT;
    units INT;
    segments INT := 1;
    start INT := 0;
    e INT;
    septets TEXT;
    u INT[] := '{}';
    cp INT;
    ch TEXT;
BEGIN
    IF body IS NULL THEN RETURN NULL; END IF;
    IF body !~ '[^\u0040\u00A3\u0024\u00A5\u00E8\u00E9\u00F9\u00EC\u00F2\u00C7\u000A\u00D8\u00F8\u000D\u00C5\u00E5\u0394\u005F\u03A6\u0393\u039B\u03A9\u03A0\u03A8\u03A3\u0398\u039E\u001B\u00C6\u00E6\u00DF\u00C9\u0020\u0021\u0022\u0023\u00A4\u0025\u0026\u0027\u0028\u0029\u002A\u002B\u002C\u002D\u002E\u002F\u0030\u0031\u0032\u0033\u0034\u0035\u0036\u0037\u0038\u0039\u003A\u003B\u003C\u003D\u003E\u003F\u00A1\u0041\u0042\u0043\u0044\u0045\u0046\u0047\u0048\u0049\u004A\u004B\u004C\u004D\u004E\u004F\u0050\u0051\u0052\u0053\u0054\u0055\u0056\u0057\u0058\u0059\u005A\u00C4\u00D6\u00D1\u00DC\u00A7\u00BF\u0061\u0062\u0063\u0064\u0065\u0066\u0067\u0068\u0069\u006A\u006B\u006C\u006D\u006E\u006F\u0070\u0071\u0072\u0073\u0074\u0075\u0076\u0077\u0078\u0079\u007A\u00E4\u00F6\u00F1\u00FC\u00E0\u000C\u005E\u007B\u007D\u005C\u005B\u007E\u005D\u007C\u20AC]' THEN
        ext := length(body) - length(regexp_replace(body, '[\u000C\u005E\u007B\u007D\u005C\u005B\u007E\u005D\u007C\u20AC]', '', 'g'));
        units := length(body) + ext;
        IF units <= 160 THEN RETURN CASE WHEN body = '' THEN 0 ELSE 2 END; END IF;
        IF ext = 0 AND position(E'\r\n' IN body) = 0 THEN RETURN ((units + 152) / 153) * 2; END IF;
        septets := regexp_replace(body, '([\u000C\u005E\u007B\u007D\u005C\u005B\u007E\u005D\u007C\u20AC])', E'\x01\\1', 'g');
        WHILE units - start > 153 LOOP
            e := start + 153;
            IF substr(septets, e, 1) = E'\x01' OR (substr(septets, e, 1) = E'\r' AND substr(septets, e + 1, 1) = E'\n') THEN
                e := e - 1;
            END IF;
            start := e;
            segments := segments + 1;
        END LOOP;
        RETURN segments * 2;
    END IF;
    units := length(body) + length(regexp_replace(body, '[^\U00010000-\U0010FFFF]', '', 'g'));
    IF units <= 70 THEN RETURN 3; END IF;
    IF body ~ '^[\u0001-\u000C\u000E-\u02FF\u0370-\u0482\u048A-\u0590\u05D0-\u05EA\u0621-\u064A\u2010-\u20CF\u2100-\u2BFF\u3000-\u3029\u3030-\u3098\u309B-\u9FFF\uAC00-\uD7A3]*$' THEN RETURN ((units + 66) / 67) * 2 + 1; END IF;
    FOR ch IN SELECT regexp_split_to_table(body, '') LOOP
        cp := ascii(ch);
        IF cp >= 65536 THEN
            u := u || (55296 + ((cp - 65536) >> 10)) || (56320 + ((cp - 65536) & 1023));
        ELSE
            u := u || cp;
        END IF;
    END LOOP;
    WHILE units - start > 67 LOOP
        e := start + 67;
        WHILE e > start AND NOT mkt_sms_boundary(u, e) LOOP
            e := e - 1;
        END LOOP;
        IF e = start THEN
            e := start + 67;
            IF u[e + 1] BETWEEN 56320 AND 57343 THEN e := e - 1; END IF;
        END IF;
        start := e;
        segments := segments + 1;
    END LOOP;
    RETURN segments * 2 + 1;
END $$;

-- The ledger's append-only trigger fails as SQLite's RAISE(ABORT) does: a constraint violation
-- (the services and the tests catch it as an integrity error).
CREATE OR REPLACE FUNCTION sms_ledger_no_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the SMS ledger is append-only' USING ERRCODE = 'integrity_constraint_violation';
    RETURN NEW;
END $$;

-- version: 21
-- automation-steps: SMS send steps, frequency caps (schema.sql step 21 says why).
ALTER TABLE sms_campaigns ADD COLUMN automation_id BIGINT;
CREATE TABLE automation_sms_campaigns (
    version_id BIGINT NOT NULL REFERENCES automation_versions(id) ON DELETE CASCADE,
    step_id TEXT NOT NULL,
    round BIGINT NOT NULL,
    campaign_id TEXT NOT NULL REFERENCES sms_campaigns(id) ON DELETE CASCADE,
    PRIMARY KEY (version_id, step_id, round)
);
ALTER TABLE automation_step_runs ADD COLUMN sms_message_id BIGINT;
CREATE TABLE automation_caps (
    workspace_id BIGINT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    channel TEXT NOT NULL CHECK (channel IN ('email', 'sms')),
    max_messages BIGINT NOT NULL,
    window_seconds BIGINT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (workspace_id, channel)
);
ALTER TABLE email_messages ADD COLUMN capped BIGINT;
ALTER TABLE sms_messages ADD COLUMN capped BIGINT;
CREATE INDEX email_messages_capped ON email_messages(contact_id, created_at) WHERE capped = 1;
CREATE INDEX sms_messages_capped ON sms_messages(contact_id, created_at) WHERE capped = 1;
CREATE TABLE sms_ledger_checkpoints (
    workspace_id BIGINT PRIMARY KEY REFERENCES workspaces(id) ON DELETE CASCADE,
    last_entry_id BIGINT NOT NULL,
    total TEXT NOT NULL
);

-- version: 22
-- The counter triggers that bulk writes fire run once per statement, over the
-- statement's transition table, not once per row. A row trigger that upserts the same
-- counter row N times in one transaction leaves N versions of that row, and each upsert
-- walks the versions before it: a 20,000-row import batch paid 20,000^2/2 steps (measured:
-- COPY of 8,000 contacts 544 rows/s with the row trigger, 7,263 without it). The counts are
-- the same (the rows a statement inserted or deleted, per workspace / campaign and variant).
CREATE OR REPLACE FUNCTION contacts_count_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO usage_counters (workspace_id, resource, period, used)
    SELECT workspace_id, 'contacts', '', count(*) FROM mkt_new_rows GROUP BY workspace_id
    ON CONFLICT (workspace_id, resource, period) DO UPDATE SET used = usage_counters.used + excluded.used;
    RETURN NULL;
END $$;
DROP TRIGGER contacts_count_insert ON contacts;
CREATE TRIGGER contacts_count_insert AFTER INSERT ON contacts REFERENCING NEW TABLE AS mkt_new_rows
FOR EACH STATEMENT EXECUTE FUNCTION contacts_count_insert();
CREATE OR REPLACE FUNCTION contacts_count_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE usage_counters SET used = used - gone.n
    FROM (SELECT workspace_id, count(*) AS n FROM mkt_old_rows GROUP BY workspace_id) AS gone
    WHERE usage_counters.workspace_id = gone.workspace_id AND resource = 'contacts' AND period = '';
    RETURN NULL;
END $$;
DROP TRIGGER contacts_count_delete ON contacts;
CREATE TRIGGER contacts_count_delete AFTER DELETE ON contacts REFERENCING OLD TABLE AS mkt_old_rows
FOR EACH STATEMENT EXECUTE FUNCTION contacts_count_delete();
CREATE OR REPLACE FUNCTION email_messages_count_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO email_campaign_counters (campaign_id, variant_id, recipients)
    SELECT campaign_id, variant_id, count(*) FROM mkt_new_rows GROUP BY campaign_id, variant_id
    ON CONFLICT (campaign_id, variant_id) DO UPDATE
    SET recipients = email_campaign_counters.recipients + excluded.recipients;
    RETURN NULL;
END $$;
DROP TRIGGER email_messages_count_insert ON email_messages;
CREATE TRIGGER email_messages_count_insert AFTER INSERT ON email_messages REFERENCING NEW TABLE AS mkt_new_rows
FOR EACH STATEMENT EXECUTE FUNCTION email_messages_count_insert();

-- version: 23
-- json_extract and json_type as one expression each, with the same answers. The step-20
-- forms read the value in a FROM subquery, which keeps PostgreSQL from inlining the function:
-- each call ran as a function of its own and parsed its path in plpgsql, 62 us a row
-- (100,000 contacts: 6.2 s for json_extract(data, '$."1"')). Written as one expression, the
-- call is inlined into the statement, the path (a constant) is parsed once at planning, and
-- the same read takes 0.9 s. Expression indexes over these functions keep matching: the
-- planner inlines an index's expression the same way.
CREATE OR REPLACE FUNCTION json_extract(doc TEXT, path TEXT) RETURNS TEXT LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE jsonb_typeof(doc::jsonb #> mkt_json_path(path))
               WHEN 'string' THEN doc::jsonb #>> mkt_json_path(path)
               WHEN 'boolean' THEN (CASE WHEN doc::jsonb #> mkt_json_path(path) = 'true'::jsonb THEN '1' ELSE '0' END)
               WHEN 'null' THEN NULL
               ELSE (doc::jsonb #> mkt_json_path(path))::text END
$$;
CREATE OR REPLACE FUNCTION json_type(doc TEXT, path TEXT) RETURNS TEXT LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE jsonb_typeof(doc::jsonb #> mkt_json_path(path))
               WHEN 'string' THEN 'text'
               WHEN 'boolean' THEN (doc::jsonb #> mkt_json_path(path))::text
               WHEN 'number' THEN (CASE WHEN (doc::jsonb #> mkt_json_path(path))::text ~ '^-?\d+$' THEN 'integer' ELSE 'real' END)
               ELSE jsonb_typeof(doc::jsonb #> mkt_json_path(path)) END
$$;

-- version: 24
-- SMS expansion renders a merge tag's contact field in SQL (services/sms/render.py,
-- Renderer.values_sql, through field_sql.extract_expr): mkt_field_extract is
-- json_extract(doc, '$."<key>"') for a top-level key,
-- with the same answers (a string unquoted, a number as its text, true/false as 1/0, an object
-- or an array as JSON text, JSON null and a missing member as NULL), written as one expression
-- that the planner inlines into the statement. Measured over 100,000 contacts: 3 us a row,
-- against 62 us for step 20's json_extract (which made a merge tag per recipient 9x a bare
-- INSERT ... SELECT) and 9 us for step 23's inlined one (a text key, not a parsed path).
CREATE FUNCTION mkt_field_extract(doc TEXT, key TEXT) RETURNS TEXT LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN jsonb_typeof(doc::jsonb -> key) = 'boolean'
                THEN (CASE WHEN doc::jsonb -> key = 'true'::jsonb THEN '1' ELSE '0' END)
                ELSE doc::jsonb ->> key END
$$;

-- version: 25
-- A contact's time zone candidates kept on the contact (schema.sql step 25 says why).
ALTER TABLE contacts ADD COLUMN zone_field TEXT;
ALTER TABLE contacts ADD COLUMN zone_phone_set BIGINT;
ALTER TABLE contacts ADD COLUMN zone_cached BIGINT;
CREATE INDEX contacts_zone_stale ON contacts(workspace_id) WHERE zone_cached IS NULL;
CREATE TABLE phone_zone_sets (
    id BIGINT PRIMARY KEY,
    zones TEXT NOT NULL UNIQUE
);
CREATE FUNCTION contacts_zone_stale() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.zone_cached := NULL;
    RETURN NEW;
END $$;
CREATE TRIGGER contacts_zone_stale BEFORE UPDATE OF phone, data ON contacts FOR EACH ROW
WHEN (NEW.zone_cached IS NOT NULL AND NEW.zone_cached = OLD.zone_cached
      AND (NEW.phone IS DISTINCT FROM OLD.phone OR NEW.data IS DISTINCT FROM OLD.data))
EXECUTE FUNCTION contacts_zone_stale();

-- version: 26
-- Claim tokens, claim expiry and the uncertain mark (schema.sql step 26 says why).
ALTER TABLE email_messages ADD COLUMN claim_token TEXT;
ALTER TABLE email_messages ADD COLUMN claim_expires_at TEXT;
ALTER TABLE email_messages ADD COLUMN uncertain BIGINT;
ALTER TABLE sms_messages ADD COLUMN claim_token TEXT;
ALTER TABLE sms_messages ADD COLUMN claim_expires_at TEXT;
ALTER TABLE sms_messages ADD COLUMN uncertain BIGINT;
CREATE INDEX email_messages_claim ON email_messages(campaign_id, id) WHERE status = 'queued';
CREATE INDEX email_messages_claimed ON email_messages(claim_token) WHERE status = 'sending';
CREATE INDEX sms_messages_claimed ON sms_messages(claim_token) WHERE status = 'sending';

-- version: 27
-- The shared pacer's slots, the reserved share of an allowance and the hour a claimed
-- message's reservation belongs to (schema.sql step 27 says why).
CREATE TABLE pace_slots (
    workspace_id BIGINT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    channel TEXT NOT NULL,
    next_at BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, channel)
);
ALTER TABLE usage_counters ADD COLUMN held BIGINT NOT NULL DEFAULT 0;
ALTER TABLE email_messages ADD COLUMN reserved_hour TEXT;

-- version: 28
-- A custom field's typed value parses the contact's data once, not twice. Every write of a
-- contact evaluates each per-field index contacts_field_<id> (expression and partial
-- predicate, both this function): the step-20 bodies cast data to jsonb twice (the type
-- test, then the value), so a workspace with 7 text fields paid 28 parses of data per contact
-- written, 88% of a COPY into contacts (20,000 contacts: 5.9 s with the field indexes,
-- 0.7 s without). One jsonpath query does the type test and the read in one parse: the
-- planner inlines the function and folds the path (the key is a constant) once per statement.
-- The answers are the same for every input (a string member, a number member, else NULL;
-- strict mode and silent errors: a non-object or a missing key is NULL, not an error), so the
-- existing indexes stay valid without a rebuild.
CREATE OR REPLACE FUNCTION mkt_field_text(doc TEXT, key TEXT) RETURNS TEXT LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT jsonb_path_query_first(doc::jsonb, ('strict $."' || key || '" ? (@.type() == "string")')::jsonpath,
                                  '{}', true) #>> '{}'
$$;
CREATE OR REPLACE FUNCTION mkt_field_number(doc TEXT, key TEXT) RETURNS NUMERIC LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT jsonb_path_query_first(doc::jsonb, ('strict $."' || key || '" ? (@.type() == "number")')::jsonpath,
                                  '{}', true)::numeric
$$;

-- version: 29
-- Automations match an event's values against a trigger's, goal's or wait's (a custom event's
-- properties, a field's from / to: services/automations/triggers.py). On SQLite these are
-- json_extract values, compared with IS: a number equals a number of the same value (5 and
-- 5.0), a string only the same string (5 and "5" differ), true and false are 1 and 0, JSON null
-- and a missing member are both NULL. json_extract here returns text, which made 5 and "5"
-- match and 5 and 5.0 differ. mkt_json_comparable gives the value in a form whose text equality
-- is SQLite's: the JSON type's initial, then the string, the number's trimmed value (booleans
-- as numbers), or the JSON text. Used only to compare, never shown.
CREATE FUNCTION mkt_json_comparable(doc TEXT, path TEXT) RETURNS TEXT LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE jsonb_typeof(doc::jsonb #> mkt_json_path(path))
               WHEN 'string' THEN 's' || (doc::jsonb #>> mkt_json_path(path))
               WHEN 'number' THEN 'n' || trim_scale((doc::jsonb #>> mkt_json_path(path))::numeric)::text
               WHEN 'boolean' THEN (CASE WHEN doc::jsonb #> mkt_json_path(path) = 'true'::jsonb THEN 'n1' ELSE 'n0' END)
               WHEN 'null' THEN NULL
               ELSE 'j' || (doc::jsonb #> mkt_json_path(path))::text END
$$;

-- version: 30
-- A contact's data parsed once when it is written, not once per field index. Every write of a
-- contact evaluated each per-field index contacts_field_<id> (its expression and its partial
-- predicate) on the text of data, and each evaluation parsed that text into jsonb: a workspace
-- with 7 fields paid 14 parses per contact, 55 us of the 75 us a COPY of one contact cost
-- (50,000 contacts, 7 field indexes; without them 20 us). data_doc holds the parsed document,
-- computed by PostgreSQL whenever data is written; the field functions take it as jsonb (a
-- member read from parsed jsonb, no parse), and the field indexes are rebuilt on it: 43-47 us
-- a contact on the same COPY. Nothing writes data_doc, and nothing but field_sql reads it
-- (rows come back with its text). SQLite reads its JSON text directly and has no such column.
ALTER TABLE contacts ADD COLUMN data_doc JSONB GENERATED ALWAYS AS (data::jsonb) STORED;

CREATE FUNCTION mkt_field_text(doc JSONB, key TEXT) RETURNS TEXT LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN jsonb_typeof(doc -> key) = 'string' THEN doc ->> key END
$$;

CREATE FUNCTION mkt_field_number(doc JSONB, key TEXT) RETURNS NUMERIC LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN jsonb_typeof(doc -> key) = 'number' THEN (doc ->> key)::numeric END
$$;

CREATE FUNCTION mkt_field_boolean(doc JSONB, key TEXT) RETURNS BIGINT LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE doc -> key WHEN 'true'::jsonb THEN 1 WHEN 'false'::jsonb THEN 0 END
$$;

CREATE FUNCTION mkt_field_extract(doc JSONB, key TEXT) RETURNS TEXT LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN jsonb_typeof(doc -> key) = 'boolean'
                THEN (CASE WHEN doc -> key = 'true'::jsonb THEN '1' ELSE '0' END)
                ELSE doc ->> key END
$$;

-- The existing field indexes, rebuilt on data_doc (field_sql.create_index writes the same).
DO $$
DECLARE
    field_index RECORD;
BEGIN
    FOR field_index IN SELECT indexname, indexdef FROM pg_indexes
                 WHERE schemaname = current_schema() AND tablename = 'contacts' AND indexname LIKE 'contacts\_field\_%'
    LOOP
        EXECUTE format('DROP INDEX %I', field_index.indexname);
        EXECUTE replace(field_index.indexdef, '(data, ', '(data_doc, ');
    END LOOP;
END $$;

-- version: 31
-- Every SMS reply kept, and the hidden campaigns of revocation confirmations (schema.sql step 31 says why).
CREATE TABLE sms_replies (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    workspace_id BIGINT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    contact_id TEXT,
    phone TEXT NOT NULL,
    body TEXT NOT NULL,
    action TEXT NOT NULL CHECK (action IN ('revoked', 'resubscribed', 'none')),
    rule TEXT,
    changed BIGINT NOT NULL DEFAULT 0,
    confirmation_id BIGINT,
    received_at TEXT NOT NULL
);
CREATE INDEX sms_replies_workspace ON sms_replies(workspace_id, id);
CREATE INDEX sms_replies_action ON sms_replies(workspace_id, action, id);
CREATE INDEX sms_replies_contact ON sms_replies(contact_id) WHERE contact_id IS NOT NULL;
CREATE INDEX sms_replies_phone ON sms_replies(workspace_id, phone);
ALTER TABLE sms_campaigns ADD COLUMN purpose TEXT;

-- version: 32
-- The suppression list, the index an erase reads webhook calls by and a flow's erased counts
-- (schema.sql step 32 says why).
CREATE TABLE suppressions (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    workspace_id BIGINT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    kind TEXT NOT NULL CHECK (kind IN ('email', 'phone')),
    digest TEXT NOT NULL,
    reason TEXT NOT NULL,
    created_at TEXT NOT NULL,
    UNIQUE (workspace_id, kind, digest)
);
CREATE INDEX automation_webhooks_enrollment ON automation_webhooks(enrollment_id);
CREATE TABLE automation_erased (
    automation_id BIGINT NOT NULL REFERENCES automations(id) ON DELETE CASCADE,
    status TEXT NOT NULL,
    exit_reason TEXT NOT NULL,
    goal_reached BIGINT NOT NULL,
    count BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (automation_id, status, exit_reason, goal_reached)
);
CREATE TABLE automation_erased_runs (
    automation_id BIGINT NOT NULL REFERENCES automations(id) ON DELETE CASCADE,
    version_id BIGINT NOT NULL REFERENCES automation_versions(id) ON DELETE CASCADE,
    step_id TEXT NOT NULL,
    outcome TEXT NOT NULL,
    detail TEXT NOT NULL,
    count BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (version_id, step_id, outcome, detail)
);

-- version: 33
-- The consent ledger and the cut-over of the "m" token (schema.sql step 33 says why).
CREATE TABLE contact_consents (
    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    workspace_id BIGINT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    contact_id TEXT NOT NULL REFERENCES contacts(id) ON DELETE CASCADE,
    channel TEXT NOT NULL CHECK (channel IN ('email', 'sms')),
    consent TEXT NOT NULL CHECK (consent IN ('given', 'pending', 'revoked')),
    status TEXT NOT NULL,
    source TEXT NOT NULL,
    consent_text TEXT,
    file_name TEXT,
    line BIGINT,
    message_text TEXT,
    campaign_id TEXT,
    ip TEXT,
    user_agent TEXT,
    created_at TEXT NOT NULL
);
CREATE INDEX contact_consents_contact ON contact_consents(contact_id, id);
CREATE INDEX contact_consents_workspace ON contact_consents(workspace_id, created_at, id);

CREATE TABLE token_cutovers (
    kind TEXT PRIMARY KEY,
    last_id BIGINT NOT NULL,
    at TEXT NOT NULL
);
INSERT INTO token_cutovers (kind, last_id, at)
    SELECT 'm', COALESCE(MAX(id), 0), to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
    FROM email_messages;

-- version: 34
-- A database `mkt db copy --retire-source` retired (schema.sql step 34 says why).
CREATE TABLE mkt_copy_retired (
    id BIGINT PRIMARY KEY CHECK (id = 1),
    retired_at TEXT NOT NULL,
    successor TEXT NOT NULL,
    message TEXT NOT NULL
);

-- version: 35
-- Bounce classes (schema.sql step 35 says why).
ALTER TABLE email_messages ADD COLUMN bounce_class TEXT;
CREATE INDEX email_messages_bounce_class ON email_messages(campaign_id, bounce_class) WHERE bounce_class IS NOT NULL;

-- version: 36
-- The estimate of a campaign's audience (services/estimates/cache.py): the groups last computed
-- from the audience, with the campaign's state then and the moment, as JSON; a list of
-- campaigns reads it instead of counting every campaign's audience again. NULL: none kept.
ALTER TABLE campaigns ADD COLUMN estimate_cache TEXT;
ALTER TABLE sms_campaigns ADD COLUMN estimate_cache TEXT;

-- version: 37
-- Provider lanes (schema.sql step 37 says why).
ALTER TABLE email_messages ADD COLUMN lane TEXT;
ALTER TABLE email_messages ADD COLUMN deferred_since TEXT;
CREATE TABLE email_lane_marks (
    campaign_id TEXT PRIMARY KEY REFERENCES campaigns(id) ON DELETE CASCADE,
    through BIGINT NOT NULL
);
CREATE TABLE mail_domain_lanes (
    domain TEXT PRIMARY KEY,
    lane TEXT NOT NULL,
    mx TEXT,
    expires_at TEXT NOT NULL
);
CREATE TABLE lane_state (
    workspace_id BIGINT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    lane TEXT NOT NULL,
    rate DOUBLE PRECISION NOT NULL DEFAULT 0,
    next_at BIGINT NOT NULL DEFAULT 0,
    suspended_until TEXT,
    reason TEXT,
    reason_at TEXT,
    cut_at TEXT,
    grown_at TEXT,
    PRIMARY KEY (workspace_id, lane)
);

-- version: 38
-- Field values of any length in the per-field indexes. A btree entry holds at most 2704 bytes,
-- and the API stores a text value of up to its body limit (1 MiB): a contact with a 10 kB
-- first_name failed its write ("index row size ... exceeds btree version 4 maximum 2704";
-- 1 MB of repeated letters: "index row requires 11472 bytes"). The index contacts_field_<id> of
-- a text-valued field (every type but NUMBER and BOOLEAN) now holds the value's first 256
-- characters in code point order, and every comparison reads it by that prefix, then rechecks
-- the whole value (field_sql.key_expr and compare, which write the same expression).
DO $$
DECLARE
    field RECORD;
    doc TEXT;
BEGIN
    FOR field IN SELECT f.id FROM fields f
                 WHERE f.type NOT IN ('NUMBER', 'BOOLEAN')
                   AND EXISTS (SELECT 1 FROM pg_indexes WHERE schemaname = current_schema()
                               AND indexname = 'contacts_field_' || f.id)
    LOOP
        doc := format('mkt_field_text(data_doc, %L)', field.id::text);
        EXECUTE format('DROP INDEX %I', 'contacts_field_' || field.id);
        EXECUTE format('CREATE INDEX %I ON contacts(workspace_id, (left(%s, 256) COLLATE "C")) WHERE %s IS NOT NULL',
                       'contacts_field_' || field.id, doc, doc);
    END LOOP;
END $$;

-- version: 39
-- Circuit breakers (services/delivery/breakers.py; docs/deliverability.md "Circuit
-- breakers"): a workspace's thresholds, in percent as decimal text (NULL: the default:
-- complaints 0.3, unknown users 5, blocks 10), set with `mkt workspace breakers` only (no
-- endpoint changes them). campaigns.breaker_after: after a forced resume, the highest id of
-- the campaign's messages answered then; only later ones count for its breaker (NULL: all).
-- email_messages_complained: the complaints of a campaign's window without reading its rows.
CREATE TABLE breaker_settings (
    workspace_id BIGINT PRIMARY KEY REFERENCES workspaces(id) ON DELETE CASCADE,
    complaints TEXT,
    unknown_users TEXT,
    blocks TEXT
);
ALTER TABLE campaigns ADD COLUMN breaker_after BIGINT;
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
    domain_id BIGINT PRIMARY KEY REFERENCES domains(id) ON DELETE CASCADE,
    workspace_id BIGINT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    started_at TEXT NOT NULL,
    start_day TEXT NOT NULL,
    schedule TEXT NOT NULL,
    origin TEXT NOT NULL,
    stopped_at TEXT
);
CREATE INDEX domain_warmups_workspace ON domain_warmups(workspace_id);
CREATE TABLE warmup_counters (
    domain_id BIGINT NOT NULL REFERENCES domains(id) ON DELETE CASCADE,
    day TEXT NOT NULL,
    lane TEXT NOT NULL,
    used BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (domain_id, day, lane)
);
ALTER TABLE email_messages ADD COLUMN warm_rank BIGINT;
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
-- contacts' own triggers fire whatever session_replication_role says. An import batch may run
-- its upsert and consent ledger statements with it set to replica, which skips their per-row
-- foreign key checks (it locks the workspace's row once and joins the ledger's rows to their
-- contacts instead: services/contacts/batch_checks.py); the usage counter and the kept time
-- zone's staleness must still be kept by those statements, so their triggers are ALWAYS.
-- An import checks the catalog first and keeps the per-row checks while any user trigger on
-- contacts or contact_consents is not ALWAYS.
ALTER TABLE contacts ENABLE ALWAYS TRIGGER contacts_count_insert;
ALTER TABLE contacts ENABLE ALWAYS TRIGGER contacts_count_delete;
ALTER TABLE contacts ENABLE ALWAYS TRIGGER contacts_zone_stale;
