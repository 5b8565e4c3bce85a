package main

// The watcher: vcsim's VMs → boots, power changes and deletions in the workload clusters.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cloudv1 "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/cloud/api/v1alpha1"
	inmemoryruntime "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/runtime"
	inmemoryserver "sigs.k8s.io/cluster-api/test/infrastructure/inmemory/pkg/server"
)

// wcluster is one workload cluster: one listener, one resource group, keyed by its CA.
type wcluster struct {
	name     string // ClusterConfiguration.clusterName
	listener string // listener and resource group name: "wsim/<name>"
	port     int32
	caHash   string // kubeadm's CA pin of the cluster CA
	ca       *KeyPair
	etcdCA   *KeyPair
	version  string
	etcdID   int64 // the in-memory etcd's cluster id
	started  bool  // kube-system/kubeadm-config and RBAC written
}

// vmState is what the simulator remembers of a VM.
type vmState struct {
	moref   string
	name    string
	uuid    string
	power   types.VirtualMachinePowerState
	cluster *wcluster
	boot    *Boot
	node    string
	// refusal is the last reason the VM did not boot, logged once per (reason, guestinfo).
	refusal string
	// booted VMs that are powered off: the Node is unreachable.
	unreachable bool
	// ip the guest reports (guest.ipAddress), kept across power cycles; reported while the
	// report of this power-on succeeded.
	ip       string
	reported bool
}

type sim struct {
	o        options
	mgr      inmemoryruntime.Manager
	mux      *inmemoryserver.WorkloadClustersMux
	u        *url.URL
	c        *govmomi.Client
	vms      map[string]*vmState
	clusters map[string]*wcluster // by CA pin
	nextIP   uint32               // host part of the next guest IP handed out
}

func newSim(o options, mgr inmemoryruntime.Manager, mux *inmemoryserver.WorkloadClustersMux, u *url.URL) *sim {
	return &sim{o: o, mgr: mgr, mux: mux, u: u, vms: map[string]*vmState{}, clusters: map[string]*wcluster{}}
}

func (s *sim) connect(ctx context.Context) error {
	if s.c != nil {
		return nil
	}
	c, err := newCountedClient(ctx, s.u, true)
	if err != nil {
		return fmt.Errorf("vCenter %s: %w", redact(s.u), err)
	}
	s.c = c
	event("connected to %s", redact(s.u))
	return nil
}

func (s *sim) disconnect() {
	if s.c != nil {
		ctx, c := context.WithTimeout(context.Background(), 2*time.Second)
		_ = s.c.Logout(ctx)
		c()
		s.c = nil
	}
}

func redact(u *url.URL) string {
	v := *u
	v.User = nil
	return v.String()
}

func (s *sim) pollOnce(ctx context.Context) error {
	if err := s.connect(ctx); err != nil {
		return err
	}
	m := view.NewManager(s.c.Client)
	v, err := m.CreateContainerView(ctx, s.c.ServiceContent.RootFolder, []string{"VirtualMachine"}, true)
	if err != nil {
		return err
	}
	defer func() { _ = v.Destroy(context.Background()) }()
	var vms []mo.VirtualMachine
	if err := v.Retrieve(ctx, []string{"VirtualMachine"}, []string{"name", "config.uuid", "config.template", "config.extraConfig", "runtime.powerState"}, &vms); err != nil {
		return err
	}
	seen := map[string]bool{}
	for i := range vms {
		vm := &vms[i]
		if vm.Config == nil || vm.Config.Template {
			continue
		}
		ref := vm.Self.Value
		seen[ref] = true
		st, ok := s.vms[ref]
		if !ok {
			st = &vmState{moref: ref, name: vm.Name}
			s.vms[ref] = st
		}
		st.name, st.uuid, st.power = vm.Name, vm.Config.Uuid, vm.Runtime.PowerState
		s.observe(ctx, st, guestinfo(vm.Config.ExtraConfig))
	}
	// Gone from vcsim: destroyed.
	refs := make([]string, 0, len(s.vms))
	for ref := range s.vms {
		if !seen[ref] {
			refs = append(refs, ref)
		}
	}
	sort.Strings(refs)
	for _, ref := range refs {
		st := s.vms[ref]
		if st.cluster != nil {
			event("vm %s (%s) destroyed: removing node %s from cluster %s", st.name, ref, st.node, st.cluster.name)
			s.teardown(ctx, st)
		}
		delete(s.vms, ref)
	}
	return nil
}

