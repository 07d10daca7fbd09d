package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Reservation is a block of a sequence's numbers (docs/sequences.md):
// confirm or void it; past ExpiresAt it expires.
type Reservation struct {
	ID        string
	Sequence  string
	Period    string
	Numbers   []int64
	Formatted []string // the numbers as the sequence's format writes them, in order
	State     string   // reserved, confirmed, voided or expired
	Caller    string
	RequestID string
	ReservedAt,
	ExpiresAt time.Time
}

// reservationJSON is a reservation as /v1/sequences answers it.
type reservationJSON struct {
	ReservationID string    `json:"reservation_id"`
	Sequence      string    `json:"sequence"`
	Period        string    `json:"period"`
	Numbers       []string  `json:"numbers"`
	Formatted     []string  `json:"formatted"`
	State         string    `json:"state"`
	Caller        string    `json:"caller"`
	RequestID     string    `json:"request_id"`
	ReservedAt    time.Time `json:"reserved_at"`
	ExpiresAt     time.Time `json:"expires_at"`
}

// Reserve reserves n consecutive numbers of sequence. It is never retried:
// a reservation whose answer is lost expires.
func (c *Client) Reserve(ctx context.Context, sequence string, n int) (Reservation, error) {
	if err := validNamespace(sequence); err != nil {
		return Reservation{}, err
	}
	if n < 1 {
		return Reservation{}, fmt.Errorf("%w: count %d: want at least 1", ErrInvalidInput, n)
	}
	body := []byte(`{"count":` + strconv.Itoa(n) + `}`)
	return c.sequenceCall(ctx, "/v1/sequences/"+sequence+"/reservations", body, http.StatusCreated)
}

// Confirm records reservation id's numbers as used; only its token may,
// and an expired one is refused with ErrConflict.
func (c *Client) Confirm(ctx context.Context, sequence, id string) (Reservation, error) {
	return c.settle(ctx, sequence, id, "confirm")
}

// Void records reservation id's numbers as unused; they are never reused.
func (c *Client) Void(ctx context.Context, sequence, id string) (Reservation, error) {
	return c.settle(ctx, sequence, id, "void")
}

func (c *Client) settle(ctx context.Context, sequence, id, op string) (Reservation, error) {
	if err := validNamespace(sequence); err != nil {
		return Reservation{}, err
	}
	if id == "" {
		return Reservation{}, fmt.Errorf("%w: empty reservation ID", ErrInvalidInput)
	}
	return c.sequenceCall(ctx, "/v1/sequences/"+sequence+"/reservations/"+url.PathEscape(id)+"/"+op, nil, http.StatusOK)
}

// sequenceCall POSTs body to path and decodes a reservation answered with
// status want. Never retried: reserving is not idempotent.
func (c *Client) sequenceCall(ctx context.Context, path string, body []byte, want int) (Reservation, error) {
	fail := func(err error) (Reservation, error) {
		return Reservation{}, fmt.Errorf("idgen client: POST %s: %w", path, err)
	}
	if !c.breaker.allow() {
		return fail(ErrCircuitOpen)
	}
	actx, cancel := context.WithTimeout(ctx, c.attemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, c.BaseURL()+path, bytes.NewReader(body))
	if err != nil {
		return fail(fmt.Errorf("%w: %w", ErrInvalidInput, err))
	}
	req.Header.Set("Accept", "application/json, application/problem+json")
	req.Header.Set("User-Agent", c.userAgent)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.breaker.done(outcomeFailure)
		return fail(&netError{err})
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	switch {
	case err != nil:
		c.breaker.done(outcomeFailure)
		return fail(&netError{fmt.Errorf("reading the response: %w", err)})
	case resp.StatusCode != want:
		e := newError(resp.StatusCode, resp.Header, data, c.clock.Now())
		if failure(e) {
			c.breaker.done(outcomeFailure)
		} else {
			c.breaker.done(outcomeSuccess)
		}
		return fail(e)
	case len(data) > maxBody:
		c.breaker.done(outcomeSuccess)
		return fail(fmt.Errorf("%w: body larger than %d bytes", ErrBadResponse, maxBody))
	}
	c.breaker.done(outcomeSuccess)
	var rj reservationJSON
	if err := json.Unmarshal(data, &rj); err != nil {
		return fail(fmt.Errorf("%w: %w", ErrBadResponse, err))
	}
	r := Reservation{ID: rj.ReservationID, Sequence: rj.Sequence, Period: rj.Period, Formatted: rj.Formatted, State: rj.State,
		Caller: rj.Caller, RequestID: rj.RequestID, ReservedAt: rj.ReservedAt, ExpiresAt: rj.ExpiresAt}
	for _, s := range rj.Numbers {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fail(fmt.Errorf("%w: number %q", ErrBadResponse, s))
		}
		r.Numbers = append(r.Numbers, n)
	}
	if len(r.Numbers) != len(r.Formatted) || r.ID == "" {
		return fail(fmt.Errorf("%w: %d numbers and %d formatted", ErrBadResponse, len(r.Numbers), len(r.Formatted)))
	}
	return r, nil
}
