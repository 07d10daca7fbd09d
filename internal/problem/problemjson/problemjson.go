// Package problemjson is the body of every problem answer of idgen's HTTP
// API (application/problem+json): httpapi writes it, and the Go client and
// the tests read it. It imports nothing of idgen's, for the Go client's
// sake; the codes themselves are package problem's.
package problemjson

// Body is an RFC 9457 problem document with idgen's "code" member, one of
// the codes of package problem.
type Body struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Code   string `json:"code"`
}
