package main

import (
	"slices"
	"testing"
)

func TestScanIDs(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		want    []idRun
		wantN   int
		wantErr bool
	}{
		{name: "snowflake", body: `{"ids":["7","8","10"],"source":"snowflake"}`, want: []idRun{{7, 8}, {10, 10}}, wantN: 3},
		{name: "one", body: `{"ids":["271828182845904523"],"source":"snowflake"}`, want: []idRun{{271828182845904523, 271828182845904523}}, wantN: 1},
		{name: "numbers and spaces", body: "{ \"ids\" : [ 1 ,\n2 , 3 ] }", want: []idRun{{1, 3}}, wantN: 3},
		{name: "segment with ranges", body: `{"ids":["100","101"],"namespace":"orders","source":"segment","ranges":[{"first":"100","last":"101"}]}`, want: []idRun{{100, 101}}, wantN: 2},
		{name: "empty", body: `{"ids":[]}`, want: nil, wantN: 0},
		{name: "max int63", body: `{"ids":["9223372036854775807"]}`, want: []idRun{{1<<63 - 1, 1<<63 - 1}}, wantN: 1},
		{name: "no ids", body: `{"status":"ok"}`, wantErr: true},
		{name: "ids not an array", body: `{"ids":"1"}`, wantErr: true},
		{name: "unterminated", body: `{"ids":["1","2"`, want: []idRun{{1, 2}}, wantN: 2, wantErr: true},
		{name: "missing comma", body: `{"ids":["1" "2"]}`, want: []idRun{{1, 1}}, wantN: 1, wantErr: true},
		{name: "negative", body: `{"ids":["-1"]}`, wantErr: true},
		{name: "overflow", body: `{"ids":["9223372036854775808"]}`, wantErr: true},
		{name: "not a number", body: `{"ids":["abc"]}`, wantErr: true},
		{name: "unterminated string", body: `{"ids":["12`, wantErr: true},
		{name: "problem", body: `{"type":"https://idgen.dev/problems/unavailable","status":503}`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rs runSet
			n, err := scanIDs([]byte(tt.body), &rs)
			if (err != nil) != tt.wantErr {
				t.Fatalf("scanIDs(%s) error = %v, want error %v", tt.body, err, tt.wantErr)
			}
			if n != tt.wantN {
				t.Errorf("scanIDs(%s) n = %d, want %d", tt.body, n, tt.wantN)
			}
			if !slices.Equal(rs.runs, tt.want) {
				t.Errorf("scanIDs(%s) runs = %v, want %v", tt.body, rs.runs, tt.want)
			}
		})
	}
}

func BenchmarkScanIDs1000(b *testing.B) {
	body := []byte(`{"ids":[`)
	for i := range 1000 {
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, `"`+"1234567890123456"+string(rune('0'+i%10))+`"`...)
	}
	body = append(body, `],"source":"snowflake"}`...)
	var rs runSet
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		rs.runs = rs.runs[:0]
		if _, err := scanIDs(body, &rs); err != nil {
			b.Fatal(err)
		}
	}
}
