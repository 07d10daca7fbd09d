package statuspage

import (
	"context"

	"github.com/idgen-project/idgen/allocator/sequence"
)

// SequenceReader is what the page reads of the store's sequences.
type SequenceReader interface {
	ListSequences(ctx context.Context) ([]sequence.Sequence, error)
	SequenceStatus(ctx context.Context, name string) (sequence.Status, error)
}

// sequenceRow is a sequence and its status at store time.
type sequenceRow struct {
	Name, Format, Reset, Zone, Period, Description string
	Last, Open                                     int64
}

func (p *Page) sequenceRows(ctx context.Context) ([]sequenceRow, error) {
	all, err := p.cfg.Sequences.ListSequences(ctx)
	if err != nil {
		return nil, err
	}
	rows := make([]sequenceRow, 0, len(all))
	for _, seq := range all {
		st, err := p.cfg.Sequences.SequenceStatus(ctx, seq.Name)
		if err != nil {
			return rows, err
		}
		rows = append(rows, sequenceRow{Name: seq.Name, Format: seq.Format, Reset: string(seq.Reset), Zone: seq.Zone,
			Period: st.Period, Description: seq.Description, Last: st.LastNumber, Open: st.Open})
	}
	return rows, nil
}
