package httpretry

// Request bodies that were never read, on loopback: a real http.Transport
// against a real server, a refused dial to a closed port.

import (
	"context"
	"io"
	"strings"
	"testing"
)

// A body larger than BufferBody and without GetBody cannot be buffered, but
// as long as the transport has not read a byte of it, it is as good as new:
// after a refused dial it is sent on the retry, whole and once, and closed
// once.
func TestUnreadBodyOverBufferBodyIsSentAfterARefusedDial(t *testing.T) {
	payload := strings.Repeat("0123456789abcdef", 4096) // 64 KiB
	const bufferBody = 1024
	bodies := map[string]func(t *testing.T) io.ReadCloser{
		"MultiReader": func(*testing.T) io.ReadCloser {
			return io.NopCloser(io.MultiReader(strings.NewReader(payload[:1000]), strings.NewReader(payload[1000:])))
		},
		"pipe": func(t *testing.T) io.ReadCloser {
			pr, pw := io.Pipe()
			go func() {
				for i := 0; i < len(payload); i += 4096 {
					if _, err := pw.Write([]byte(payload[i : i+4096])); err != nil {
						return // the reader was closed
					}
				}
				pw.Close()
			}()
			t.Cleanup(func() { pr.Close() })
			return pr
		},
	}
	for name, open := range bodies {
		t.Run(name, func(t *testing.T) {
			srv := newServer(t, failFirst(0, 0))
			base := refusedOnce(t, 1)
			defer base.CloseIdleConnections()
			obs := &observed{base: base}
			body := &countingBody{rc: open(t)} // no GetBody
			tr := &Transport{Base: obs, Strategy: noWait(), BufferBody: bufferBody}
			resp, err, rep := send(t, tr, context.Background(), "POST", srv.URL, body)
			if err != nil {
				t.Fatalf("err %v, report %+v", err, rep)
			}
			discard(resp)
			reqs := srv.requests()
			if resp.StatusCode != 200 || len(obs.calls()) != 2 || rep.Attempts != 2 || rep.Reason != nil || len(reqs) != 1 {
				t.Fatalf("got %d after %d attempts (report %+v); the server saw %d requests, want 1",
					resp.StatusCode, len(obs.calls()), rep, len(reqs))
			}
			if reqs[0].body != payload {
				t.Fatalf("the server received %d bytes, not the %d-byte payload", len(reqs[0].body), len(payload))
			}
			if read, closes := body.counts(); read != int64(len(payload)) || closes != 1 {
				t.Fatalf("body: %d bytes read, %d closes; want %d read, closed once", read, closes, len(payload))
			}
		})
	}
}
