package main

import "regexp"

// fieldFlags maps each settings field errors name ("KeeperSettings.TTL") to
// serve's flag, so messages name the flag. TestFieldFlags checks them.
var fieldFlags = map[string]string{
	"Config.AllowUnsafeDurability": "allow-unsafe-durability",
	"Config.DSN":                   "dsn",
	"Config.Listen":                "listen",
	"Config.MaxCount":              "max-count",
	"Config.ShutdownTimeout":       "shutdown-timeout",
	"Config.StateFile":             "state-file",
	"Config.TokensFile":            "tokens-file",
	"Config.LeaseEventsRetention":  "lease-events-retention",
	"Config.EtcdCompactRetention":  "etcd-compact-retention",
	"Settings.MaxCount":            "max-count",
	"TracingConfig.SampleRatio":    "trace-sample-ratio",

	"KeeperSettings.DatacenterID":    "datacenter",
	"KeeperSettings.WorkerIDs":       "worker-ids",
	"KeeperSettings.Holder":          "holder",
	"KeeperSettings.TTL":             "lease-ttl",
	"KeeperSettings.Heartbeat":       "heartbeat",
	"KeeperSettings.Margin":          "lease-margin",
	"KeeperSettings.MaxClockOffset":  "max-clock-offset",
	"KeeperSettings.MaxBackwardWait": "max-backward-wait",

	"SegmentSettings.Threshold":   "segment-prefetch-threshold",
	"SegmentSettings.GrowBelow":   "segment-grow-below",
	"SegmentSettings.ShrinkAbove": "segment-shrink-above",

	"LeaseSettings.MinTTL":       "lease-api-min-ttl",
	"LeaseSettings.MaxTTL":       "lease-api-max-ttl",
	"LeaseSettings.WorkerIDs":    "lease-api-worker-ids",
	"LeaseSettings.MaxLeases":    "lease-api-max-leases",
	"LeaseSettings.AcquireRate":  "lease-api-acquire-rate",
	"LeaseSettings.AcquireBurst": "lease-api-acquire-burst",

	"AuditConfig.Sink":               "audit-sink",
	"RecorderSettings.Buffer":        "audit-buffer",
	"RecorderSettings.BatchSize":     "audit-batch",
	"RecorderSettings.FlushInterval": "audit-flush-interval",
	"RecorderSettings.BlockInterval": "audit-block-interval",

	"RateLimit.Rate":         "rate-limit",
	"RateLimit.Burst":        "rate-burst",
	"RateLimit.MaxAddresses": "rate-limit-addresses",
}

// fieldName matches what may be a field in a message: Type.Field.
var fieldName = regexp.MustCompile(`\b[A-Z][A-Za-z]*\.[A-Z][A-Za-z]*\b`)

// flagWords replaces the fields msg names with their flags.
func flagWords(msg string) string {
	return fieldName.ReplaceAllStringFunc(msg, func(f string) string {
		if name, ok := fieldFlags[f]; ok {
			return "--" + name
		}
		return f
	})
}

// fieldUsage is cmd's usage error for settings error err, in flag words.
func fieldUsage(cmd string, err error) error {
	return usagef(cmd, "%s", flagWords(err.Error()))
}

// flagWorded rewords an error in flag words; Is and As see the original.
type flagWorded struct{ err error }

func (e flagWorded) Error() string { return flagWords(e.err.Error()) }
func (e flagWorded) Unwrap() error { return e.err }
