// Module bench compares idgen's Snowflake engine with other Go ID
// generators. It is a module of its own so that the main module does not
// depend on the generators it is compared with.
module github.com/idgen-project/idgen/bench

go 1.26.0

replace github.com/idgen-project/idgen => ../

require (
	github.com/bwmarrin/snowflake v0.3.0
	github.com/google/uuid v1.6.0
	github.com/idgen-project/idgen v0.0.0-00010101000000-000000000000
	github.com/jackc/pgx/v5 v5.12.0
	github.com/sony/sonyflake/v2 v2.0.0
)

require (
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	golang.org/x/text v0.43.0 // indirect
)
