-- id_stride and id_offset interleave a namespace with namespaces of the same
-- name in other databases (docs/regions.md): the counter counts slots, and
-- slot n is handed out as the ID n * id_stride + id_offset. Each region has
-- its own database and gives the namespace the same stride and its own
-- offset, so the regions hand out disjoint IDs without talking to each
-- other. Rows from before this migration get stride 1 and offset 0: their
-- IDs are the slots, as before. Both are fixed when a namespace is created.
-- The CHECK constraint needs MySQL 8.0.16 or later, or MariaDB 10.2 or
-- later; older servers parse and ignore it, and idgen checks the values
-- before it writes them.

-- +goose Up
ALTER TABLE segments
    ADD COLUMN id_stride BIGINT NOT NULL DEFAULT 1,
    ADD COLUMN id_offset BIGINT NOT NULL DEFAULT 0,
    ADD CONSTRAINT segments_stride_check CHECK (id_stride >= 1 AND id_offset >= 0 AND id_offset < id_stride);

-- +goose Down
ALTER TABLE segments DROP CONSTRAINT segments_stride_check;
ALTER TABLE segments DROP COLUMN id_offset, DROP COLUMN id_stride;