func guestinfo(opts []types.BaseOptionValue) Guestinfo {
	g := Guestinfo{}
	for _, o := range opts {
		ov := o.GetOptionValue()
		if !strings.HasPrefix(ov.Key, "guestinfo.") {
			continue
		}
		if s, ok := ov.Value.(string); ok {
			g[ov.Key] = s
		}
	}
	return g
}

func fingerprint(g Guestinfo) string {
	keys := make([]string, 0, len(g))
	for k := range g {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%s=%s\n", k, g[k])
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

func (s *sim) refuse(st *vmState, g Guestinfo, format string, args ...any) {
	reason := fmt.Sprintf(format, args...)
	key := fingerprint(g) + " " + reason
	if st.refusal != key {
		event("vm %s (%s) powered on but does not boot: %s", st.name, st.moref, reason)
		st.refusal = key
	}
}

func (s *sim) observe(ctx context.Context, st *vmState, g Guestinfo) {
	on := st.power == types.VirtualMachinePowerStatePoweredOn
	if st.cluster != nil { // booted before
		if !on {
			st.reported = false
		} else if !st.reported {
			s.reportGuestIP(ctx, st)
		}
		switch {
		case !on && !st.unreachable:
			event("vm %s powered %s: node %s unreachable", st.name, st.power, st.node)
			s.setReachable(ctx, st, false)
		case on && st.unreachable:
			event("vm %s powered on again: node %s ready", st.name, st.node)
			s.setReachable(ctx, st, true)
		}
		return
	}
	if !on {
		return
	}
	b, err := ParseBoot(g)
	if err != nil {
		s.refuse(st, g, "%v", err)
		return
	}
	if err := s.boot(ctx, st, b); err != nil {
		s.refuse(st, g, "%v", err)
		return
	}
	st.refusal = ""
}

// boot makes the VM a Node of its workload cluster.
func (s *sim) boot(ctx context.Context, st *vmState, b *Boot) error {
	if st.uuid == "" {
		return fmt.Errorf("the VM has no BIOS UUID (config.uuid)")
	}
	providerID := "vsphere://" + st.uuid
	var wc *wcluster
	switch b.Role {
	case RoleInit:
		var err error
		if wc, err = s.initCluster(ctx, b); err != nil {
			return err
		}
	default:
		wc = s.findJoinTarget(b)
		if wc == nil {
			return fmt.Errorf("kubeadm join %s: no running control plane there with CA %v yet (retrying)", b.Endpoint, b.CACertHashes)
		}
		if b.Role == RoleControlPlane && (wc.caHash != PublicKeyHash(b.CA.Cert) || wc.etcdCA == nil || !wc.etcdCA.Cert.Equal(b.EtcdCA.Cert)) {
			return fmt.Errorf("kubeadm join --control-plane: its CA files are not the cluster's")
		}
		// kubeadm join authenticates with the bootstrap token CABPK created in the workload cluster.
		sec := &corev1.Secret{}
		if err := s.client(wc).Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceSystem, Name: "bootstrap-token-" + b.TokenID()}, sec); err != nil {
			return fmt.Errorf("kubeadm join: bootstrap token %s.*: %v (retrying)", b.TokenID(), err)
		}
	}
	c := s.client(wc)
	node := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: b.NodeName}, node); err == nil {
		if node.Spec.ProviderID != providerID {
			return fmt.Errorf("node %s already exists in cluster %s with providerID %s", b.NodeName, wc.name, node.Spec.ProviderID)
		}
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	cp := b.Role != RoleWorker
	if err := s.createNode(ctx, c, b.NodeName, providerID, wc.version, cp); err != nil {
		return err
	}
	if cp {
		if err := s.addControlPlane(ctx, wc, b.NodeName); err != nil {
			return err
		}
	}
	st.cluster, st.boot, st.node, st.unreachable = wc, b, b.NodeName, false
	event("vm %s (%s) booted: %s node %s providerID %s in cluster %s (https://%s:%d)",
		st.name, st.moref, b.Role, b.NodeName, providerID, wc.name, s.o.listenHost, wc.port)
	s.reportGuestIP(ctx, st)
	return nil
}

