package forrst

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// DefaultMaxDocumentSize bounds the documents this package reads: 1 MiB, the
// Forrst HTTP transport's default.
const DefaultMaxDocumentSize = 1 << 20

// Errors of decoding. The errors returned wrap one of them.
var (
	// ErrTooLarge: the document is larger than the size limit.
	ErrTooLarge = errors.New("forrst: document too large")
	// ErrMalformed: the document is not valid JSON, or is followed by more
	// data, or could not be read whole (the reader's error is in the chain
	// too). A server answers it with PARSE_ERROR.
	ErrMalformed = errors.New("forrst: malformed document")
	// ErrInvalid: the document is JSON but breaks the protocol, a document
	// that is not an object (an array, a number, a string, null) among them.
	// A server answers it with INVALID_REQUEST, as the Forrst reference
	// server does.
	ErrInvalid = errors.New("forrst: invalid document")
)

// DecodeRequest reads one request document of at most limit bytes (0 means
// DefaultMaxDocumentSize) and checks it: the protocol name, an id, a
// function, objects where objects belong. Members it does not know are
// ignored, as the protocol asks of receivers; one it knows given twice, in
// the same or another letter case, is invalid (ErrInvalid), since which of
// them a reader takes is not defined (encoding/json alone takes the last).
// Extension URNs in the reference server's form (urn:cline:forrst:ext:…)
// are rewritten in the specification's (urn:forrst:ext:…).
func DecodeRequest(r io.Reader, limit int64) (*Request, error) {
	var req Request
	if err := decode(r, limit, &req); err != nil {
		return nil, err
	}
	if err := req.validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	canonicalize(req.Extensions)
	return &req, nil
}

// DecodeResponse reads one response document of at most limit bytes (0
// means DefaultMaxDocumentSize) and checks it. Like DecodeRequest, it
// rewrites the reference server's extension URNs in the specification's form.
func DecodeResponse(r io.Reader, limit int64) (*Response, error) {
	var resp Response
	if err := decode(r, limit, &resp); err != nil {
		return nil, err
	}
	if err := resp.validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	canonicalize(resp.Extensions)
	return &resp, nil
}

// decode reads a single JSON object into v.
func decode(r io.Reader, limit int64, v any) error {
	if limit <= 0 {
		limit = DefaultMaxDocumentSize
	}
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if int64(len(data)) > limit {
		return fmt.Errorf("%w: more than %d bytes", ErrTooLarge, limit)
	}
	if t := bytes.TrimSpace(data); len(t) == 0 || t[0] != '{' {
		// Well-formed JSON of another kind is a document that breaks the
		// protocol, not one that cannot be parsed.
		if len(t) > 0 && json.Valid(t) {
			return fmt.Errorf("%w: a document is a JSON object, not %s", ErrInvalid, kind(t[0]))
		}
		return fmt.Errorf("%w: not a JSON object", ErrMalformed)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return fmt.Errorf("%w: %s has the wrong type (%s)", ErrInvalid, ute.Field, ute.Value)
		}
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: data after the document", ErrMalformed)
	}
	// A member of the envelope given twice, in any letter case, is one that
	// encoding/json read last and another reader may read first.
	if err := checkMembers(json.NewDecoder(bytes.NewReader(data)), reflect.TypeOf(v), false); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return nil
}

// kind names the kind of the JSON value that starts with c.
func kind(c byte) string {
	switch c {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// decodeData decodes an extension's data or options strictly into v, a
// pointer to a struct: wrong types, unknown members and a member given twice
// are errors. Member names match exactly, as RFC 8259 (section 8.3) compares
// them for interoperability and as other readers of the extension do:
// encoding/json alone would take a name in another letter case for the
// member, and of a member given twice in any case keep the last, where
// another reader may keep the first. Guidance that says two things says
// neither.
func decodeData(raw json.RawMessage, v any) error {
	if isNull(raw) {
		return fmt.Errorf("%w: no data", ErrInvalid)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: data after the object", ErrInvalid)
	}
	if err := checkMembers(json.NewDecoder(bytes.NewReader(raw)), reflect.TypeOf(v), true); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return nil
}

// checkMembers reads the next JSON value from dec, which decoded into a Go
// value of type t, and checks its objects: no member is given twice, in the
// same or (for an object decoded into a struct) another letter case. The
// structs are this package's own: their members named by json tags, none
// embedded.
//
// exact is the extension decoders' reading: the members of an object
// decoded into a struct must be the struct's, spelled exactly, and a value
// held as it was sent (json.RawMessage) may hold any members, but none
// twice. Otherwise, the documents' reading, members the struct does not
// name and values held as sent are left to whoever reads them.
func checkMembers(dec *json.Decoder, t reflect.Type, exact bool) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if !exact && (t == nil || t == rawMessage) {
		var skip json.RawMessage
		return dec.Decode(&skip)
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		seen := make(map[string]bool)
		for dec.More() {
			key, err := dec.Token()
			if err != nil {
				return err
			}
			name, _ := key.(string)
			which, elem := name, reflect.Type(nil) // the member the name is; elem nil: any members
			switch {
			case t == nil:
			case t.Kind() == reflect.Struct:
				if which, elem, err = member(t, name, exact); err != nil {
					return err
				}
			case t.Kind() == reflect.Map:
				elem = t.Elem()
			}
			if seen[which] {
				return fmt.Errorf("the member %q is given twice", which)
			}
			if which != "" {
				seen[which] = true
			}
			if err := checkMembers(dec, elem, exact); err != nil {
				return err
			}
		}
	case json.Delim('['):
		var elem reflect.Type
		if t != nil && t.Kind() == reflect.Slice {
			elem = t.Elem()
		}
		for dec.More() {
			if err := checkMembers(dec, elem, exact); err != nil {
				return err
			}
		}
	default:
		return nil
	}
	_, err = dec.Token() // '}' or ']'
	return err
}

var rawMessage = reflect.TypeFor[json.RawMessage]()

// member returns the json name and the type of the field of struct t that
// the member name decodes into: spelled exactly if exact, else in any letter
// case, as encoding/json matches it. A name no field has is an error if
// exact, else a member nobody reads ("", nil).
func member(t reflect.Type, name string, exact bool) (string, reflect.Type, error) {
	for f := range t.Fields() {
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "" {
			tag = f.Name
		}
		switch {
		case !f.IsExported() || tag == "-":
		case tag == name || (!exact && strings.EqualFold(tag, name)):
			return tag, f.Type, nil
		case strings.EqualFold(tag, name):
			return "", nil, fmt.Errorf("unknown member %q (member names are case-sensitive: the member is %q)", name, tag)
		}
	}
	if exact {
		return "", nil, fmt.Errorf("unknown member %q", name)
	}
	return "", nil, nil
}
