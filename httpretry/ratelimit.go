package httpretry

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RateLimit is one item of the IETF RateLimit field
// (draft-ietf-httpapi-ratelimit-headers): the quota left under a policy and
// the time until it resets, as in
//
//	RateLimit: "default";r=0;t=30
type RateLimit struct {
	Policy    string        // the item: the policy's name
	Remaining int64         // r: requests left in the window; -1 if absent
	Reset     time.Duration // t: time until the quota resets; -1 if absent
}

// maxSFInteger is the largest Integer a Structured Field may carry (RFC 8941).
const maxSFInteger = 999_999_999_999_999

// ParseRateLimit parses a RateLimit field value: a Structured Field list of
// items (RFC 8941) whose parameters r and t are non-negative integers. ok is
// false if the value is not a valid list, in which case the whole field must
// be ignored, as RFC 8941 requires. Parameters other than r and t are parsed
// and ignored; an r or t that is not a non-negative integer is treated as
// absent. Inner lists are invalid in this field.
func ParseRateLimit(value string) (limits []RateLimit, ok bool) {
	p := sfParser{s: value}
	p.skip(" ")
	if p.done() {
		return nil, false // an empty list is not a RateLimit
	}
	for {
		item, ok := p.bareItem()
		if !ok {
			return nil, false
		}
		rl := RateLimit{Policy: item.str, Remaining: -1, Reset: -1}
		for p.peek() == ';' {
			p.i++
			p.skip(" ")
			key, ok := p.key()
			if !ok {
				return nil, false
			}
			val := sfItem{kind: sfBool, n: 1}
			if p.peek() == '=' {
				p.i++
				if val, ok = p.bareItem(); !ok {
					return nil, false
				}
			}
			// A repeated key's last value wins (RFC 8941 section 3.1.2);
			// one that is not a non-negative integer leaves r or t absent.
			n := int64(-1)
			if val.kind == sfInteger && val.n >= 0 {
				n = val.n
			}
			switch key {
			case "r":
				rl.Remaining = n
			case "t":
				rl.Reset = -1
				if n >= 0 {
					rl.Reset = secondsToDuration(n)
				}
			}
		}
		limits = append(limits, rl)
		p.skip(" \t")
		if p.done() {
			return limits, true
		}
		if p.peek() != ',' {
			return nil, false
		}
		p.i++
		p.skip(" \t")
		if p.done() {
			return nil, false // trailing comma
		}
	}
}

// rateLimitWait reads the wait a response's rate-limit fields ask for. A
// reset is a wait only when no quota is left: the RateLimit field's policies
// with r=0 (a policy with quota left asks for no wait, however long its
// window), and the older drafts' RateLimit-Reset (delay-seconds) only with a
// RateLimit-Remaining of 0. The longest of these governs, so that a longer
// hint never yields a sooner retry.
func rateLimitWait(h http.Header) (time.Duration, bool) {
	wait, found := time.Duration(0), false
	if values := h.Values("RateLimit"); len(values) > 0 {
		if limits, ok := ParseRateLimit(strings.Join(values, ",")); ok {
			for _, l := range limits {
				if l.Remaining == 0 && l.Reset >= 0 {
					wait, found = max(wait, l.Reset), true
				}
			}
		}
	}
	if exhausted(h.Values("RateLimit-Remaining")) {
		for _, v := range h.Values("RateLimit-Reset") {
			if d, ok := parseDelaySeconds(strings.Trim(v, " \t")); ok {
				wait, found = max(wait, d), true
			}
		}
	}
	return wait, found
}

// exhausted reports whether a RateLimit-Remaining field says no quota is
// left: one of its lines is the integer 0.
func exhausted(remaining []string) bool {
	for _, v := range remaining {
		if v = strings.Trim(v, " \t"); v != "" && strings.Trim(v, "0") == "" {
			return true
		}
	}
	return false
}

type sfKind uint8

const (
	sfInteger sfKind = iota + 1
	sfDecimal
	sfString
	sfToken
	sfBytes
	sfBool
)