// reportGuestIP: a booted guest's VMware Tools report its address, which the provider waits for
// (a VSphereMachine is not ready without one). vcsim takes `SET.guest.ipAddress` in a
// ReconfigVM_Task as its hook for guest properties. The address is the VM's for good (a power
// cycle reports it again); a failure is logged and retried at the next poll.
func (s *sim) reportGuestIP(ctx context.Context, st *vmState) {
	if s.o.guestIPs == nil {
		return
	}
	ip := st.ip
	if ip == "" {
		ones, bits := s.o.guestIPs.Mask.Size()
		if s.nextIP == 0 {
			s.nextIP = 10
		}
		if bits-ones < 32 && s.nextIP >= 1<<(bits-ones)-1 {
			event("vm %s: --guest-ips %s is exhausted", st.name, s.o.guestIPs)
			return
		}
		base := s.o.guestIPs.IP.To4()
		n := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
		n += s.nextIP
		ip = net.IPv4(byte(n>>24), byte(n>>16), byte(n>>8), byte(n)).String()
	}
	vm := object.NewVirtualMachine(s.c.Client, types.ManagedObjectReference{Type: "VirtualMachine", Value: st.moref})
	spec := types.VirtualMachineConfigSpec{ExtraConfig: []types.BaseOptionValue{&types.OptionValue{Key: "SET.guest.ipAddress", Value: ip}}}
	t, err := vm.Reconfigure(ctx, spec)
	if err == nil {
		err = t.Wait(ctx)
	}
	if err != nil {
		event("vm %s: reporting guest IP %s: %v (retrying)", st.name, ip, err)
		return
	}
	if st.ip == "" {
		s.nextIP++
	}
	event("vm %s: guest reports IP %s", st.name, ip)
	st.ip, st.reported = ip, true
}

func (s *sim) client(wc *wcluster) inmemoryruntime.Client {
	return s.mgr.GetResourceGroup(wc.listener).GetClient()
}

func (s *sim) findJoinTarget(b *Boot) *wcluster {
	for _, h := range b.CACertHashes {
		if wc, ok := s.clusters[h]; ok && wc.started && wc.port == b.Port {
			return wc
		}
	}
	if len(b.CACertHashes) == 0 { // unsafeSkipCAVerification: by endpoint port
		for _, wc := range s.clusters {
			if wc.started && wc.port == b.Port {
				return wc
			}
		}
	}
	return nil
}

func (s *sim) liveVMs(wc *wcluster) int {
	n := 0
	for _, st := range s.vms {
		if st.cluster == wc {
			n++
		}
	}
	return n
}

// initCluster: kubeadm init. The first control plane machine creates the cluster (listener,
// resource group, kubeadm-config, RBAC); another init for a running cluster is refused.
func (s *sim) initCluster(ctx context.Context, b *Boot) (*wcluster, error) {
	hash := PublicKeyHash(b.CA.Cert)
	if wc, ok := s.clusters[hash]; ok {
		if s.liveVMs(wc) > 0 {
			return nil, fmt.Errorf("kubeadm init for cluster %s, which is already initialized (would fail on a real machine)", b.ClusterName)
		}
		s.dropCluster(wc)
	}
	for _, wc := range s.clusters {
		if wc.port == b.Port || wc.name == b.ClusterName {
			if s.liveVMs(wc) > 0 {
				return nil, fmt.Errorf("cluster %s (port %d) is served already by cluster %s with another CA", b.ClusterName, b.Port, wc.name)
			}
			s.dropCluster(wc)
		}
	}
	if !s.o.ports.allows(b.Port) {
		return nil, fmt.Errorf("control plane endpoint %s: port %d is outside --ports %s", b.Endpoint, b.Port, s.o.ports.spec)
	}
	wc := &wcluster{
		name: b.ClusterName, listener: "wsim/" + b.ClusterName, port: b.Port, caHash: hash,
		ca: b.CA, etcdCA: b.EtcdCA, version: b.KubernetesVersion, etcdID: randomID(),
	}
	s.mgr.AddResourceGroup(wc.listener)
	if _, err := s.mux.InitWorkloadClusterListener(wc.listener, wc.port); err != nil {
		return nil, err
	}
	if err := s.mux.RegisterResourceGroup(wc.listener, wc.listener); err != nil {
		return nil, err
	}
	c := s.client(wc)
	for _, ns := range []string{metav1.NamespaceSystem, metav1.NamespaceDefault, metav1.NamespacePublic} {
		if err := createIfMissing(ctx, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return nil, err
		}
	}
	// What kubeadm init uploads and KCP reads: kubeadm-config (ClusterConfiguration), and the RBAC
	// kubeadm join needs to read Nodes.
	if err := createIfMissing(ctx, c, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: "kubeadm-config"},
		Data:       map[string]string{"ClusterConfiguration": b.ClusterConfiguration},
	}); err != nil {
		return nil, err
	}
	if err := createIfMissing(ctx, c, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "kubeadm:get-nodes"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}}},
	}); err != nil {
		return nil, err
	}
	if err := createIfMissing(ctx, c, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "kubeadm:get-nodes"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "kubeadm:get-nodes"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:bootstrappers:kubeadm:default-node-token"}},
	}); err != nil {
		return nil, err
	}
	wc.started = true
	s.clusters[hash] = wc
	event("cluster %s initialized: listener %s on port %d, CA %s", wc.name, wc.listener, wc.port, hash)
	return wc, nil
}

