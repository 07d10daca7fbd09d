package httpapi_test

import (
	"github.com/idgen-project/idgen"
	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/allocator/mysql"
	"github.com/idgen-project/idgen/allocator/postgres"
	"github.com/idgen-project/idgen/allocator/sqlite"
	"github.com/idgen-project/idgen/httpapi"
)

// The allocator's types satisfy the interfaces the server declares; a
// method that changes on either side stops the build here.
var (
	_ idgen.Snowflakes        = (*allocator.Keeper)(nil)
	_ httpapi.LeaseReporter   = (*allocator.Keeper)(nil)
	_ idgen.Segments          = (*allocator.Segments)(nil)
	_ httpapi.SegmentReporter = (*allocator.Segments)(nil)

	_ httpapi.AdminStore = allocator.Store(nil)
	_ httpapi.Pinger     = allocator.Store(nil)

	_ httpapi.AdminStore = (*postgres.Store)(nil)
	_ httpapi.AdminStore = (*mysql.Store)(nil)
	_ httpapi.AdminStore = (*sqlite.Store)(nil)

	_ allocator.RetryCounter = (*postgres.Store)(nil)
	_ allocator.RetryCounter = (*mysql.Store)(nil)
	_ allocator.RetryCounter = (*sqlite.Store)(nil)
)
