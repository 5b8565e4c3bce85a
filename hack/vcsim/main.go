// Command vcsim is the vCenter simulator used by the vsphere-provider tests.
//
// It is a thin main over the govmomi simulator, built in module mode by hack/vcsim/build.sh
// against the govmomi version pinned in hack/vcsim/go.mod:
//
//	cd hack/vcsim && go build -mod=readonly -o OUT .
//
// On top of upstream vcsim it serves a small control API on the same listener:
//
//	POST /__vcsim/fault            queue a fault: {"kind":"http503|drop|notauthenticated|delay",
//	                               "count":N, "method":"RetrievePropertiesEx", "delay_ms":500}
//	                               or {"kind":"poweron-refuse","vm":"NAME","count":N,"message":"..."}:
//	                               the next N PowerOnMultiVM_Task batches naming VM NAME leave it
//	                               not attempted (InsufficientResourcesFault), see poweron.go
//	GET  /__vcsim/fault            list the queued faults
//	DELETE /__vcsim/fault          clear the queue
//	POST /__vcsim/sessions/expire  terminate every SOAP and REST session
//	GET  /__vcsim/stats            {"soap":{op:n},"rest":{"METHOD path":n},"other":{...},"total":n}
//	POST /__vcsim/stats/reset      zero the counters
//
// With -call-log FILE it also appends one JSON line per SOAP call to FILE:
// {"op":"PowerOffVM_Task","this":"vm-42","start":NS,"end":NS,"status":200} (Unix nanoseconds when
// the request arrived and when its answer was written; the HTTP status, 500 for a SOAP fault): what hack/bench-peers.sh reads to time the gap
// between the end of one step on a VM and the client's next step on it, for any client.
//
// See hack/vcsim/README.md for the flags and the exact semantics.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"encoding/xml"
	"flag"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vapi/rest"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	// Registers the REST endpoints (/rest/com/vmware/cis/...) when Service.RegisterEndpoints is set.
	_ "github.com/vmware/govmomi/vapi/simulator"
)

const controlPrefix = "/__vcsim/"