func (s *sim) dropCluster(wc *wcluster) {
	_ = s.mux.DeleteWorkloadClusterListener(wc.listener)
	s.mgr.DeleteResourceGroup(wc.listener)
	delete(s.clusters, wc.caHash)
	event("cluster %s (CA %s) dropped: no VM left and a new cluster takes its name or port", wc.name, wc.caHash)
}

func createIfMissing(ctx context.Context, c inmemoryruntime.Client, obj client.Object) error {
	if err := c.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
	}
	return nil
}

func randomID() int64 {
	n, err := rand.Int(rand.Reader, big.NewInt(1<<31-2))
	if err != nil {
		panic(err)
	}
	return n.Int64() + 1
}

const (
	controlPlaneLabel  = "node-role.kubernetes.io/control-plane"
	mirrorAnnotation   = "kubernetes.io/config.mirror"
	unreachableTaint   = "node.kubernetes.io/unreachable"
	controlPlaneTaint  = controlPlaneLabel
	staticPodNamespace = metav1.NamespaceSystem
)

var controlPlaneComponents = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd"}

func (s *sim) createNode(ctx context.Context, c inmemoryruntime.Client, name, providerID, version string, cp bool) error {
	now := metav1.Now()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
			},
		},
		Spec: corev1.NodeSpec{ProviderID: providerID},
		Status: corev1.NodeStatus{
			Conditions: nodeConditions(true, now),
			NodeInfo:   corev1.NodeSystemInfo{KubeletVersion: version, OperatingSystem: "linux", Architecture: "amd64"},
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}},
		},
	}
	if cp {
		node.Labels[controlPlaneLabel] = ""
		node.Spec.Taints = []corev1.Taint{{Key: controlPlaneTaint, Effect: corev1.TaintEffectNoSchedule}}
	}
	return createIfMissing(ctx, c, node)
}

func nodeConditions(ready bool, now metav1.Time) []corev1.NodeCondition {
	readyCond := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "kubelet is posting ready status (workload-sim)", LastHeartbeatTime: now, LastTransitionTime: now}
	if !ready {
		readyCond.Status, readyCond.Reason, readyCond.Message = corev1.ConditionUnknown, "NodeStatusUnknown", "Kubelet stopped posting node status (VM powered off; workload-sim)"
	}
	conds := []corev1.NodeCondition{readyCond}
	for _, t := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		st := corev1.ConditionFalse
		if !ready {
			st = corev1.ConditionUnknown
		}
		conds = append(conds, corev1.NodeCondition{Type: t, Status: st, Reason: "KubeletHasSufficient", LastHeartbeatTime: now, LastTransitionTime: now})
	}
	return conds
}

