package docs_test

// The exchanges of TestResponsesMatchSpec that cover the compatibility
// routes (the v1 shapes, Leaf's and tinyid's routes); the node has the
// namespace "orders".

// compatExchanges go to the node with a lease and without tokens.
var compatExchanges = []exchange{
	{"v1 IDs", "GET", "/api/v1/ids?count=3", "/api/v1/ids", "", "", 200},
	{"v1 one ID by default", "GET", "/api/v1/ids", "/api/v1/ids", "", "", 200},
	{"v1 count zero", "GET", "/api/v1/ids?count=0", "/api/v1/ids", "", "", 400},
	{"v1 unknown parameter", "GET", "/api/v1/ids?namespace=orders", "/api/v1/ids", "", "", 400},
	{"v1 one ID", "POST", "/api/v1/id", "/api/v1/id", "", "", 200},
	{"leaf segment", "GET", "/api/segment/get/orders", "/api/segment/get/{key}", "", "", 200},
	{"leaf segment unknown key", "GET", "/api/segment/get/nope", "/api/segment/get/{key}", "", "", 404},
	{"leaf segment bad key", "GET", "/api/segment/get/No!", "/api/segment/get/{key}", "", "", 400},
	{"leaf snowflake", "GET", "/api/snowflake/get/anything", "/api/snowflake/get/{key}", "", "", 200},
	{"tinyid simple", "GET", "/tinyid/id/nextIdSimple?bizType=orders&batchSize=3", "/tinyid/id/nextIdSimple", "", "", 200},
	{"tinyid simple posted", "POST", "/tinyid/id/nextIdSimple?bizType=orders", "/tinyid/id/nextIdSimple", "", "", 200},
	{"tinyid simple unknown", "GET", "/tinyid/id/nextIdSimple?bizType=nope", "/tinyid/id/nextIdSimple", "", "", 404},
	{"tinyid simple no bizType", "GET", "/tinyid/id/nextIdSimple", "/tinyid/id/nextIdSimple", "", "", 400},
	{"tinyid nextId", "GET", "/tinyid/id/nextId?bizType=orders&batchSize=2&token=ignored", "/tinyid/id/nextId", "", "", 200},
	{"tinyid nextId posted", "POST", "/tinyid/id/nextId?bizType=orders", "/tinyid/id/nextId", "", "", 200},
	{"tinyid nextId unknown", "GET", "/tinyid/id/nextId?bizType=nope", "/tinyid/id/nextId", "", "", 404},
	{"tinyid nextId bad batch", "GET", "/tinyid/id/nextId?bizType=orders&batchSize=-1", "/tinyid/id/nextId", "", "", 400},
}

// compatTokenExchanges go to the node with tokens.
var compatTokenExchanges = []exchange{
	{"v1 IDs with its scope", "GET", "/api/v1/ids", "/api/v1/ids", "", idsSecret, 200},
	{"v1 IDs without a token", "GET", "/api/v1/ids", "/api/v1/ids", "", "", 401},
	{"v1 ID without the scope", "POST", "/api/v1/id", "/api/v1/id", "", adminSecret, 403},
	{"leaf segment without a token", "GET", "/api/segment/get/orders", "/api/segment/get/{key}", "", "", 401},
	{"leaf snowflake without the scope", "GET", "/api/snowflake/get/x", "/api/snowflake/get/{key}", "", adminSecret, 403},
	{"tinyid simple with a token parameter", "GET", "/tinyid/id/nextIdSimple?bizType=orders&token=" + idsSecret, "/tinyid/id/nextIdSimple", "", "", 200},
	{"tinyid simple with a header", "GET", "/tinyid/id/nextIdSimple?bizType=orders", "/tinyid/id/nextIdSimple", "", idsSecret, 200},
	{"tinyid simple without a token", "GET", "/tinyid/id/nextIdSimple?bizType=orders", "/tinyid/id/nextIdSimple", "", "", 401},
	{"tinyid nextId with a token parameter", "GET", "/tinyid/id/nextId?bizType=orders&token=" + idsSecret, "/tinyid/id/nextId", "", "", 200},
	{"tinyid nextId with an unknown token", "GET", "/tinyid/id/nextId?bizType=orders&token=nobody", "/tinyid/id/nextId", "", "", 401},
	{"tinyid nextId without the scope", "GET", "/tinyid/id/nextId?bizType=orders&token=" + adminSecret, "/tinyid/id/nextId", "", "", 403},
}

// compatDownExchanges go to the node without a lease.
var compatDownExchanges = []exchange{
	{"v1 IDs without a lease", "GET", "/api/v1/ids", "/api/v1/ids", "", "", 503},
	{"leaf snowflake without a lease", "GET", "/api/snowflake/get/x", "/api/snowflake/get/{key}", "", "", 503},
}
