-- max_id_limit: the largest value a namespace's max_id may take, NULL for
-- none. A namespace gets one when its Snowflake fallback is turned on: one
-- below the smallest Snowflake ID of that moment. Fetches never move max_id
-- past it and the fallback serves only IDs above it, so segment IDs and
-- fallback IDs can never meet. It is set once and kept, even when the
-- fallback is turned off again (IDs the fallback served stay above it).
--
-- Namespaces that had the fallback before this migration get the smallest
-- Snowflake ID of one hour before their creation, minus one: every fallback
-- ID they can have been served came later, from a node whose clock idgen
-- holds within seconds of database time. One whose max_id has already
-- reached that bound, or with no Snowflake layout recorded yet, has its
-- fallback turned off: turning it on again is refused while the counter is
-- not below the Snowflake IDs of the day.

-- +goose Up
ALTER TABLE segments ADD COLUMN max_id_limit bigint; -- max_id never passes it; NULL: no limit

UPDATE segments s
SET max_id_limit = ((floor(extract(epoch FROM s.created_at) * 1000)::bigint - 3600000 - l.epoch_ms)
                    << (l.datacenter_bits + l.worker_bits + l.sequence_bits)) - 1
FROM snowflake_layout l
WHERE l.id = 1 AND s.fallback = 'snowflake'
  AND floor(extract(epoch FROM s.created_at) * 1000)::bigint - 3600000 > l.epoch_ms;

UPDATE segments SET fallback = 'none', max_id_limit = NULL
WHERE fallback = 'snowflake' AND (max_id_limit IS NULL OR max_id >= max_id_limit);

ALTER TABLE segments ADD CONSTRAINT segments_max_id_limit_check
    CHECK (max_id_limit IS NULL OR max_id <= max_id_limit);
ALTER TABLE segments ADD CONSTRAINT segments_fallback_limit_check
    CHECK (fallback <> 'snowflake' OR max_id_limit IS NOT NULL);

-- +goose Down
ALTER TABLE segments DROP CONSTRAINT segments_fallback_limit_check;
ALTER TABLE segments DROP CONSTRAINT segments_max_id_limit_check;
ALTER TABLE segments DROP COLUMN max_id_limit;
