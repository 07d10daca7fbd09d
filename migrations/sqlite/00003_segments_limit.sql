-- max_id_limit: the largest value a namespace's max_id may take, NULL for
-- none. A namespace gets one when its Snowflake fallback is turned on: one
-- below the smallest Snowflake ID of that moment. Fetches never move max_id
-- past it and the fallback serves only IDs above it, so segment IDs and
-- fallback IDs can never meet. It is set once and kept, even when the
-- fallback is turned off again (IDs the fallback served stay above it).
-- SQLite cannot add a CHECK constraint to a table (nor a column whose CHECK
-- fails on rows already there), so the table is rebuilt; the constraints are
-- the new column's own, so that the way down can drop it.
--
-- Namespaces that had the fallback before this migration get the smallest
-- Snowflake ID of one hour before their creation, minus one: every fallback
-- ID they can have been served came later, from a node whose clock idgen
-- holds within seconds of database time. One whose max_id has already
-- reached that bound, or with no Snowflake layout recorded yet, has its
-- fallback turned off: turning it on again is refused while the counter is
-- not below the Snowflake IDs of the day.

-- +goose Up
CREATE TABLE segments_new (
    namespace    TEXT    NOT NULL PRIMARY KEY,    -- byte order (BINARY collation)
    max_id       INTEGER NOT NULL DEFAULT 0,      -- last ID handed out; the next range starts at max_id + 1
    max_id_limit INTEGER                          -- max_id never passes it; NULL: no limit
        CONSTRAINT segments_max_id_limit_check   CHECK (max_id_limit IS NULL OR max_id <= max_id_limit)
        CONSTRAINT segments_fallback_limit_check CHECK (fallback <> 'snowflake' OR max_id_limit IS NOT NULL),
    step         INTEGER NOT NULL,                -- current range size
    min_step     INTEGER NOT NULL,                -- dynamic step lower bound
    max_step     INTEGER NOT NULL,                -- dynamic step upper bound
    mode         TEXT    NOT NULL DEFAULT 'buffered',
    fallback     TEXT    NOT NULL DEFAULT 'none',
    version      INTEGER NOT NULL DEFAULT 0,
    created_at   TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    updated_at   TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    description  TEXT    NOT NULL DEFAULT '',
    CONSTRAINT segments_namespace_check      CHECK (length(namespace) BETWEEN 1 AND 64),
    CONSTRAINT segments_max_id_check         CHECK (max_id >= 0),
    CONSTRAINT segments_step_check           CHECK (1 <= min_step AND min_step <= step AND step <= max_step),
    CONSTRAINT segments_mode_check           CHECK (mode IN ('buffered', 'strict')),
    CONSTRAINT segments_fallback_check       CHECK (fallback IN ('none', 'snowflake')),
    CONSTRAINT segments_version_check        CHECK (version >= 0)
) STRICT;

INSERT INTO segments_new (namespace, max_id, max_id_limit, step, min_step, max_step, mode, fallback,
    version, created_at, updated_at, description)
SELECT namespace, max_id,
       CASE WHEN fallback = 'snowflake' AND bound > max_id THEN bound END,
       step, min_step, max_step, mode,
       CASE WHEN fallback = 'snowflake' AND bound > max_id THEN 'snowflake' ELSE 'none' END,
       version, created_at, updated_at, description
FROM (
    SELECT s.*, (
        SELECT ((CAST(round((julianday(s.created_at) - 2440587.5) * 86400000) AS INTEGER) - 3600000 - l.epoch_ms)
                << (l.datacenter_bits + l.worker_bits + l.sequence_bits)) - 1
        FROM snowflake_layout l
        WHERE l.id = 1
          AND CAST(round((julianday(s.created_at) - 2440587.5) * 86400000) AS INTEGER) - 3600000 > l.epoch_ms
    ) AS bound
    FROM segments s
);

DROP TABLE segments;
ALTER TABLE segments_new RENAME TO segments;

-- +goose Down
-- The limit's CHECK constraints belong to its column and go with it.
ALTER TABLE segments DROP COLUMN max_id_limit;