// addControlPlane: the static pods, the etcd member and the API server of a control plane node.
func (s *sim) addControlPlane(ctx context.Context, wc *wcluster, node string) error {
	c := s.client(wc)
	// Is there a leader already among the members?
	etcdPods := &corev1.PodList{}
	if err := c.List(ctx, etcdPods, client.InNamespace(staticPodNamespace), client.MatchingLabels{"component": "etcd", "tier": "control-plane"}); err != nil {
		return err
	}
	hasLeader := false
	for _, p := range etcdPods.Items {
		if _, removed := p.Annotations[cloudv1.EtcdMemberRemoved]; !removed && p.Annotations[cloudv1.EtcdLeaderFromAnnotationName] != "" {
			hasLeader = true
		}
	}
	now := metav1.Now()
	for _, comp := range controlPlaneComponents {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Namespace:   staticPodNamespace,
				Name:        comp + "-" + node,
				Labels:      map[string]string{"component": comp, "tier": "control-plane"},
				Annotations: map[string]string{mirrorAnnotation: "workload-sim"},
			},
			Spec: corev1.PodSpec{
				NodeName:   node,
				Containers: []corev1.Container{{Name: comp, Image: "registry.k8s.io/" + comp + ":" + wc.version}},
			},
			Status: corev1.PodStatus{
				Phase: corev1.PodRunning,
				Conditions: []corev1.PodCondition{
					{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
					{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
					{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
				},
			},
		}
		if comp == "etcd" {
			pod.Annotations[cloudv1.EtcdClusterIDAnnotationName] = fmt.Sprint(wc.etcdID)
			pod.Annotations[cloudv1.EtcdMemberIDAnnotationName] = fmt.Sprint(randomID())
			if !hasLeader {
				pod.Annotations[cloudv1.EtcdLeaderFromAnnotationName] = time.Now().UTC().Format(time.RFC3339)
			}
		}
		if err := createIfMissing(ctx, c, pod); err != nil {
			return err
		}
	}
	// The member is registered as etcd-<node>: the SNI KCP's etcd client sends through the
	// port-forward, and the in-memory etcd names the member <node>.
	if err := s.mux.AddEtcdMember(wc.listener, "etcd-"+node, wc.etcdCA.Cert, wc.etcdCA.Key); err != nil {
		return err
	}
	// The first API server starts the listener on the control plane endpoint's port.
	if err := s.mux.AddAPIServer(wc.listener, "kube-apiserver-"+node, wc.ca.Cert, wc.ca.Key); err != nil {
		return err
	}
	return nil
}

func (s *sim) setReachable(ctx context.Context, st *vmState, reachable bool) {
	c := s.client(st.cluster)
	node := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: st.node}, node); err != nil {
		event("node %s: %v", st.node, err)
		st.unreachable = !reachable
		return
	}
	now := metav1.Now()
	node.Status.Conditions = nodeConditions(reachable, now)
	taints := node.Spec.Taints[:0:0]
	for _, t := range node.Spec.Taints {
		if t.Key != unreachableTaint {
			taints = append(taints, t)
		}
	}
	if !reachable {
		taints = append(taints,
			corev1.Taint{Key: unreachableTaint, Effect: corev1.TaintEffectNoSchedule},
			corev1.Taint{Key: unreachableTaint, Effect: corev1.TaintEffectNoExecute, TimeAdded: &now})
	}
	node.Spec.Taints = taints
	if err := c.Update(ctx, node); err != nil {
		event("node %s: %v", st.node, err)
		return
	}
	st.unreachable = !reachable
}

// teardown: the VM is gone; so are its Node, static pods, etcd member and API server.
func (s *sim) teardown(ctx context.Context, st *vmState) {
	wc, c := st.cluster, s.client(st.cluster)
	if st.boot.Role != RoleWorker {
		for _, comp := range controlPlaneComponents {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: staticPodNamespace, Name: comp + "-" + st.node}}
			if err := c.Delete(ctx, pod); err != nil && !apierrors.IsNotFound(err) {
				event("deleting pod %s: %v", pod.Name, err)
			}
		}
		if err := s.mux.DeleteEtcdMember(wc.listener, "etcd-"+st.node); err != nil {
			event("deleting etcd member %s: %v", st.node, err)
		}
		if err := s.mux.DeleteAPIServer(wc.listener, "kube-apiserver-"+st.node); err != nil {
			event("deleting API server %s: %v", st.node, err)
		}
		s.reassertLeader(ctx, wc)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: st.node}}
	if err := c.Delete(ctx, node); err != nil && !apierrors.IsNotFound(err) {
		event("deleting node %s: %v", st.node, err)
	}
	st.cluster = nil
}

// reassertLeader: when the leader's member went away without a MoveLeader, the first remaining
// member becomes leader (the in-memory etcd refuses to answer without one).
func (s *sim) reassertLeader(ctx context.Context, wc *wcluster) {
	c := s.client(wc)
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(staticPodNamespace), client.MatchingLabels{"component": "etcd", "tier": "control-plane"}); err != nil {
		return
	}
	var live []corev1.Pod
	for _, p := range pods.Items {
		if _, removed := p.Annotations[cloudv1.EtcdMemberRemoved]; removed {
			continue
		}
		if p.Annotations[cloudv1.EtcdLeaderFromAnnotationName] != "" {
			return
		}
		live = append(live, p)
	}
	if len(live) == 0 {
		return
	}
	sort.Slice(live, func(i, j int) bool { return live[i].Name < live[j].Name })
	p := live[0]
	p.Annotations[cloudv1.EtcdLeaderFromAnnotationName] = time.Now().UTC().Format(time.RFC3339)
	if err := c.Update(ctx, &p); err != nil {
		event("etcd leader %s: %v", p.Name, err)
		return
	}
	event("etcd member %s is the new leader of cluster %s", strings.TrimPrefix(p.Name, "etcd-"), wc.name)
}
