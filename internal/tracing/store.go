package tracing

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/idgen-project/idgen/allocator"
	"github.com/idgen-project/idgen/snowflake"
)

// Attribute keys of the store spans, besides db.system.name.
const (
	AttrRequestID      = "idgen.request_id"
	AttrDatacenter     = "idgen.datacenter_id"
	AttrWorker         = "idgen.worker_id"
	AttrWorkerMin      = "idgen.worker_id.min"
	AttrWorkerMax      = "idgen.worker_id.max"
	AttrFencingVersion = "idgen.fencing_version"
	AttrHolder         = "idgen.holder"
	AttrCeilingMS      = "idgen.lease.ceiling_ms"
	AttrTakeover       = "idgen.lease.takeover"
	AttrNamespace      = "idgen.namespace"
	AttrCount          = "idgen.segment.count"
	AttrFirst          = "idgen.segment.first"
	AttrLast           = "idgen.segment.last"
	AttrReturned       = "idgen.segment.returned"
	AttrRows           = "idgen.rows"
)

// The span names of the store calls.
const (
	SpanEnsureLayout     = "idgen.layout.ensure"
	SpanClaim            = "idgen.lease.claim"
	SpanHeartbeat        = "idgen.lease.heartbeat"
	SpanRelease          = "idgen.lease.release"
	SpanRecordLeaseEvent = "idgen.lease.record_event"
	SpanListLeases       = "idgen.admin.list_leases"
	SpanListLeaseEvents  = "idgen.admin.list_lease_events"
	SpanPruneLeaseEvents = "idgen.admin.prune_lease_events"
	SpanEvict            = "idgen.admin.evict"
	SpanGetNamespace     = "idgen.namespace.get"
	SpanFetchSegment     = "idgen.segment.fetch"
	SpanReturnTail       = "idgen.segment.return_tail"
	SpanCreateNamespace  = "idgen.admin.create_namespace"
	SpanListNamespaces   = "idgen.admin.list_namespaces"
	SpanDeleteNamespace  = "idgen.admin.delete_namespace"
	SpanUpdateNamespace  = "idgen.admin.update_namespace"
)

// Store is an allocator.Store giving each call a client span. Ping, Close
// and methods not overridden here are not traced.
type Store struct {
	allocator.Store
	tracer trace.Tracer
	system attribute.KeyValue
}

// WrapStore returns store traced by tp; system is db.system.name or "".
func WrapStore(store allocator.Store, tp trace.TracerProvider, system string) *Store {
	s := &Store{Store: store, tracer: tp.Tracer(InstrumentationName + "/store")}
	if system != "" {
		s.system = attribute.String("db.system.name", system)
	}
	return s
}

// Unwrap returns the store that s traces.
func (s *Store) Unwrap() allocator.Store { return s.Store }

func (s *Store) start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if s.system.Valid() {
		attrs = append(attrs, s.system)
	}
	return s.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

func end(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

func requestID(id string) []attribute.KeyValue {
	if id == "" {
		return nil
	}
	return []attribute.KeyValue{attribute.String(AttrRequestID, id)}
}

func leaseAttrs(l allocator.Lease) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.Int64(AttrDatacenter, l.DatacenterID),
		attribute.Int64(AttrWorker, l.WorkerID),
		attribute.Int64(AttrFencingVersion, l.FencingVersion),
		attribute.Int64(AttrCeilingMS, l.CeilingMS),
	}
}

func keyAttrs(k allocator.LeaseKey, fencing int64, holder string) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.Int64(AttrDatacenter, k.DatacenterID),
		attribute.Int64(AttrWorker, k.WorkerID),
		attribute.Int64(AttrFencingVersion, fencing),
		attribute.String(AttrHolder, holder),
	}
}

// EnsureLayout traces LeaseStore.EnsureLayout.
func (s *Store) EnsureLayout(ctx context.Context, layout snowflake.Layout) (snowflake.Layout, error) {
	ctx, span := s.start(ctx, SpanEnsureLayout)
	got, err := s.Store.EnsureLayout(ctx, layout)
	end(span, err)
	return got, err
}

