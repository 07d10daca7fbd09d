package sequence_test

import (
	"fmt"
	"time"

	"github.com/idgen-project/idgen/allocator/sequence"
)

// A yearly invoice sequence in Berlin: the period and the text of a number
// at a store time, here 23:30 UTC on New Year's Eve, already 2027 in Berlin.
func ExampleSequence_Compile() {
	c, err := sequence.Sequence{Name: "invoices", Format: "INV-{yyyy}-{seq:06}", Reset: sequence.ResetYearly, Zone: "Europe/Berlin"}.Compile()
	if err != nil {
		panic(err)
	}
	at := time.Date(2026, 12, 31, 23, 30, 0, 0, time.UTC)
	fmt.Println(c.PeriodAt(at), c.Write(at, 42))
	// Output: 2027 INV-2027-000042
}

// A format without a counter field is refused when parsed.
func ExampleParseFormat() {
	_, err := sequence.ParseFormat("INV-{yyyy}")
	fmt.Println(err)
	f, _ := sequence.ParseFormat("{yyMMdd}{seq:05}")
	fmt.Println(f.Write(time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC), 45), f.MaxNumber())
	// Output:
	// invalid sequence request: format "INV-{yyyy}" has no counter field: add {seq} or {seq:0N}, e.g. INV-{yyyy}-{seq:06}
	// 26112700045 99999
}
