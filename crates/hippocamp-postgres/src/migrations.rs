//! The schema's versioned, forward-only migrations, applied in order by
//! [`Database::connect`](crate::Database::connect). A released migration
//! is never edited: a change is a new migration.
//!
//! Text columns compared for order use the `C` collation, so listings are
//! in byte order whatever the database's locale.

/// One migration.
#[derive(Debug)]
pub struct Migration {
    /// Its number, one more than the previous one's.
    pub version: i32,
    /// What it does.
    pub name: &'static str,
    /// Its statements, run in one transaction.
    pub sql: &'static str,
}

/// Every migration this build knows, in order.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "memory",
        sql: r#"
-- One row per scope ever written or erased: its erasure epoch (which
-- outlives its entries, so queued work stays fenced), its counters for the
-- per-scope quota, and a version every write advances (what tells a
-- server its cached copy of the scope is stale).
CREATE TABLE memory_scopes (
    id BIGSERIAL PRIMARY KEY,
    app TEXT COLLATE "C" NOT NULL,
    usr TEXT COLLATE "C" NOT NULL,
    epoch BIGINT NOT NULL DEFAULT 0,
    version BIGINT NOT NULL DEFAULT 0,
    entries BIGINT NOT NULL DEFAULT 0,
    bytes BIGINT NOT NULL DEFAULT 0,
    -- BM25 statistics of the scope: documents are `entries`; the sum of
    -- their lengths in terms.
    total_len BIGINT NOT NULL DEFAULT 0,
    UNIQUE (app, usr)
);
CREATE INDEX memory_scopes_held ON memory_scopes (app, usr) WHERE entries > 0;

-- The store-wide quota's counters: one row, updated in every write
-- transaction that changes them, so concurrent servers cannot overshoot.
CREATE TABLE memory_totals (
    one BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
    entries BIGINT NOT NULL,
    bytes BIGINT NOT NULL
);
INSERT INTO memory_totals VALUES (TRUE, 0, 0);

