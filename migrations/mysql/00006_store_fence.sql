-- Restore fences (idgen restore-fence).
--
-- store_fence holds one row: store_id, a random identity given to the store
-- when this table is created, which a dump or a replica carries along;
-- generation, how many restore fences ran on the store; ceiling_ms, the
-- ceiling of the last fence, which worker rows created later start at (a
-- pool widened after a backup was taken has no rows in it); fenced_at and
-- detail, when and how the last fence ran. A node compares store_id and
-- generation with its own state file at start.
-- lease_events.event gains 'fence': a restore fence took the lease from its
-- holder and raised its ceiling.

-- +goose Up
CREATE TABLE store_fence (
    id         INT          NOT NULL,           -- always 1: the table holds one row
    store_id   VARCHAR(64)  NOT NULL,           -- random, set once
    generation BIGINT       NOT NULL DEFAULT 0,
    ceiling_ms BIGINT       NOT NULL DEFAULT 0, -- Unix ms: the ceiling of worker rows created after the last fence
    fenced_at  DATETIME(6)  NULL,               -- UTC; NULL: never fenced
    detail     TEXT         NOT NULL,
    PRIMARY KEY (id),
    CONSTRAINT store_fence_single_row CHECK (id = 1),
    CONSTRAINT store_fence_values_check CHECK (generation >= 0 AND ceiling_ms >= 0 AND store_id <> '')
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
INSERT INTO store_fence (id, store_id, detail) VALUES (1, REPLACE(UUID(), '-', ''), '');

ALTER TABLE lease_events
    DROP CONSTRAINT lease_events_event_check;
ALTER TABLE lease_events
    ADD CONSTRAINT lease_events_event_check CHECK (event IN ('acquire', 'takeover', 'release', 'lost', 'evict', 'fence'));

-- +goose Down
-- Fence events have no place in the old schema's audit trail and are
-- dropped from it.
DELETE FROM lease_events WHERE event = 'fence';
ALTER TABLE lease_events
    DROP CONSTRAINT lease_events_event_check;
ALTER TABLE lease_events
    ADD CONSTRAINT lease_events_event_check CHECK (event IN ('acquire', 'takeover', 'release', 'lost', 'evict'));
DROP TABLE store_fence;