// Claim traces LeaseStore.Claim: the pool asked for, and the lease won.
func (s *Store) Claim(ctx context.Context, req allocator.ClaimRequest) (allocator.ClaimResult, error) {
	ctx, span := s.start(ctx, SpanClaim, append(requestID(req.RequestID),
		attribute.Int64(AttrDatacenter, req.DatacenterID),
		attribute.Int64(AttrWorkerMin, req.MinWorkerID),
		attribute.Int64(AttrWorkerMax, req.MaxWorkerID),
		attribute.String(AttrHolder, req.Holder))...)
	res, err := s.Store.Claim(ctx, req)
	if err == nil {
		span.SetAttributes(leaseAttrs(res.Lease)...)
		span.SetAttributes(attribute.Bool(AttrTakeover, res.PrevHolder != ""))
	}
	end(span, err)
	return res, err
}

// Heartbeat traces LeaseStore.Heartbeat; a lost lease is an error.
func (s *Store) Heartbeat(ctx context.Context, req allocator.HeartbeatRequest) (allocator.Lease, time.Time, error) {
	ctx, span := s.start(ctx, SpanHeartbeat, keyAttrs(req.Key, req.FencingVersion, req.Holder)...)
	l, now, err := s.Store.Heartbeat(ctx, req)
	if err == nil {
		span.SetAttributes(attribute.Int64(AttrCeilingMS, l.CeilingMS))
	}
	end(span, err)
	return l, now, err
}

// Release traces LeaseStore.Release.
func (s *Store) Release(ctx context.Context, req allocator.ReleaseRequest) (int64, error) {
	ctx, span := s.start(ctx, SpanRelease, append(requestID(req.RequestID), keyAttrs(req.Key, req.FencingVersion, req.Holder)...)...)
	ceiling, err := s.Store.Release(ctx, req)
	if err == nil {
		span.SetAttributes(attribute.Int64(AttrCeilingMS, ceiling))
	}
	end(span, err)
	return ceiling, err
}

// RecordLeaseEvent traces LeaseStore.RecordLeaseEvent.
func (s *Store) RecordLeaseEvent(ctx context.Context, ev allocator.LeaseEvent) error {
	ctx, span := s.start(ctx, SpanRecordLeaseEvent, append(requestID(ev.RequestID),
		attribute.String("idgen.lease.event", string(ev.Kind)))...)
	err := s.Store.RecordLeaseEvent(ctx, ev)
	end(span, err)
	return err
}

// ListLeases traces LeaseAdmin.ListLeases.
func (s *Store) ListLeases(ctx context.Context) ([]allocator.Lease, error) {
	return traceList(ctx, s, SpanListLeases, s.Store.ListLeases)
}

// ListLeaseEvents traces LeaseAdmin.ListLeaseEvents.
func (s *Store) ListLeaseEvents(ctx context.Context, f allocator.LeaseEventFilter) ([]allocator.LeaseEvent, error) {
	return traceList(ctx, s, SpanListLeaseEvents, func(ctx context.Context) ([]allocator.LeaseEvent, error) {
		return s.Store.ListLeaseEvents(ctx, f)
	})
}

// traceList runs call in a span that records how many rows it returned.
func traceList[T any](ctx context.Context, s *Store, spanName string, call func(context.Context) ([]T, error)) ([]T, error) {
	ctx, span := s.start(ctx, spanName)
	rows, err := call(ctx)
	span.SetAttributes(attribute.Int(AttrRows, len(rows)))
	end(span, err)
	return rows, err
}

// PruneLeaseEvents traces LeaseAdmin.PruneLeaseEvents.
func (s *Store) PruneLeaseEvents(ctx context.Context, before time.Time) (int64, error) {
	ctx, span := s.start(ctx, SpanPruneLeaseEvents)
	n, err := s.Store.PruneLeaseEvents(ctx, before)
	span.SetAttributes(attribute.Int64(AttrRows, n))
	end(span, err)
	return n, err
}

