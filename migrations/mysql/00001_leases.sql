-- Worker leases: one row per Snowflake worker ID (datacenter_id, worker_id).
-- A node claims a free or expired row, keeps it alive with heartbeats and
-- gives it back on shutdown. Every claim increments fencing_version, and every
-- later write by the holder is fenced on it, so a node whose lease was taken
-- over can no longer change the row. ts_ceiling_ms is the highest Snowflake
-- timestamp (Unix milliseconds) the holder may use; a new holder starts above
-- it. All times are database time in UTC (UTC_TIMESTAMP(6)), never a node's
-- clock, whatever the server's time zone.

-- +goose Up
CREATE TABLE worker_leases (
    datacenter_id   INT          NOT NULL,
    worker_id       INT          NOT NULL,
    holder          VARCHAR(255) NULL,               -- host, pid and a random suffix; NULL when free
    fencing_version BIGINT       NOT NULL DEFAULT 0, -- incremented at every claim
    acquired_at     DATETIME(6)  NULL,               -- when the current (or last) holder claimed the row
    heartbeat_at    DATETIME(6)  NULL,               -- last heartbeat of the holder
    expires_at      DATETIME(6)  NULL,               -- the lease is free to take over from this time on
    released_at     DATETIME(6)  NULL,               -- set on graceful release, NULL while held
    ts_ceiling_ms   BIGINT       NOT NULL DEFAULT 0, -- highest Snowflake timestamp the holder may use (Unix ms)
    PRIMARY KEY (datacenter_id, worker_id),
    CONSTRAINT worker_leases_ids_check     CHECK (datacenter_id >= 0 AND worker_id >= 0),
    CONSTRAINT worker_leases_holder_check  CHECK (holder IS NULL OR (holder <> '' AND expires_at IS NOT NULL)),
    CONSTRAINT worker_leases_fencing_check CHECK (fencing_version >= 0),
    CONSTRAINT worker_leases_ceiling_check CHECK (ts_ceiling_ms >= 0)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Append-only audit trail of the leases: who claimed, took over, released or
-- lost which worker ID, at which fencing version.
CREATE TABLE lease_events (
    id              BIGINT       NOT NULL AUTO_INCREMENT,
    datacenter_id   INT          NOT NULL,
    worker_id       INT          NOT NULL,
    holder          VARCHAR(255) NOT NULL,
    fencing_version BIGINT       NOT NULL,
    event           VARCHAR(16)  NOT NULL, -- acquire, takeover, release or lost
    at              DATETIME(6)  NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    detail          TEXT         NOT NULL,
    PRIMARY KEY (id),
    KEY lease_events_worker_idx (datacenter_id, worker_id, id),
    CONSTRAINT lease_events_event_check CHECK (event IN ('acquire', 'takeover', 'release', 'lost'))
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- The Snowflake layout IDs are made with. It is written once, by the first node
-- to start; a node configured with another layout refuses to start, because IDs
-- of two layouts can collide.
CREATE TABLE snowflake_layout (
    id              INT         NOT NULL, -- always 1: the table holds one row
    time_bits       INT         NOT NULL,
    datacenter_bits INT         NOT NULL,
    worker_bits     INT         NOT NULL,
    sequence_bits   INT         NOT NULL,
    epoch_ms        BIGINT      NOT NULL, -- the epoch in Unix milliseconds, as used in IDs
    epoch           DATETIME(3) NOT NULL, -- the same instant in UTC, for people
    created_at      DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    PRIMARY KEY (id),
    CONSTRAINT snowflake_layout_single_row CHECK (id = 1),
    CONSTRAINT snowflake_layout_bits_check CHECK (
        time_bits > 0 AND datacenter_bits >= 0 AND worker_bits >= 0 AND sequence_bits >= 0
        AND time_bits + datacenter_bits + worker_bits + sequence_bits = 63)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
DROP TABLE snowflake_layout;
DROP TABLE lease_events;
DROP TABLE worker_leases;
