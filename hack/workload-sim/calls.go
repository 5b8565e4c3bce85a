package main

// Its own vCenter requests, counted: hack/bench-peers.sh measures a controller by what vcsim
// received (/__vcsim/stats), and this program polls the same vcsim (a container view read every
// --poll, guest IP reports), so the bench subtracts what it reads from GET /vcenter-calls.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"sync/atomic"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/soap"
)

// calls: the SOAP requests sent (POSTs, as vcsim counts them) and, of those, the long polls
// (WaitForUpdatesEx, which the bench's quiet check ignores).
var calls struct{ soap, waits atomic.Uint64 }

type countingTransport struct{ next http.RoundTripper }

// RoundTrip counts a request once its response arrived: vcsim counts it on receipt, so a count
// read here never runs ahead of vcsim's.
func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodPost {
		return t.next.RoundTrip(r)
	}
	wait := false
	if r.Body != nil {
		body, err := io.ReadAll(r.Body)
		_ = r.Body.Close()
		if err != nil {
			return nil, err
		}
		wait = bytes.Contains(body, []byte("WaitForUpdatesEx"))
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	resp, err := t.next.RoundTrip(r)
	if err == nil {
		calls.soap.Add(1)
		if wait {
			calls.waits.Add(1)
		}
	}
	return resp, err
}

// newCountedClient is govmomi.NewClient with every request counted (login included).
func newCountedClient(ctx context.Context, u *url.URL, insecure bool) (*govmomi.Client, error) {
	sc := soap.NewClient(u, insecure)
	sc.Client.Transport = countingTransport{next: sc.Client.Transport}
	vc, err := vim25.NewClient(ctx, sc)
	if err != nil {
		return nil, err
	}
	c := &govmomi.Client{Client: vc, SessionManager: session.NewManager(vc)}
	if u.User != nil {
		if err := c.Login(ctx, u.User); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// withCalls serves GET /vcenter-calls ({"soap":N,"waitForUpdates":M}) beside next.
func withCalls(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/vcenter-calls" && r.Method == http.MethodGet {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]uint64{"soap": calls.soap.Load(), "waitForUpdates": calls.waits.Load()})
			return
		}
		next.ServeHTTP(w, r)
	})
}