// sfItem is a parsed bare item. Only what RateLimit needs is kept: the text
// of strings and tokens, and the value of integers and booleans.
type sfItem struct {
	kind sfKind
	str  string
	n    int64
}

// sfParser parses the subset of RFC 8941 that RateLimit uses.
type sfParser struct {
	s string
	i int
}

func (p *sfParser) done() bool { return p.i >= len(p.s) }

func (p *sfParser) peek() byte {
	if p.done() {
		return 0
	}
	return p.s[p.i]
}

func (p *sfParser) skip(chars string) {
	for !p.done() && strings.IndexByte(chars, p.s[p.i]) >= 0 {
		p.i++
	}
}

func (p *sfParser) bareItem() (sfItem, bool) {
	switch c := p.peek(); {
	case c == '-' || isDigit(c):
		return p.number()
	case c == '"':
		return p.string()
	case c == '*' || isAlpha(c):
		start := p.i
		p.i++
		for !p.done() && (isTchar(p.s[p.i]) || p.s[p.i] == ':' || p.s[p.i] == '/') {
			p.i++
		}
		return sfItem{kind: sfToken, str: p.s[start:p.i]}, true
	case c == ':':
		p.i++
		for !p.done() && p.s[p.i] != ':' {
			if c := p.s[p.i]; !(isAlpha(c) || isDigit(c) || c == '+' || c == '/' || c == '=') {
				return sfItem{}, false
			}
			p.i++
		}
		if p.done() {
			return sfItem{}, false
		}
		p.i++
		return sfItem{kind: sfBytes}, true
	case c == '?':
		p.i++
		switch p.peek() {
		case '0', '1':
			n := int64(p.s[p.i] - '0')
			p.i++
			return sfItem{kind: sfBool, n: n}, true
		}
	}
	return sfItem{}, false
}

func (p *sfParser) number() (sfItem, bool) {
	start := p.i
	if p.peek() == '-' {
		p.i++
	}
	digits := p.i
	for !p.done() && isDigit(p.s[p.i]) {
		p.i++
	}
	intLen := p.i - digits
	if intLen == 0 {
		return sfItem{}, false
	}
	if p.peek() != '.' {
		if intLen > 15 {
			return sfItem{}, false
		}
		n, err := strconv.ParseInt(p.s[start:p.i], 10, 64)
		if err != nil || n > maxSFInteger || n < -maxSFInteger {
			return sfItem{}, false
		}
		return sfItem{kind: sfInteger, n: n}, true
	}
	if intLen > 12 {
		return sfItem{}, false
	}
	p.i++
	frac := p.i
	for !p.done() && isDigit(p.s[p.i]) {
		p.i++
	}
	if n := p.i - frac; n == 0 || n > 3 {
		return sfItem{}, false
	}
	return sfItem{kind: sfDecimal}, true
}

func (p *sfParser) string() (sfItem, bool) {
	p.i++ // opening quote
	var b strings.Builder
	for !p.done() {
		c := p.s[p.i]
		p.i++
		switch {
		case c == '"':
			return sfItem{kind: sfString, str: b.String()}, true
		case c == '\\':
			if p.done() || (p.s[p.i] != '"' && p.s[p.i] != '\\') {
				return sfItem{}, false
			}
			b.WriteByte(p.s[p.i])
			p.i++
		case c < 0x20 || c > 0x7e:
			return sfItem{}, false
		default:
			b.WriteByte(c)
		}
	}
	return sfItem{}, false // unterminated
}

func (p *sfParser) key() (string, bool) {
	start := p.i
	if c := p.peek(); !(c == '*' || ('a' <= c && c <= 'z')) {
		return "", false
	}
	p.i++
	for !p.done() {
		c := p.s[p.i]
		if !(('a' <= c && c <= 'z') || isDigit(c) || c == '_' || c == '-' || c == '.' || c == '*') {
			break
		}
		p.i++
	}
	return p.s[start:p.i], true
}

func isAlpha(c byte) bool { return ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') }

// isTchar reports whether c is a token character (RFC 9110 5.6.2).
func isTchar(c byte) bool {
	return isAlpha(c) || isDigit(c) || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
