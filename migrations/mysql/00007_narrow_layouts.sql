-- Narrow Snowflake layouts: the widths of a layout may sum to less than 63
-- bits (the js53 preset uses 53, so that every ID is a JavaScript number).
-- The bits above the widths are zero. The stored layout is still the one a
-- node must match: a node configured with another one refuses to start.
--
-- The way down refuses a database whose stored layout is narrower than 63
-- bits: its IDs were made under it, and no 63-bit layout reads them. DROP
-- CONSTRAINT needs MySQL 8.0.19 or later, or MariaDB 10.2 or later.

-- +goose Up
ALTER TABLE snowflake_layout
    DROP CONSTRAINT snowflake_layout_bits_check,
    ADD CONSTRAINT snowflake_layout_width_check CHECK (
        time_bits > 0 AND datacenter_bits >= 0 AND worker_bits >= 0 AND sequence_bits >= 0
        AND time_bits + datacenter_bits + worker_bits + sequence_bits <= 63);

-- +goose Down
ALTER TABLE snowflake_layout
    DROP CONSTRAINT snowflake_layout_width_check,
    ADD CONSTRAINT snowflake_layout_bits_check CHECK (
        time_bits > 0 AND datacenter_bits >= 0 AND worker_bits >= 0 AND sequence_bits >= 0
        AND time_bits + datacenter_bits + worker_bits + sequence_bits = 63);
