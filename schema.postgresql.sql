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
           (NOT EXISTS (SELECT 1 FROM sms_clicks k WHERE k.message_id = NEW.message_id AND k.id < NEW.id))::BIGINT, 1
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
