package forrst

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// IdempotencyOptions are the request options of the idempotency extension
// (urn:forrst:ext:idempotency): calls with the same key run once.
type IdempotencyOptions struct {
	Key string    `json:"key"`
	TTL *Duration `json:"ttl,omitempty"` // how long the result is kept; the server's default if nil
}

// IdempotencyData is the idempotency extension's response data.
type IdempotencyData struct {
	Key               string `json:"key"`
	Status            string `json:"status"` // processed, cached, processing or conflict
	OriginalRequestID string `json:"original_request_id,omitempty"`
	CachedAt          string `json:"cached_at,omitempty"`  // RFC 3339, on replays
	ExpiresAt         string `json:"expires_at,omitempty"` // RFC 3339
}

// Idempotency statuses.
const (
	StatusProcessed  = "processed"  // this call ran the function
	StatusCached     = "cached"     // this call replays an earlier result
	StatusProcessing = "processing" // an earlier call with the key is still running
	StatusConflict   = "conflict"   // the key was used with other arguments
)

// Limits of idempotency options.
const (
	maxKeyLength = 255
	maxTTL       = 30 * 24 * time.Hour
)

// IdempotencyOptions decodes and checks the idempotency extension's options:
// a key of 1 to 255 characters from A-Z a-z 0-9 - _ : . and a positive ttl
// of at most 30 days.
func (e Extension) IdempotencyOptions() (IdempotencyOptions, error) {
	var o IdempotencyOptions
	if err := decodeData(e.Options, &o); err != nil {
		return IdempotencyOptions{}, fmt.Errorf("idempotency extension: %w", err)
	}
	if err := validKey(o.Key); err != nil {
		return IdempotencyOptions{}, err
	}
	if o.TTL != nil {
		d, err := o.TTL.Duration()
		if err != nil || d <= 0 || d > maxTTL {
			return IdempotencyOptions{}, fmt.Errorf("%w: idempotency extension: ttl must be positive and at most 30 days", ErrInvalid)
		}
	}
	return o, nil
}

// Idempotency decodes the idempotency extension's response data.
func (e Extension) Idempotency() (IdempotencyData, error) {
	var d IdempotencyData
	if err := decodeData(e.Data, &d); err != nil {
		return IdempotencyData{}, fmt.Errorf("idempotency extension: %w", err)
	}
	return d, nil
}

func validKey(key string) error {
	if key == "" || len(key) > maxKeyLength {
		return fmt.Errorf("%w: idempotency key must have 1 to %d characters", ErrInvalid, maxKeyLength)
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !(isAlnum(c) || c == '-' || c == '_' || c == ':' || c == '.') {
			return fmt.Errorf("%w: idempotency key has a character other than A-Z, a-z, 0-9, \"-\", \"_\", \":\" and \".\"", ErrInvalid)
		}
	}
	return nil
}

func isAlnum(c byte) bool {
	return ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
}

func (d IdempotencyData) extension() Extension {
	data, _ := json.Marshal(d) // cannot fail: plain fields
	return Extension{URN: URNIdempotency, Data: data}
}

// argumentsHash identifies a call's arguments: the same arguments, however
// spaced or ordered, hash the same, and numbers keep every digit.
func argumentsHash(raw json.RawMessage) string {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil || v == nil {
		v = map[string]any{}
	}
	canonical, _ := json.Marshal(v) // maps marshal with sorted keys
	sum := sha256.Sum256(canonical)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// store remembers calls by idempotency key. It holds a bounded number of
// entries: expired ones are dropped first, then the oldest finished ones;
// calls still running are never dropped.
type store struct {
	mu      sync.Mutex
	entries map[string]*entry
}

type entry struct {
	hash      string // of the arguments
	requestID string // of the call that ran the function
	ttl       time.Duration
	done      bool
	status    int      // HTTP status of the stored response
	resp      Response // result or errors, to replay
	cachedAt  time.Time
	expires   time.Time // once done: when the stored response is forgotten
}

// live reports whether e still holds its key: a call that is still running
// always does, a finished one until it expires.
func (e *entry) live(now time.Time) bool { return !e.done || now.Before(e.expires) }

// claim outcomes.
const (
	claimed    = iota // the caller runs the function and must finish or abandon
	replay            // a stored response answers the call
	processing        // another call with the key is running
	conflict          // the key was used with other arguments
	full              // no room to remember another call
)

// claim looks key up for a call with arguments hash.
func (s *store) claim(key, hash, requestID string, now time.Time, ttl time.Duration, limit int) (int, entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.entries[key]; ok && e.live(now) {
		switch {
		case e.hash != hash:
			return conflict, *e
		case !e.done:
			return processing, *e
		}
		return replay, *e
	}
	if s.entries == nil {
		s.entries = make(map[string]*entry)
	}
	delete(s.entries, key) // expired
	if len(s.entries) >= limit && !s.makeRoom(now, limit) {
		return full, entry{}
	}
	e := &entry{hash: hash, requestID: requestID, ttl: ttl, expires: now.Add(ttl)}
	s.entries[key] = e
	return claimed, *e
}

// finish stores the response of a claimed call, to be replayed until the
// entry expires.
func (s *store) finish(key string, status int, resp Response, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.entries[key]; ok {
		e.done, e.status, e.resp, e.cachedAt, e.expires = true, status, resp, now, now.Add(e.ttl)
	}
}

// abandon forgets a claimed call, so that a retry runs the function again:
// for failures worth retrying.
func (s *store) abandon(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.entries, key)
}

// makeRoom drops expired entries, then the oldest finished one, and reports
// whether there is room. Callers hold mu.
func (s *store) makeRoom(now time.Time, limit int) bool {
	var oldest string
	var oldestAt time.Time
	for k, e := range s.entries {
		if !e.live(now) {
			delete(s.entries, k)
			continue
		}
		if e.done && (oldest == "" || e.cachedAt.Before(oldestAt)) {
			oldest, oldestAt = k, e.cachedAt
		}
	}
	if len(s.entries) >= limit && oldest != "" {
		delete(s.entries, oldest)
	}
	return len(s.entries) < limit
}
