package retrytest

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

func TestServerNumbersAndRecordsRequests(t *testing.T) {
	srv := NewServer(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, strings.Repeat("x", n))
	})
	for i, method := range []string{"GET", "POST"} {
		req, _ := http.NewRequest(method, srv.URL, strings.NewReader("body"))
		req.Header.Set("X-Test", method)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if len(got) != i+1 {
			t.Fatalf("request %d was told number %d", i+1, len(got))
		}
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || reqs[1].Method != "POST" || reqs[1].Body != "body" || reqs[1].Header.Get("X-Test") != "POST" {
		t.Fatalf("recorded %+v", reqs)
	}
	if srv.Conns.Load() < 1 {
		t.Fatal("no connection counted")
	}
}

func TestDeadAddrRefusesDials(t *testing.T) {
	if c, err := net.Dial("tcp", DeadAddr(t)); err == nil {
		c.Close()
		t.Fatal("a dial to DeadAddr was accepted")
	}
}
