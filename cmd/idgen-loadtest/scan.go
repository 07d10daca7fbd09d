package main

import (
	"bytes"
	"errors"
	"fmt"
)

// errNoIDs is returned by scanIDs for a body without an "ids" array.
var errNoIDs = errors.New(`no "ids" array in the response`)

var idsKey = []byte(`"ids"`)

// scanIDs finds the "ids" array of an idgen response, such as
// {"ids":["1","2"],"source":"snowflake"}, and adds every ID in it to runs.
// IDs may be JSON strings (idgen's form) or numbers. It returns how many IDs
// it found. It does not validate the rest of the body: it is a scanner for
// the hot loop of the load tool, not a JSON parser.
func scanIDs(body []byte, runs *runSet) (int, error) {
	k := bytes.Index(body, idsKey)
	if k < 0 {
		return 0, errNoIDs
	}
	i := skipSpace(body, k+len(idsKey))
	if i >= len(body) || body[i] != ':' {
		return 0, errNoIDs
	}
	i = skipSpace(body, i+1)
	if i >= len(body) || body[i] != '[' {
		return 0, errNoIDs
	}
	i++
	n := 0
	for {
		i = skipSpace(body, i)
		if i >= len(body) {
			return n, errors.New("unterminated ids array")
		}
		if body[i] == ']' {
			return n, nil
		}
		if n > 0 {
			if body[i] != ',' {
				return n, fmt.Errorf("want ',' between IDs at byte %d", i)
			}
			i = skipSpace(body, i+1)
			if i >= len(body) {
				return n, errors.New("unterminated ids array")
			}
		}
		quoted := body[i] == '"'
		if quoted {
			i++
		}
		var v int64
		start := i
		for i < len(body) && body[i] >= '0' && body[i] <= '9' {
			d := int64(body[i] - '0')
			if v > (1<<63-1-d)/10 {
				return n, fmt.Errorf("ID at byte %d overflows 63 bits", start)
			}
			v = v*10 + d
			i++
		}
		if i == start || i-start > 19 {
			return n, fmt.Errorf("not a decimal ID at byte %d", start)
		}
		if quoted {
			if i >= len(body) || body[i] != '"' {
				return n, fmt.Errorf("unterminated ID string at byte %d", start)
			}
			i++
		}
		runs.add(v)
		n++
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}
