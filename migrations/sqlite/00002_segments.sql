-- Segment counters: one row per namespace. A node fetches a range of IDs by
-- advancing max_id in one UPDATE; the range it got is (old max_id, new max_id].
-- version is incremented by every change of max_id so that a node giving back
-- the unused tail of its range can check that nobody fetched after it.
-- Times are UTC text, 'YYYY-MM-DD HH:MM:SS.SSS', so they sort and read as times.

-- +goose Up
CREATE TABLE segments (
    namespace   TEXT    NOT NULL PRIMARY KEY,    -- byte order (BINARY collation)
    max_id      INTEGER NOT NULL DEFAULT 0,      -- last ID handed out; the next range starts at max_id + 1
    step        INTEGER NOT NULL,                -- current range size
    min_step    INTEGER NOT NULL,                -- dynamic step lower bound
    max_step    INTEGER NOT NULL,                -- dynamic step upper bound
    mode        TEXT    NOT NULL DEFAULT 'buffered',
    fallback    TEXT    NOT NULL DEFAULT 'none',
    version     INTEGER NOT NULL DEFAULT 0,
    created_at  TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    updated_at  TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    description TEXT    NOT NULL DEFAULT '',
    CONSTRAINT segments_namespace_check CHECK (length(namespace) BETWEEN 1 AND 64),
    CONSTRAINT segments_max_id_check    CHECK (max_id >= 0),
    CONSTRAINT segments_step_check      CHECK (1 <= min_step AND min_step <= step AND step <= max_step),
    CONSTRAINT segments_mode_check      CHECK (mode IN ('buffered', 'strict')),
    CONSTRAINT segments_fallback_check  CHECK (fallback IN ('none', 'snowflake')),
    CONSTRAINT segments_version_check   CHECK (version >= 0)
) STRICT;

-- +goose Down
DROP TABLE segments;
