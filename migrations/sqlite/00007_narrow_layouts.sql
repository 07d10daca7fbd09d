-- Narrow Snowflake layouts: the widths of a layout may sum to less than 63
-- bits (the js53 preset uses 53, so that every ID is a JavaScript number).
-- The bits above the widths are zero. The stored layout is still the one a
-- node must match: a node configured with another one refuses to start.
--
-- SQLite cannot change a CHECK constraint in place: the table is built anew
-- and its row copied. The way down refuses a database whose stored layout
-- is narrower than 63 bits (the copy fails the old CHECK): its IDs were
-- made under it, and no 63-bit layout reads them.

-- +goose Up
CREATE TABLE snowflake_layout_new (
    id              INTEGER NOT NULL PRIMARY KEY, -- always 1: the table holds one row
    time_bits       INTEGER NOT NULL,
    datacenter_bits INTEGER NOT NULL,
    worker_bits     INTEGER NOT NULL,
    sequence_bits   INTEGER NOT NULL,
    epoch_ms        INTEGER NOT NULL,             -- the epoch in Unix milliseconds, as used in IDs
    epoch           TEXT    NOT NULL,             -- the same instant in UTC, for people
    created_at      TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    CONSTRAINT snowflake_layout_single_row CHECK (id = 1),
    CONSTRAINT snowflake_layout_width_check CHECK (
        time_bits > 0 AND datacenter_bits >= 0 AND worker_bits >= 0 AND sequence_bits >= 0
        AND time_bits + datacenter_bits + worker_bits + sequence_bits <= 63)
) STRICT;
INSERT INTO snowflake_layout_new SELECT id, time_bits, datacenter_bits, worker_bits, sequence_bits, epoch_ms, epoch, created_at FROM snowflake_layout;
DROP TABLE snowflake_layout;
ALTER TABLE snowflake_layout_new RENAME TO snowflake_layout;

-- +goose Down
CREATE TABLE snowflake_layout_old (
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
INSERT INTO snowflake_layout_old SELECT id, time_bits, datacenter_bits, worker_bits, sequence_bits, epoch_ms, epoch, created_at FROM snowflake_layout;
DROP TABLE snowflake_layout;
ALTER TABLE snowflake_layout_old RENAME TO snowflake_layout;
