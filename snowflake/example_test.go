package snowflake_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/idgen-project/idgen/snowflake"
)

func Example() {
	g, err := snowflake.NewGenerator(snowflake.Settings{DatacenterID: 1, WorkerID: 7})
	if err != nil {
		panic(err)
	}
	id, err := g.Next()
	if err != nil {
		panic(err)
	}
	p := g.Layout().Decompose(id)
	fmt.Println(p.Datacenter, p.Worker)
	// Output: 1 7
}

func ExampleGenerator_NextN() {
	g, _ := snowflake.NewGenerator(snowflake.Settings{})
	ids, err := g.NextN(nil, 3)
	if err != nil {
		panic(err)
	}
	fmt.Println(len(ids), ids[0] < ids[1] && ids[1] < ids[2])
	// Output: 3 true
}

func ExampleGenerator_SetFence() {
	g, _ := snowflake.NewGenerator(snowflake.Settings{})
	// A lease keeper allows timestamps up to a ceiling its database has
	// committed, and nothing once its lease deadline has passed.
	revoked := errors.New("lease expired")
	g.SetFence(snowflake.Fence{
		Ceiling: time.Now().Add(30 * time.Second).UnixMilli(),
		Check:   func() error { return revoked },
	})
	_, err := g.Next()
	fmt.Println(errors.Is(err, snowflake.ErrFenceCheck), errors.Is(err, revoked))
	// Output: true true
}

func ExampleLayout_Decompose() {
	id, _ := snowflake.ParseID("6270587282805841")
	p := snowflake.DefaultLayout().Decompose(id)
	fmt.Println(p.Time.Format(time.RFC3339Nano), p.Datacenter, p.Worker, p.Sequence)
	// Output: 2026-01-18T07:17:04.51Z 3 5 1105
}

func ExampleLayout_Validate() {
	l := snowflake.Layout{TimeBits: 41, DatacenterBits: 5, WorkerBits: 5, SequenceBits: 13, Epoch: snowflake.DefaultEpoch}
	fmt.Println(l.Validate())
	// Output: snowflake: invalid layout: widths sum to 64 (time 41 + datacenter 5 + worker 5 + sequence 13), want at most 63
}

func ExampleID_MarshalJSON() {
	b, _ := snowflake.ID(1234567890123456789).MarshalJSON()
	fmt.Println(string(b))
	// Output: "1234567890123456789"
}
