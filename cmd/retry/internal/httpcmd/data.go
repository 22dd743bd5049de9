package httpcmd

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// dataKind is how a data flag reads its argument, as curl's three do.
type dataKind int

const (
	dataText   dataKind = iota // -d, --data: @FILE is read with its CRs and LFs removed
	dataBinary                 // --data-binary: @FILE is read as it is
	dataRaw                    // --data-raw: a leading @ is data, not a file
)

func (k dataKind) flag() string {
	return [...]string{"-d", "--data-binary", "--data-raw"}[k]
}

// dataPart is one data flag as given.
type dataPart struct {
	kind dataKind
	arg  string
}

// dataList is the data flags in order. As curl does, it sends their data
// joined with &, so that -d a=1 -d b=2 sends a=1&b=2.
type dataList []dataPart

// dataFlag is the flag.Value of one of the data flags.
type dataFlag struct {
	list *dataList
	kind dataKind
}

func (f dataFlag) String() string { return "" }

func (f dataFlag) Set(v string) error {
	*f.list = append(*f.list, dataPart{f.kind, v})
	return nil
}

// open returns the body the data flags make. A single --data-binary @FILE
// of a plain file is read afresh for each attempt, not held in memory;
// anything else is read once and held.
func (l dataList) open(stdin io.Reader) (requestBody, error) {
	if len(l) == 1 {
		if b, ok, err := l[0].stream(); ok || err != nil {
			return b, err
		}
	}
	parts := make([][]byte, len(l))
	for i, p := range l {
		data, err := p.read(stdin)
		if err != nil {
			return requestBody{}, err
		}
		parts[i] = data
	}
	return bytesBody(bytes.Join(parts, []byte("&"))), nil
}

// file returns the file p names, "-" for the standard input, or "" if its
// argument is the data itself.
func (p dataPart) file() string {
	if name, ok := strings.CutPrefix(p.arg, "@"); ok && p.kind != dataRaw {
		return name
	}
	return ""
}

// read returns p's data. -d removes the line breaks of what it reads, as
// curl's does, so that a file's lines are one form: --data-binary keeps them.
func (p dataPart) read(stdin io.Reader) ([]byte, error) {
	var (
		data []byte
		err  error
	)
	switch name := p.file(); name {
	case "":
		return []byte(p.arg), nil
	case "-":
		if data, err = io.ReadAll(stdin); err != nil {
			return nil, fmt.Errorf("%s @-: reading the standard input: %v", p.kind.flag(), err)
		}
	default:
		if data, err = os.ReadFile(name); err != nil {
			return nil, fmt.Errorf("%s @%s: %v", p.kind.flag(), name, unwrapPath(err))
		}
	}
	if p.kind == dataText {
		data = bytes.ReplaceAll(bytes.ReplaceAll(data, []byte("\r"), nil), []byte("\n"), nil)
	}
	return data, nil
}

// stream returns, for --data-binary @FILE of a plain file that is not
// empty, a body that reads the file for each attempt; ok is false for any
// other data.
func (p dataPart) stream() (b requestBody, ok bool, err error) {
	name := p.file()
	if p.kind != dataBinary || name == "" || name == "-" {
		return requestBody{}, false, nil
	}
	f, err := os.Open(name)
	if err != nil {
		return requestBody{}, false, fmt.Errorf("%s @%s: %v", p.kind.flag(), name, unwrapPath(err))
	}
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() || info.Size() == 0 {
		f.Close() // a pipe, a device, or empty: read it once and hold it
		return requestBody{}, false, nil
	}
	size := info.Size()
	return requestBody{
		get:   func() (io.ReadCloser, error) { return io.NopCloser(io.NewSectionReader(f, 0, size)), nil },
		size:  size,
		close: func() { f.Close() },
	}, true, nil
}

// unwrapPath is err without the path an *os.PathError repeats.
func unwrapPath(err error) error {
	if inner := errors.Unwrap(err); inner != nil {
		return inner
	}
	return err
}
