-- max_id_limit: the largest value a namespace's max_id may take, NULL for
-- none. A namespace gets one when its Snowflake fallback is turned on: one
-- below the smallest Snowflake ID of that moment. Fetches never move max_id
-- past it and the fallback serves only IDs above it, so segment IDs and
-- fallback IDs can never meet. It is set once and kept, even when the
-- fallback is turned off again (IDs the fallback served stay above it).
-- The CHECK constraints need MySQL 8.0.16 or later, or MariaDB 10.2 or
-- later; older servers parse and ignore them, and the fetch's own bound
-- still holds. The way down (DROP CONSTRAINT) needs MySQL 8.0.19 or later.
--
-- Namespaces that had the fallback before this migration get the smallest
-- Snowflake ID of one hour before their creation, minus one: every fallback
-- ID they can have been served came later, from a node whose clock idgen
-- holds within seconds of database time. One whose max_id has already
-- reached that bound, or with no Snowflake layout recorded yet, has its
-- fallback turned off: turning it on again is refused while the counter is
-- not below the Snowflake IDs of the day. created_at holds UTC, and
-- TIMESTAMPDIFF on DATETIME values does no time zone conversion.

-- +goose Up
ALTER TABLE segments ADD COLUMN max_id_limit BIGINT NULL AFTER max_id; -- max_id never passes it; NULL: no limit

UPDATE segments s JOIN snowflake_layout l ON l.id = 1
SET s.max_id_limit = CAST(((TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', s.created_at) DIV 1000 - 3600000 - l.epoch_ms)
                           << (l.datacenter_bits + l.worker_bits + l.sequence_bits)) AS SIGNED) - 1
WHERE s.fallback = 'snowflake'
  AND TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', s.created_at) DIV 1000 - 3600000 > l.epoch_ms;

UPDATE segments SET fallback = 'none', max_id_limit = NULL
WHERE fallback = 'snowflake' AND (max_id_limit IS NULL OR max_id >= max_id_limit);

ALTER TABLE segments
    ADD CONSTRAINT segments_max_id_limit_check CHECK (max_id_limit IS NULL OR max_id <= max_id_limit),
    ADD CONSTRAINT segments_fallback_limit_check CHECK (fallback <> 'snowflake' OR max_id_limit IS NOT NULL);

-- +goose Down
ALTER TABLE segments
    DROP CONSTRAINT segments_fallback_limit_check,
    DROP CONSTRAINT segments_max_id_limit_check;
ALTER TABLE segments DROP COLUMN max_id_limit;