func main() {
	model := simulator.VPX()

	listen := flag.String("l", "127.0.0.1:0", "listen address (host:port, port 0 = pick a free port)")
	flag.IntVar(&model.Datacenter, "dc", model.Datacenter, "number of datacenters")
	flag.IntVar(&model.Cluster, "cluster", model.Cluster, "number of clusters per datacenter")
	flag.IntVar(&model.ClusterHost, "host", model.ClusterHost, "number of hosts per cluster")
	flag.IntVar(&model.Host, "standalone-host", model.Host, "number of standalone hosts per datacenter")
	flag.IntVar(&model.Pool, "pool", model.Pool, "number of child resource pools per cluster")
	flag.IntVar(&model.Datastore, "ds", model.Datastore, "number of local datastores")
	flag.IntVar(&model.Machine, "vm", model.Machine, "number of virtual machines per resource pool and standalone host")
	flag.IntVar(&model.Folder, "folder", model.Folder, "number of datacenters placed within a folder")
	flag.IntVar(&model.Portgroup, "pg", model.Portgroup, "number of distributed portgroups per datacenter")
	flag.BoolVar(&model.Autostart, "autostart", model.Autostart, "power on the model's VMs")
	delay := flag.Int("delay", 0, "milliseconds added to every SOAP call")
	methodDelay := flag.String("method-delay", "", "extra per-method SOAP delay, e.g. 'Login:100,RetrievePropertiesEx:50' (ms)")
	idle := flag.Duration("idle-timeout", 0, "session idle timeout (Go duration, 0 = never)")
	urlFile := flag.String("url-file", "", "write the SOAP URL to this file (atomically) once listening")
	username := flag.String("username", "", "accept only this SOAP login user (default: any non-empty login)")
	password := flag.String("password", "", "accept only this SOAP login password (default: any non-empty login)")
	useTLS := flag.Bool("tls", false, "serve HTTPS")
	legacyCert := flag.Bool("tls-legacy-cert", false, "with -tls: serve a fresh RSA-1024 CA:TRUE certificate like old vcsim's built-in one (rejected by rustls/webpki) instead of a fresh ECDSA P-256 leaf")
	certFile := flag.String("cert-file", "", "with -tls: write the server certificate (PEM) to this file")
	trace := flag.Bool("trace", false, "dump SOAP traffic to stderr")
	callLog := flag.String("call-log", "", "append a JSON line per SOAP call (op, _this, arrival and answer in Unix ns) to this file")
	exitOnEOF := flag.Bool("exit-on-eof", false, "also shut down when stdin reaches EOF (a test harness holds the pipe, so vcsim cannot outlive it)")
	layoutFile := flag.String("layout", "", "JSON list of steps that rename and add inventory before the URL is published (see layout.go)")
	flag.Parse()

	log.SetPrefix("vcsim: ")
	simulator.Trace = *trace
	if *idle < 0 {
		log.Fatalf("-idle-timeout must not be negative")
	}

	var layout []layoutStep
	if *layoutFile != "" {
		var err error
		if layout, err = readLayout(*layoutFile); err != nil {
			log.Fatalf("-layout: %v", err)
		}
	}

	if err := model.Create(); err != nil {
		log.Fatalf("creating model: %v", err)
	}
	defer model.Remove()
	var layoutDirs []string
	defer func() { removeAll(layoutDirs) }()

	// SOAP and REST sessions watch this option (simulator.SessionIdleWatch), read at login; unset
	// means never. It replaces 0.24's simulator.SessionIdleTimeout variable.
	if *idle > 0 {
		opts := model.Map().OptionManager()
		opts.UpdateOptions(&types.UpdateOptions{ChangedValue: []types.BaseOptionValue{
			&types.OptionValue{Key: "config.vmacore.soap.sessionTimeout", Value: idle.String()},
		}})
	}

	// Delays are set after Create (Service.delay points at model.DelayConfig from then on; the model
	// is built through the in-process client). They delay the SOAP call, not the asynchronous task
	// it starts (simulator.TaskDelay, left at zero).
	model.DelayConfig.Delay = *delay
	if *methodDelay != "" {
		md, err := parseMethodDelay(*methodDelay)
		if err != nil {
			log.Fatalf("-method-delay: %v", err)
		}
		model.DelayConfig.MethodDelay = md
	}

	svc := model.Service
	svc.RegisterEndpoints = true
	svc.Listen = &url.URL{Host: *listen}
	if *username != "" || *password != "" {
		svc.Listen.User = url.UserPassword(*username, *password)
	}

	if *useTLS {
		svc.TLS = new(tls.Config)
		gen := leafCertificate
		if *legacyCert {
			gen = legacyCertificate
		}
		cert, err := gen(*listen)
		if err != nil {
			log.Fatalf("generating TLS certificate: %v", err)
		}
		svc.TLS.Certificates = []tls.Certificate{cert}
	}

	ctl := newControl(model)
	if *callLog != "" {
		f, err := os.OpenFile(*callLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			log.Fatalf("-call-log: %v", err)
		}
		defer f.Close()
		ctl.callLog = f
	}
	// Set before serving: the simulator reads it on every SOAP call.
	model.Map().Handler = ctl.dispatch
	server := svc.NewServer()
	// NewServer has already started serving, but nobody knows the port until the URL is
	// published below, so swapping the handler here is safe in practice.
	ctl.inner = server.Config.Handler
	server.Config.Handler = ctl

	if len(layout) > 0 {
		u := *server.URL
		if u.User == nil {
			u.User = url.UserPassword("layout", "layout")
		}
		if err := applyLayout(&u, layout, &layoutDirs); err != nil {
			removeAll(layoutDirs)
			log.Fatalf("-layout: %v", err)
		}
		// The estate is the starting point: its set-up calls are not the client's.
		ctl.mu.Lock()
		ctl.stats = newStats()
		ctl.mu.Unlock()
	}

	if *useTLS && *certFile != "" {
		var buf bytes.Buffer
		_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: server.Certificate().Raw})
		if err := writeAtomic(*certFile, buf.Bytes()); err != nil {
			log.Fatalf("writing -cert-file: %v", err)
		}
	}

	u := *server.URL
	u.User = nil
	sdkURL := u.String()
	if *urlFile != "" {
		if err := writeAtomic(*urlFile, []byte(sdkURL+"\n")); err != nil {
			log.Fatalf("writing -url-file: %v", err)
		}
	}
	fmt.Println(sdkURL)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	eof := make(chan struct{})
	if *exitOnEOF {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			close(eof)
		}()
	}
	select {
	case s := <-sig:
		log.Printf("received %s, shutting down", s)
	case <-eof:
		log.Printf("stdin closed, shutting down")
	}
	server.Close()
}

