// Command workload-sim makes the VMs of a vcsim "boot" into workload clusters served by Cluster
// API's in-memory API server and etcd (sigs.k8s.io/cluster-api/test/infrastructure/inmemory).
//
// It polls vcsim for VMs, reads the guestinfo the provider wrote (user data, metadata), and boots
// only what a real cloud-init + kubeadm would: see README.md. Events go to stderr, one line each;
// once serving, stdout gets `ready debug=HOST:PORT`.
//
//	workload-sim --vcenter http://127.0.0.1:PORT/sdk --username U --password P \
//	    --listen-host 127.0.0.1 --ports 20000-20009 --debug-addr 127.0.0.1:0 --poll 1s
//
// `workload-sim vm ...` is a small govc-like helper for tests (see vm.go).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/stdr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	cloudv1 "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/cloud/api/v1alpha1"
	inmemoryruntime "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/runtime"
	inmemoryserver "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/server"
	inmemoryapi "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/server/api"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "etcd" {
		os.Exit(etcdMain(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "vm" {
		os.Exit(vmMain(os.Args[2:]))
	}
	os.Exit(simMain(os.Args[1:]))
}

type options struct {
	vcenter    string
	username   string
	password   string
	listenHost string
	ports      portSet
	debugAddr  string
	poll       time.Duration
	verbose    int
	// guestIPs: the network booted guests take their addresses from, reported as VMware Tools
	// would (guest.ipAddress); nil = report none.
	guestIPs *net.IPNet
}

// portSet: the ports a workload cluster listener may use ("20000-20009,21000"); empty = any.
type portSet struct {
	spec   string
	ranges [][2]int32
}

func (p *portSet) String() string { return p.spec }
func (p *portSet) Set(s string) error {
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseUint(lo, 10, 16)
		if err != nil || a == 0 {
			return fmt.Errorf("bad port %q", lo)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseUint(hi, 10, 16); err != nil || b < a {
				return fmt.Errorf("bad port range %q", part)
			}
		}
		p.ranges = append(p.ranges, [2]int32{int32(a), int32(b)})
	}
	p.spec = s
	return nil
}
func (p *portSet) allows(port int32) bool {
	if len(p.ranges) == 0 {
		return true
	}
	for _, r := range p.ranges {
		if port >= r[0] && port <= r[1] {
			return true
		}
	}
	return false
}

func simMain(args []string) int {
	fs := flag.NewFlagSet("workload-sim", flag.ContinueOnError)
	var o options
	fs.StringVar(&o.vcenter, "vcenter", os.Getenv("VSPHERE_SERVER"), "vcsim SDK URL, e.g. http://127.0.0.1:PORT/sdk (env VSPHERE_SERVER)")
	fs.StringVar(&o.username, "username", os.Getenv("VSPHERE_USERNAME"), "vCenter user (env VSPHERE_USERNAME)")
	fs.StringVar(&o.password, "password", os.Getenv("VSPHERE_PASSWORD"), "vCenter password (env VSPHERE_PASSWORD)")
	fs.StringVar(&o.listenHost, "listen-host", "127.0.0.1", "the host workload clusters are reached at (serving certificate SAN, self-dial); see README: the library's listeners bind all interfaces")
	fs.Var(&o.ports, "ports", "ports (list and ranges, e.g. 20000-20009,21000) a control plane endpoint may use; empty = any. The harness must keep them free")
	fs.StringVar(&o.debugAddr, "debug-addr", "127.0.0.1:0", "debug server address (the in-memory server's debug API); port 0 = a free port")
	fs.DurationVar(&o.poll, "poll", time.Second, "how often vcsim is polled")
	guestIPs := fs.String("guest-ips", "10.200.0.0/16", "IPv4 network a booted guest takes its address from (one per VM, reported in guest.ipAddress as VMware Tools would); empty = report none")
	fs.IntVar(&o.verbose, "v", 0, "verbosity of the in-memory server's own log (0 = errors and info)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log.SetFlags(log.LstdFlags | log.Lmicroseconds | log.LUTC)
	log.SetPrefix("workload-sim: ")
	if *guestIPs != "" {
		_, n, err := net.ParseCIDR(*guestIPs)
		if err != nil || n.IP.To4() == nil {
			log.Printf("--guest-ips %q: want an IPv4 network such as 10.200.0.0/16", *guestIPs)
			return 2
		}
		o.guestIPs = n
	}
	if o.vcenter == "" {
		log.Print("--vcenter (or VSPHERE_SERVER) is required")
		return 2
	}
	if ip := net.ParseIP(o.listenHost); ip == nil || !ip.IsLoopback() {
		log.Printf("warning: --listen-host %s is not a loopback address; the listeners bind all interfaces anyway", o.listenHost)
	}
	stdr.SetVerbosity(o.verbose)
	lg := stdr.New(log.New(os.Stderr, "inmemory: ", log.LstdFlags|log.LUTC))
	ctrllog.SetLogger(lg)

	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	if err := run(ctx, o, lg); err != nil {
		log.Printf("error: %v", err)
		return 1
	}
	return 0
}

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		cloudv1.AddToScheme, corev1.AddToScheme, appsv1.AddToScheme, rbacv1.AddToScheme,
		storagev1.AddToScheme, apiextensionsv1.AddToScheme, policyv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

func run(ctx context.Context, o options, lg logr.Logger) error {
	u, err := url.Parse(o.vcenter)
	if err != nil {
		return fmt.Errorf("--vcenter: %w", err)
	}
	if o.username != "" || o.password != "" {
		u.User = url.UserPassword(o.username, o.password)
	} else if u.User == nil {
		u.User = url.UserPassword("user", "pass") // vcsim accepts any login unless told otherwise
	}

	mgr := inmemoryruntime.NewManager(newScheme())
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("in-memory manager: %w", err)
	}
	// The mux always starts its own debug server on ":DebugPort" (all interfaces). Port 0 makes that
	// an unannounced ephemeral port nobody uses; the debug API we announce is served below, on
	// --debug-addr only, with the library's own handler. MinPort/MaxPort only matter for port 0
	// listeners, which this program never asks for.
	mux, err := inmemoryserver.NewWorkloadClustersMux(mgr, o.listenHost,
		inmemoryserver.CustomPorts{MinPort: 1, MaxPort: 65535, DebugPort: 0})
	if err != nil {
		return fmt.Errorf("in-memory mux: %w", err)
	}
	defer func() {
		sctx, c := context.WithTimeout(context.Background(), 5*time.Second)
		defer c()
		_ = mux.Shutdown(sctx)
	}()

	dl, err := net.Listen("tcp", o.debugAddr)
	if err != nil {
		return fmt.Errorf("--debug-addr: %w", err)
	}
	debug := &http.Server{Handler: withCalls(inmemoryapi.NewDebugHandler(mgr, lg, mux)), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = debug.Serve(dl) }()
	defer debug.Close()

	s := newSim(o, mgr, mux, u)
	event("debug server on %s", dl.Addr())
	// First contact with vcsim before announcing readiness.
	if err := s.connect(ctx); err != nil {
		return err
	}
	fmt.Printf("ready debug=%s\n", dl.Addr())
	_ = os.Stdout.Sync()

	t := time.NewTicker(o.poll)
	defer t.Stop()
	for {
		if err := s.pollOnce(ctx); err != nil && !errors.Is(err, context.Canceled) {
			event("poll failed: %v", err)
			s.disconnect()
		}
		select {
		case <-ctx.Done():
			event("shutting down")
			return nil
		case <-t.C:
		}
	}
}

// event: one line per event on stderr.
func event(format string, args ...any) {
	log.Printf(format, args...)
}