-- Entries: the record (the entry as JSON, checked against the scope when
-- read), its analysed terms with their frequencies and its length (the
-- scope's postings and document lengths), its vector, and the columns the
-- sweeper and session erasure look up.
CREATE TABLE memory_entries (
    scope_id BIGINT NOT NULL REFERENCES memory_scopes (id),
    id TEXT COLLATE "C" NOT NULL,
    record TEXT NOT NULL,
    bytes BIGINT NOT NULL,
    ts BIGINT NOT NULL,
    session TEXT COLLATE "C",
    -- When the sweeper may delete it (expired and not retained), NULL if
    -- never (no expiry, or a legal hold).
    sweep_at BIGINT,
    terms TEXT[] NOT NULL,
    tfs INTEGER[] NOT NULL,
    doc_len INTEGER NOT NULL,
    embedding vector,
    PRIMARY KEY (scope_id, id)
);
CREATE INDEX memory_entries_session ON memory_entries (scope_id, session) WHERE session IS NOT NULL;
CREATE INDEX memory_entries_sweep ON memory_entries (sweep_at) WHERE sweep_at IS NOT NULL;

-- Erased entries of sessions: an event that would make one again is
-- skipped (erasure is sticky). Never removed.
CREATE TABLE memory_erased (
    scope_id BIGINT NOT NULL REFERENCES memory_scopes (id),
    session TEXT COLLATE "C" NOT NULL,
    id TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (scope_id, id, session)
);

-- Kept revisions of corrected entries, the current one included (none for
-- an entry never corrected).
CREATE TABLE memory_revisions (
    scope_id BIGINT NOT NULL REFERENCES memory_scopes (id),
    id TEXT COLLATE "C" NOT NULL,
    rev INTEGER NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (scope_id, id, rev)
);

-- The embedder whose vectors the store holds (their scores are only
-- comparable with that model's).
CREATE TABLE memory_meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"#,
    },
    Migration {
        version: 2,
        name: "sessions",
        sql: r#"
-- The runner's sessions: one row per (app, user) holding the count the
-- per-user limit checks (locked by every append that may create a
-- session), one per session, one per event in append order.
CREATE TABLE session_users (
    app TEXT COLLATE "C" NOT NULL,
    usr TEXT COLLATE "C" NOT NULL,
    sessions BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (app, usr)
);
CREATE TABLE sessions (
    id BIGSERIAL PRIMARY KEY,
    app TEXT COLLATE "C" NOT NULL,
    usr TEXT COLLATE "C" NOT NULL,
    session TEXT COLLATE "C" NOT NULL,
    events BIGINT NOT NULL DEFAULT 0,
    created_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL,
    UNIQUE (app, usr, session)
);
CREATE TABLE session_events (
    session_id BIGINT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    idx BIGINT NOT NULL,
    event_id TEXT COLLATE "C" NOT NULL,
    event TEXT NOT NULL,
    PRIMARY KEY (session_id, idx),
    UNIQUE (session_id, event_id)
);
"#,
    },
    Migration {
        version: 3,
        name: "governance and tokens",
        sql: r#"
-- Consent per exact scope.
CREATE TABLE consents (
    app TEXT COLLATE "C" NOT NULL,
    usr TEXT COLLATE "C" NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (app, usr)
);
-- The audit log: numbers come from one counter row locked by each
-- append, so they follow commit order across servers and are never
-- reused (the counter outlives pruned records).
CREATE TABLE audit_counter (
    one BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
    last BIGINT NOT NULL
);
INSERT INTO audit_counter VALUES (TRUE, 0);
CREATE TABLE audit_records (
    seq BIGINT PRIMARY KEY,
    at_ms BIGINT NOT NULL,
    record TEXT NOT NULL
);
CREATE INDEX audit_records_at ON audit_records (at_ms);
-- Bearer tokens (their hashes and grants, never their secrets); a change
-- advances the version every server polls.
CREATE TABLE tokens (
    id TEXT COLLATE "C" PRIMARY KEY,
    sha256 TEXT NOT NULL UNIQUE,
    record TEXT NOT NULL
);
CREATE TABLE tokens_version (
    one BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
    version BIGINT NOT NULL
);
INSERT INTO tokens_version VALUES (TRUE, 0);
"#,
    },
    Migration {
        version: 4,
        name: "outbox",
        sql: r"
-- The outbox engine's tables as rows: table number, key, value (BYTEA
-- compares byte by byte, the order its ranges need).
CREATE TABLE outbox_kv (
    t SMALLINT NOT NULL,
    k BYTEA NOT NULL,
    v BYTEA NOT NULL,
    PRIMARY KEY (t, k)
);
-- Claims: the owner's token and the expiry on the database's clock (ms).
CREATE TABLE outbox_leases (
    job BYTEA PRIMARY KEY,
    owner BYTEA NOT NULL,
    until_ms BIGINT NOT NULL,
    attempt INTEGER NOT NULL
);
",
    },
    Migration {
        version: 5,
        name: "artifact catalog",
        sql: r#"
-- The artifact catalog: contents live on the object store, each version's
-- row names its content. A scope's row holds its quota counters (locked
-- by every put and delete of the scope); a name's row its high-water
-- version, which outlives its versions (numbers are never reused).
CREATE TABLE artifact_scopes (
    id BIGSERIAL PRIMARY KEY,
    key TEXT COLLATE "C" NOT NULL UNIQUE,
    hash BYTEA NOT NULL,
    scope TEXT NOT NULL,
    count BIGINT NOT NULL DEFAULT 0,
    bytes BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX artifact_scopes_held ON artifact_scopes (hash) WHERE count > 0;
CREATE TABLE artifact_totals (
    one BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
    count BIGINT NOT NULL,
    bytes BIGINT NOT NULL
);
INSERT INTO artifact_totals VALUES (TRUE, 0, 0);
CREATE TABLE artifact_names (
    scope_id BIGINT NOT NULL REFERENCES artifact_scopes (id),
    name TEXT COLLATE "C" NOT NULL,
    high_water BIGINT NOT NULL,
    PRIMARY KEY (scope_id, name)
);
CREATE TABLE artifact_versions (
    scope_id BIGINT NOT NULL,
    name TEXT COLLATE "C" NOT NULL,
    version BIGINT NOT NULL,
    size BIGINT NOT NULL,
    content TEXT NOT NULL,
    meta TEXT NOT NULL,
    integrity TEXT NOT NULL,
    PRIMARY KEY (scope_id, name, version),
    FOREIGN KEY (scope_id, name) REFERENCES artifact_names (scope_id, name)
);
CREATE INDEX artifact_versions_content ON artifact_versions (content);
"#,
    },
    Migration {
        version: 6,
        name: "entries without vectors",
        sql: r"
-- The entries of a scope without a vector (written before an embedder
-- was configured), counted by searches whose vectors PostgreSQL ranks:
-- usually none, so the count reads nothing.
CREATE INDEX memory_entries_unembedded ON memory_entries (scope_id) WHERE embedding IS NULL;
",
    },
    Migration {
        version: 7,
        name: "session erasure epochs",
        sql: r#"
-- Each erased session's erasure epoch, advanced by every delete_session in
-- its transaction (absent: 0). A write admitted under an older one (a
-- delivery that started on another server before the erasure) is refused
-- at its commit point, under the scope's row lock. Never removed.
CREATE TABLE memory_session_epochs (
    scope_id BIGINT NOT NULL REFERENCES memory_scopes (id),
    session TEXT COLLATE "C" NOT NULL,
    epoch BIGINT NOT NULL,
    PRIMARY KEY (scope_id, session)
);
"#,
    },
    Migration {
        version: 8,
        name: "agent session erasure epochs",
        sql: r#"
-- The user's erasure epoch (advanced by erasing the user, which keeps the
-- row so the epoch outlives the sessions) and each erased session's
-- (absent: 0). An append carrying older ones (a runner's turn that started
-- before the erasure) is refused under the user's row lock, which every
-- append and every deletion takes.
ALTER TABLE session_users ADD COLUMN epoch BIGINT NOT NULL DEFAULT 0;
CREATE TABLE session_epochs (
    app TEXT COLLATE "C" NOT NULL,
    usr TEXT COLLATE "C" NOT NULL,
    session TEXT COLLATE "C" NOT NULL,
    epoch BIGINT NOT NULL,
    PRIMARY KEY (app, usr, session)
);
"#,
    },
    Migration {
        version: 9,
        name: "erasure records by entry id, counted",
        sql: r#"
-- Every erased entry (by id, session, user or sweep), with or without a
-- session: a restore does not write one back, and an export lists them
-- (memory_erased keeps skipping an erased session's events). The scope's
-- row counts its erasure records (rows of both tables and its sessions'
-- epochs): each counts against its byte quota.
CREATE TABLE memory_erased_ids (
    scope_id BIGINT NOT NULL REFERENCES memory_scopes (id),
    id TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (scope_id, id)
);
INSERT INTO memory_erased_ids (scope_id, id)
    SELECT DISTINCT scope_id, id FROM memory_erased;
ALTER TABLE memory_scopes ADD COLUMN erasures BIGINT NOT NULL DEFAULT 0;
UPDATE memory_scopes s SET erasures =
    (SELECT count(*) FROM memory_erased e WHERE e.scope_id = s.id)
    + (SELECT count(*) FROM memory_erased_ids e WHERE e.scope_id = s.id)
    + (SELECT count(*) FROM memory_session_epochs e WHERE e.scope_id = s.id);
"#,
    },
    Migration {
        version: 10,
        name: "consent withdrawals",
        sql: r#"
-- When a scope's consent was last withdrawn: a restore never records
-- again a consent the user withdrew.
CREATE TABLE consent_withdrawals (
    app TEXT COLLATE "C" NOT NULL,
    usr TEXT COLLATE "C" NOT NULL,
    at_ms BIGINT NOT NULL,
    PRIMARY KEY (app, usr)
);
"#,
    },
    Migration {
        version: 11,
        name: "governance keys",
        sql: r#"
-- The deployment's secrets, made by the first server that needs one and
-- shared by every server: `scope_hash` keys the scope hashes of the audit
-- log and the request log.
CREATE TABLE governance_keys (
    name TEXT COLLATE "C" PRIMARY KEY,
    key BYTEA NOT NULL
);
"#,
    },
    Migration {
        version: 12,
        name: "consolidation runs",
        sql: r#"
-- Each user's consolidation run records (ids, states and counts, never
-- content), ordered by `run_key` (start time, then id); every server
-- reads and writes the same records.
CREATE TABLE consolidation_runs (
    app TEXT COLLATE "C" NOT NULL,
    usr TEXT COLLATE "C" NOT NULL,
    run_key TEXT COLLATE "C" NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (app, usr, run_key)
);
"#,
    },
];
