-- Worker leases: one row per Snowflake worker ID (datacenter_id, worker_id).
-- A node claims a free or expired row, keeps it alive with heartbeats and
-- gives it back on shutdown. Every claim increments fencing_version, and every
-- later write by the holder is fenced on it, so a node whose lease was taken
-- over can no longer change the row. ts_ceiling_ms is the highest Snowflake
-- timestamp (Unix milliseconds) the holder may use; a new holder starts above
-- it. Times are UTC text, 'YYYY-MM-DD HH:MM:SS.SSS', written by SQLite itself
-- (strftime('%Y-%m-%d %H:%M:%f', 'now')), so they sort and read as times.

-- +goose Up
CREATE TABLE worker_leases (
    datacenter_id   INTEGER NOT NULL,
    worker_id       INTEGER NOT NULL,
    holder          TEXT,                       -- host, pid and a random suffix; NULL when free
    fencing_version INTEGER NOT NULL DEFAULT 0, -- incremented at every claim
    acquired_at     TEXT,                       -- when the current (or last) holder claimed the row
    heartbeat_at    TEXT,                       -- last heartbeat of the holder
    expires_at      TEXT,                       -- the lease is free to take over from this time on
    released_at     TEXT,                       -- set on graceful release, NULL while held
    ts_ceiling_ms   INTEGER NOT NULL DEFAULT 0, -- highest Snowflake timestamp the holder may use (Unix ms)
    PRIMARY KEY (datacenter_id, worker_id),
    CONSTRAINT worker_leases_ids_check     CHECK (datacenter_id >= 0 AND worker_id >= 0),
    CONSTRAINT worker_leases_holder_check  CHECK (holder IS NULL OR (holder <> '' AND expires_at IS NOT NULL)),
    CONSTRAINT worker_leases_fencing_check CHECK (fencing_version >= 0),
    CONSTRAINT worker_leases_ceiling_check CHECK (ts_ceiling_ms >= 0)
) STRICT;

-- Append-only audit trail of the leases: who claimed, took over, released or
-- lost which worker ID, at which fencing version.
CREATE TABLE lease_events (
    id              INTEGER PRIMARY KEY AUTOINCREMENT, -- never reused, so paging by id is safe
    datacenter_id   INTEGER NOT NULL,
    worker_id       INTEGER NOT NULL,
    holder          TEXT    NOT NULL,
    fencing_version INTEGER NOT NULL,
    event           TEXT    NOT NULL,                  -- acquire, takeover, release or lost
    at              TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    detail          TEXT    NOT NULL DEFAULT '',
    CONSTRAINT lease_events_event_check CHECK (event IN ('acquire', 'takeover', 'release', 'lost'))
) STRICT;
CREATE INDEX lease_events_worker_idx ON lease_events (datacenter_id, worker_id, id);

-- The Snowflake layout IDs are made with. It is written once, by the first node
-- to start; a node configured with another layout refuses to start, because IDs
-- of two layouts can collide.
CREATE TABLE snowflake_layout (
    id              INTEGER NOT NULL PRIMARY KEY, -- always 1: the table holds one row
    time_bits       INTEGER NOT NULL,
    datacenter_bits INTEGER NOT NULL,
    worker_bits     INTEGER NOT NULL,
    sequence_bits   INTEGER NOT NULL,
    epoch_ms        INTEGER NOT NULL,             -- the epoch in Unix milliseconds, as used in IDs
    epoch           TEXT    NOT NULL,             -- the same instant in UTC, for people
    created_at      TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    CONSTRAINT snowflake_layout_single_row CHECK (id = 1),
    CONSTRAINT snowflake_layout_bits_check CHECK (
        time_bits > 0 AND datacenter_bits >= 0 AND worker_bits >= 0 AND sequence_bits >= 0
        AND time_bits + datacenter_bits + worker_bits + sequence_bits = 63)
) STRICT;

-- +goose Down
DROP TABLE snowflake_layout;
DROP TABLE lease_events;
DROP TABLE worker_leases;
