package httpapi

// The admin API's JSON as the server encodes it, for the tests of package
// httpapi_test to decode.
type (
	// LeaseJSON is a row of GET /admin/leases.
	LeaseJSON = leaseJSON
	// NamespaceJSON is a namespace of GET /admin/namespaces and the body
	// of the routes on one namespace.
	NamespaceJSON = namespaceJSON
	// LeaseEventJSON is an event of GET /admin/lease-events.
	LeaseEventJSON = leaseEventJSON
)