func parseMethodDelay(s string) (map[string]int, error) {
	md := make(map[string]int)
	for _, part := range strings.Split(s, ",") {
		kv := strings.SplitN(strings.TrimSpace(part), ":", 2)
		if len(kv) != 2 {
			return nil, fmt.Errorf("expected Method:ms, got %q", part)
		}
		ms, err := strconv.Atoi(kv[1])
		if err != nil {
			return nil, fmt.Errorf("bad delay in %q: %v", part, err)
		}
		md[kv[0]] = ms
	}
	return md, nil
}

// writeAtomic writes data to a temp file next to path and renames it into place.
func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// leafCertificate returns a fresh self-signed ECDSA P-256 server certificate (CA:FALSE) for
// 127.0.0.1, ::1, localhost and the listen host. Unlike vcsim's built-in RSA-1024 CA certificate
// it is accepted by rustls/webpki both for thumbprint pinning and as its own trust anchor.
func leafCertificate(listen string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "vcsim", Organization: []string{"vsphere-provider tests"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  false,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	if host, _, err := net.SplitHostPort(listen); err == nil {
		if ip := net.ParseIP(host); ip != nil && !ip.IsLoopback() && !ip.IsUnspecified() {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if ip == nil && host != "" && host != "localhost" {
			tmpl.DNSNames = append(tmpl.DNSNames, host)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// legacyCertificate returns a fresh self-signed RSA-1024 certificate with CA:TRUE and SANs
// 127.0.0.1, ::1 and example.com: the shape of the built-in certificate of govmomi < 0.30 vcsim
// (Go's old httptest LocalhostCert), which ring cannot verify signatures with. Current vcsim's
// built-in certificate is RSA-2048 (still CA:TRUE); this keeps a weak-key server to test against.
func legacyCertificate(string) (tls.Certificate, error) {
	key, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{"Acme Co"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageKeyEncipherment | x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{"example.com"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// ---------------------------------------------------------------------------------------------
// Control API, fault injection and request statistics.

type faultSpec struct {
	Kind    string `json:"kind"`
	Count   int    `json:"count"`
	Method  string `json:"method,omitempty"`
	DelayMs int    `json:"delay_ms,omitempty"`
	// poweron-refuse only: the VM's name, and the fault's message (a default when empty).
	VM      string `json:"vm,omitempty"`
	Message string `json:"message,omitempty"`
}

type stats struct {
	Soap  map[string]uint64 `json:"soap"`
	Rest  map[string]uint64 `json:"rest"`
	Other map[string]uint64 `json:"other"`
	Total uint64            `json:"total"`
}

func newStats() stats {
	return stats{Soap: map[string]uint64{}, Rest: map[string]uint64{}, Other: map[string]uint64{}}
}

type control struct {
	model *simulator.Model
	svc   *simulator.Service
	inner http.Handler

	mu     sync.Mutex
	faults []*faultSpec
	stats  stats

	// callLog, when set (-call-log), gets a JSON line per SOAP call; callMu orders the writes.
	callLog *os.File
	callMu  sync.Mutex
}

// statusRecorder remembers the status of an answer for the -call-log.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Hijack lets the drop fault close the connection through the recorder.
func (r *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := r.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, fmt.Errorf("no hijacker")
	}
	return hj.Hijack()
}

// logCall appends one SOAP call to the -call-log file.
func (c *control) logCall(info soapInfo, start, end time.Time, status int) {
	line, _ := json.Marshal(map[string]any{
		"op": info.op, "this": info.thisValue, "start": start.UnixNano(), "end": end.UnixNano(),
		"status": status,
	})
	c.callMu.Lock()
	defer c.callMu.Unlock()
	_, _ = c.callLog.Write(append(line, '\n'))
}

func newControl(model *simulator.Model) *control {
	return &control{model: model, svc: model.Service, stats: newStats()}
}

type requestClass int

const (
	classOther requestClass = iota
	classSOAP
	classREST
)

// soapInfo is what we extract from a SOAP request body.
type soapInfo struct {
	op        string
	thisType  string
	thisValue string
}

func isSOAPPath(p string) bool {
	return p == "/sdk" || strings.HasPrefix(p, "/sdk/") || strings.HasSuffix(p, "/sdk")
}

func isRESTPath(p string) bool {
	return strings.HasPrefix(p, "/rest/") || p == "/rest" || strings.HasPrefix(p, "/api/") || p == "/api"
}

// parseSOAP finds the first element inside soapenv:Body and its _this child.
func parseSOAP(body []byte) soapInfo {
	var info soapInfo
	d := xml.NewDecoder(bytes.NewReader(body))
	depth := 0
	bodyDepth := -1
	inThis := false
	for {
		tok, err := d.Token()
		if err != nil {
			return info
		}
		switch t := tok.(type) {
		case xml.StartElement:
			depth++
			switch {
			case bodyDepth < 0 && t.Name.Local == "Body":
				bodyDepth = depth
			case bodyDepth > 0 && depth == bodyDepth+1 && info.op == "":
				info.op = t.Name.Local
			case info.op != "" && depth == bodyDepth+2 && t.Name.Local == "_this":
				inThis = true
				for _, a := range t.Attr {
					if a.Name.Local == "type" && a.Name.Space == "" {
						info.thisType = a.Value
					}
				}
			}
		case xml.CharData:
			if inThis {
				info.thisValue += string(t)
			}
		case xml.EndElement:
			if inThis {
				return info
			}
			depth--
			if bodyDepth > 0 && depth < bodyDepth {
				return info
			}
		}
	}
}

func (c *control) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, controlPrefix) {
		c.serveControl(w, r)
		return
	}

	class := classOther
	var info soapInfo
	if r.Method == http.MethodPost && isSOAPPath(r.URL.Path) {
		class = classSOAP
		body, err := io.ReadAll(r.Body)
		_ = r.Body.Close()
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		info = parseSOAP(body)
		if info.op == "" {
			info.op = "<invalid>"
		}
		if c.callLog != nil {
			start := time.Now()
			rec := &statusRecorder{ResponseWriter: w}
			w = rec
			defer func() { c.logCall(info, start, time.Now(), rec.status) }()
		}
	} else if isRESTPath(r.URL.Path) {
		class = classREST
	}

	key := r.Method + " " + r.URL.Path
	if r.URL.RawQuery != "" {
		key += "?" + r.URL.RawQuery
	}

	c.mu.Lock()
	c.stats.Total++
	switch class {
	case classSOAP:
		c.stats.Soap[info.op]++
	case classREST:
		c.stats.Rest[key]++
	default:
		c.stats.Other[key]++
	}
	fault := c.takeFault(class, info.op, r.URL.RequestURI())
	c.mu.Unlock()

	if fault != nil {
		switch fault.Kind {
		case "http503":
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "503 Service Unavailable (vcsim injected fault)\n")
			return
		case "drop":
			hj, ok := w.(http.Hijacker)
			if !ok {
				panic(http.ErrAbortHandler) // closes the connection without a response
			}
			conn, _, err := hj.Hijack()
			if err == nil {
				if tcp, ok := conn.(*net.TCPConn); ok {
					_ = tcp.SetLinger(0)
				}
				_ = conn.Close()
			}
			return
		case "notauthenticated":
			if class == classSOAP {
				c.invalidateSOAPSession(r)
				writeNotAuthenticated(w, info)
			} else {
				if class == classREST {
					c.invalidateRESTSession(r)
				}
				w.WriteHeader(http.StatusUnauthorized)
			}
			return
		case "delay":
			time.Sleep(time.Duration(fault.DelayMs) * time.Millisecond)
		}
	}

	c.inner.ServeHTTP(w, r)
}

// takeFault pops one unit of the first queued fault matching the request. Caller holds c.mu.
func (c *control) takeFault(class requestClass, op, requestURI string) *faultSpec {
	for i, f := range c.faults {
		match := false
		switch {
		case f.Kind == kindPowerOnRefuse:
			// taken by dispatch, inside the simulator, per VM of a batch
		case f.Method == "":
			match = true
		case class == classSOAP:
			match = op == f.Method
		case class == classREST:
			match = strings.Contains(requestURI, f.Method)
		}
		if !match {
			continue
		}
		f.Count--
		if f.Count <= 0 {
			c.faults = append(c.faults[:i], c.faults[i+1:]...)
		}
		taken := *f
		return &taken
	}
	return nil
}

func xmlEscape(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// writeNotAuthenticated writes the same bytes vcsim's own NotAuthenticated fault has
// (fixtures/vcsim-wire/61_Fault_NotAuthenticated_after_logout.response.http).
func writeNotAuthenticated(w http.ResponseWriter, info soapInfo) {
	object := ""
	if info.thisType != "" || info.thisValue != "" {
		object = `<object type="` + xmlEscape(info.thisType) + `">` + xmlEscape(info.thisValue) + `</object>`
	}
	body := `<?xml version="1.0" encoding="UTF-8"?>` + "\n" +
		`<soapenv:Envelope xmlns:soapenc="http://schemas.xmlsoap.org/soap/encoding/" xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsd="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">` +
		`<soapenv:Body><soapenv:Fault><faultcode>ServerFaultCode</faultcode><faultstring></faultstring><detail>` +
		`<NotAuthenticatedFault xmlns="urn:vim25" xsi:type="NotAuthenticated">` + object +
		`<privilegeId>System.View</privilegeId></NotAuthenticatedFault></detail></soapenv:Fault></soapenv:Body></soapenv:Envelope>`
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	w.WriteHeader(http.StatusInternalServerError)
	_, _ = io.WriteString(w, body)
}

// controlContext is a simulator context whose own session key matches no real session.
func (c *control) controlContext() (*simulator.Context, *simulator.Session) {
	reg := c.model.Map()
	sess := &simulator.Session{
		UserSession: types.UserSession{Key: "vcsim-control"},
		Registry:    simulator.NewRegistry(),
		Map:         reg,
	}
	return &simulator.Context{Context: context.Background(), Session: sess, Map: reg}, sess
}

// terminateSOAPSessions ends the given SOAP sessions (all when ids is nil) exactly the way the
// idle timeout does (the session entry is deleted); returns how many were terminated.
func (c *control) terminateSOAPSessions(ids []string) int {
	ctx, sess := c.controlContext()
	sm := ctx.Map.SessionManager()
	if ids == nil {
		// Session.Get returns a per-session copy of the SessionManager whose SessionList holds all sessions.
		view, ok := sess.Get(sm.Reference()).(*simulator.SessionManager)
		if !ok {
			return 0
		}
		for _, s := range view.SessionList {
			ids = append(ids, s.Key)
		}
	}
	n := 0
	for _, id := range ids {
		res := sm.TerminateSession(ctx, &types.TerminateSession{This: sm.Reference(), SessionId: []string{id}})
		if res.Fault() == nil {
			n++
		}
	}
	return n
}

func (c *control) invalidateSOAPSession(r *http.Request) {
	if cookie, err := r.Cookie(soap.SessionCookieName); err == nil && cookie.Value != "" {
		c.terminateSOAPSessions([]string{cookie.Value})
	}
}

// restSessions finds the vapi simulator's session table (exported field of an unexported type).
func (c *control) restSessions() (sync.Locker, map[string]*rest.Session) {
	if c.svc.ServeMux == nil {
		return nil, nil
	}
	h, _ := c.svc.ServeMux.Handler(&http.Request{Method: http.MethodGet, URL: &url.URL{Path: rest.Path + "/"}})
	locker, ok := h.(sync.Locker)
	if !ok {
		return nil, nil
	}
	v := reflect.ValueOf(h)
	if v.Kind() != reflect.Ptr || v.Elem().Kind() != reflect.Struct {
		return nil, nil
	}
	v = v.Elem()
	f := v.FieldByName("Session")
	if !f.IsValid() || !f.CanInterface() {
		return nil, nil
	}
	m, ok := f.Interface().(map[string]*rest.Session)
	if !ok {
		return nil, nil
	}
	return locker, m
}

func (c *control) terminateRESTSessions(ids []string) int {
	locker, m := c.restSessions()
	if m == nil {
		return 0
	}
	locker.Lock()
	defer locker.Unlock()
	n := 0
	if ids == nil {
		for id := range m {
			ids = append(ids, id)
		}
	}
	for _, id := range ids {
		if _, ok := m[id]; ok {
			delete(m, id)
			n++
		}
	}
	return n
}

func (c *control) invalidateRESTSession(r *http.Request) {
	id := r.Header.Get("vmware-api-session-id")
	if id == "" {
		if cookie, err := r.Cookie("vmware-api-session-id"); err == nil {
			id = cookie.Value
		}
	}
	if id != "" {
		c.terminateRESTSessions([]string{id})
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func jsonError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

func (c *control) serveControl(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, controlPrefix), "/")
	switch {
	case path == "fault" && r.Method == http.MethodPost:
		var spec faultSpec
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&spec); err != nil {
			jsonError(w, http.StatusBadRequest, "bad fault spec: "+err.Error())
			return
		}
		switch spec.Kind {
		case "http503", "drop", "notauthenticated", "delay":
			if spec.VM != "" || spec.Message != "" {
				jsonError(w, http.StatusBadRequest, fmt.Sprintf("vm and message are for %s faults only, not %q", kindPowerOnRefuse, spec.Kind))
				return
			}
		case kindPowerOnRefuse:
			if spec.VM == "" {
				jsonError(w, http.StatusBadRequest, kindPowerOnRefuse+" needs the name of the VM to refuse in \"vm\"")
				return
			}
			if spec.Method != "" && spec.Method != powerOnMultiOp {
				jsonError(w, http.StatusBadRequest, fmt.Sprintf("%s applies to %s only, not method %q", kindPowerOnRefuse, powerOnMultiOp, spec.Method))
				return
			}
			spec.Method = powerOnMultiOp
		default:
			jsonError(w, http.StatusBadRequest, fmt.Sprintf("unknown fault kind %q (http503|drop|notauthenticated|delay|%s)", spec.Kind, kindPowerOnRefuse))
			return
		}
		if spec.Count < 0 || spec.DelayMs < 0 {
			jsonError(w, http.StatusBadRequest, "count and delay_ms must not be negative")
			return
		}
		if spec.Count == 0 {
			spec.Count = 1
		}
		c.mu.Lock()
		c.faults = append(c.faults, &spec)
		n := len(c.faults)
		c.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]int{"queued": n})
	case path == "fault" && r.Method == http.MethodGet:
		c.mu.Lock()
		list := make([]faultSpec, 0, len(c.faults))
		for _, f := range c.faults {
			list = append(list, *f)
		}
		c.mu.Unlock()
		writeJSON(w, http.StatusOK, list)
	case path == "fault" && r.Method == http.MethodDelete:
		c.mu.Lock()
		c.faults = nil
		c.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]int{"queued": 0})
	case path == "sessions/expire" && r.Method == http.MethodPost:
		soapN := c.terminateSOAPSessions(nil)
		restN := c.terminateRESTSessions(nil)
		writeJSON(w, http.StatusOK, map[string]int{"soap": soapN, "rest": restN})
	case path == "stats" && r.Method == http.MethodGet:
		c.mu.Lock()
		out := newStats()
		for k, v := range c.stats.Soap {
			out.Soap[k] = v
		}
		for k, v := range c.stats.Rest {
			out.Rest[k] = v
		}
		for k, v := range c.stats.Other {
			out.Other[k] = v
		}
		out.Total = c.stats.Total
		c.mu.Unlock()
		writeJSON(w, http.StatusOK, out)
	case path == "stats/reset" && r.Method == http.MethodPost:
		c.mu.Lock()
		c.stats = newStats()
		c.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]bool{"reset": true})
	case path == "" && r.Method == http.MethodGet:
		endpoints := []string{
			"POST /__vcsim/fault", "GET /__vcsim/fault", "DELETE /__vcsim/fault",
			"POST /__vcsim/sessions/expire", "GET /__vcsim/stats", "POST /__vcsim/stats/reset",
		}
		sort.Strings(endpoints)
		writeJSON(w, http.StatusOK, endpoints)
	default:
		jsonError(w, http.StatusNotFound, "unknown control endpoint "+r.Method+" "+r.URL.Path)
	}
}