// Evict traces LeaseAdmin.Evict.
func (s *Store) Evict(ctx context.Context, req allocator.EvictRequest) (allocator.Lease, error) {
	ctx, span := s.start(ctx, SpanEvict, append(requestID(req.RequestID),
		attribute.Int64(AttrDatacenter, req.Key.DatacenterID),
		attribute.Int64(AttrWorker, req.Key.WorkerID))...)
	l, err := s.Store.Evict(ctx, req)
	if err == nil {
		span.SetAttributes(attribute.Int64(AttrFencingVersion, l.FencingVersion))
	}
	end(span, err)
	return l, err
}

// GetNamespace traces SegmentStore.GetNamespace (and NamespaceAdmin's).
func (s *Store) GetNamespace(ctx context.Context, name string) (allocator.Namespace, error) {
	return s.namespaceCall(ctx, SpanGetNamespace, name, func(ctx context.Context) (allocator.Namespace, error) {
		return s.Store.GetNamespace(ctx, name)
	})
}

// FetchSegment traces SegmentStore.FetchSegment.
func (s *Store) FetchSegment(ctx context.Context, name string, n int64) (allocator.Segment, error) {
	ctx, span := s.start(ctx, SpanFetchSegment, attribute.String(AttrNamespace, name), attribute.Int64(AttrCount, n))
	seg, err := s.Store.FetchSegment(ctx, name, n)
	if err == nil {
		span.SetAttributes(attribute.Int64(AttrFirst, seg.First), attribute.Int64(AttrLast, seg.Last))
	}
	end(span, err)
	return seg, err
}

// ReturnTail traces SegmentStore.ReturnTail.
func (s *Store) ReturnTail(ctx context.Context, name string, expectMaxID, expectVersion, newMaxID int64) (bool, error) {
	ctx, span := s.start(ctx, SpanReturnTail, attribute.String(AttrNamespace, name),
		attribute.Int64(AttrFirst, newMaxID+1), attribute.Int64(AttrLast, expectMaxID))
	ok, err := s.Store.ReturnTail(ctx, name, expectMaxID, expectVersion, newMaxID)
	span.SetAttributes(attribute.Bool(AttrReturned, ok))
	end(span, err)
	return ok, err
}

// CreateNamespace traces NamespaceAdmin.CreateNamespace.
func (s *Store) CreateNamespace(ctx context.Context, ns allocator.Namespace) (allocator.Namespace, error) {
	return s.namespaceCall(ctx, SpanCreateNamespace, ns.Name, func(ctx context.Context) (allocator.Namespace, error) {
		return s.Store.CreateNamespace(ctx, ns)
	})
}

// ListNamespaces traces NamespaceAdmin.ListNamespaces.
func (s *Store) ListNamespaces(ctx context.Context) ([]allocator.Namespace, error) {
	return traceList(ctx, s, SpanListNamespaces, s.Store.ListNamespaces)
}

// DeleteNamespace traces NamespaceAdmin.DeleteNamespace.
func (s *Store) DeleteNamespace(ctx context.Context, name string) (allocator.Namespace, error) {
	return s.namespaceCall(ctx, SpanDeleteNamespace, name, func(ctx context.Context) (allocator.Namespace, error) {
		return s.Store.DeleteNamespace(ctx, name)
	})
}

// UpdateNamespace traces NamespaceAdmin.UpdateNamespace.
func (s *Store) UpdateNamespace(ctx context.Context, name string, u allocator.NamespaceUpdate) (allocator.Namespace, error) {
	return s.namespaceCall(ctx, SpanUpdateNamespace, name, func(ctx context.Context) (allocator.Namespace, error) {
		return s.Store.UpdateNamespace(ctx, name, u)
	})
}

// namespaceCall runs call in a span with the namespace's name.
func (s *Store) namespaceCall(ctx context.Context, spanName, name string, call func(context.Context) (allocator.Namespace, error)) (allocator.Namespace, error) {
	ctx, span := s.start(ctx, spanName, attribute.String(AttrNamespace, name))
	ns, err := call(ctx)
	end(span, err)
	return ns, err
}
