-- Segment counters: one row per namespace. A node fetches a range of IDs by
-- advancing max_id in one UPDATE; the range it got is (old max_id, new max_id].
-- version is incremented by every change of max_id so that a node giving back
-- the unused tail of its range can check that nobody fetched after it.
-- Times are UTC (UTC_TIMESTAMP), whatever the server's time zone.

-- +goose Up
CREATE TABLE segments (
    namespace   VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL, -- byte order, the same in every database
    max_id      BIGINT      NOT NULL DEFAULT 0, -- last ID handed out; the next range starts at max_id + 1
    step        BIGINT      NOT NULL,           -- current range size
    min_step    BIGINT      NOT NULL,           -- dynamic step lower bound
    max_step    BIGINT      NOT NULL,           -- dynamic step upper bound
    mode        VARCHAR(16) NOT NULL DEFAULT 'buffered',
    fallback    VARCHAR(16) NOT NULL DEFAULT 'none',
    version     BIGINT      NOT NULL DEFAULT 0,
    created_at  DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    updated_at  DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    description TEXT        NOT NULL,
    PRIMARY KEY (namespace),
    CONSTRAINT segments_max_id_check   CHECK (max_id >= 0),
    CONSTRAINT segments_step_check     CHECK (1 <= min_step AND min_step <= step AND step <= max_step),
    CONSTRAINT segments_mode_check     CHECK (mode IN ('buffered', 'strict')),
    CONSTRAINT segments_fallback_check CHECK (fallback IN ('none', 'snowflake')),
    CONSTRAINT segments_version_check  CHECK (version >= 0)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- +goose Down
DROP TABLE segments;
