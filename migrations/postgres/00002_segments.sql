-- Segment counters: one row per namespace. A node fetches a range of IDs by
-- advancing max_id in one UPDATE; the range it got is (old max_id, new max_id].
-- version is incremented by every change of max_id so that a node giving back
-- the unused tail of its range can check that nobody fetched after it.

-- +goose Up
CREATE TABLE segments (
    namespace   varchar(64) COLLATE "C" PRIMARY KEY, -- byte order, the same in every database
    max_id      bigint      NOT NULL DEFAULT 0,      -- last ID handed out; the next range starts at max_id + 1
    step        bigint      NOT NULL,                -- current range size
    min_step    bigint      NOT NULL,                -- dynamic step lower bound
    max_step    bigint      NOT NULL,                -- dynamic step upper bound
    mode        varchar(16) NOT NULL DEFAULT 'buffered',
    fallback    varchar(16) NOT NULL DEFAULT 'none',
    version     bigint      NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    description text        NOT NULL DEFAULT '',
    CONSTRAINT segments_max_id_check   CHECK (max_id >= 0),
    CONSTRAINT segments_step_check     CHECK (1 <= min_step AND min_step <= step AND step <= max_step),
    CONSTRAINT segments_mode_check     CHECK (mode IN ('buffered', 'strict')),
    CONSTRAINT segments_fallback_check CHECK (fallback IN ('none', 'snowflake')),
    CONSTRAINT segments_version_check  CHECK (version >= 0)
);

-- +goose Down
DROP TABLE segments;
