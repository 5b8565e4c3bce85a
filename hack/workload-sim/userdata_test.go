package main

import (
	"bytes"
	"compress/gzip"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/url"
	"strings"
	"testing"
	"time"
)

// newCA: a self-signed CA as CABPK makes them (RSA 2048, PKCS#1 "RSA PRIVATE KEY").
func newCA(t *testing.T, cn string) (certPEM, keyPEM string, cert *x509.Certificate) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ = x509.ParseCertificate(der)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})), cert
}

func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = pad + l
	}
	return strings.Join(lines, "\n")
}

type pki struct {
	caCert, caKey, etcdCert, etcdKey string
	ca, etcd                         *x509.Certificate
}

func newPKI(t *testing.T) *pki {
	p := &pki{}
	p.caCert, p.caKey, p.ca = newCA(t, "kubernetes")
	p.etcdCert, p.etcdKey, p.etcd = newCA(t, "etcd-ca")
	return p
}

func (p *pki) files() string {
	var b strings.Builder
	for _, f := range []struct{ path, perm, content string }{
		{"/etc/kubernetes/pki/ca.crt", "0640", p.caCert},
		{"/etc/kubernetes/pki/ca.key", "0600", p.caKey},
		{"/etc/kubernetes/pki/etcd/ca.crt", "0640", p.etcdCert},
		{"/etc/kubernetes/pki/etcd/ca.key", "0600", p.etcdKey},
	} {
		b.WriteString("-   path: " + f.path + "\n    owner: root:root\n    permissions: '" + f.perm + "'\n    content: |\n" + indent(f.content, 6) + "\n")
	}
	return b.String()
}

const placeholder = `-   path: /run/cluster-api/placeholder
    owner: root:root
    permissions: '0640'
    content: "This placeholder file is used to create the /run/cluster-api sub directory in a way that is compatible with both Linux and Windows (mkdir -p /run/cluster-api does not work with Windows)"
`

// initCloudConfig is shaped like CABPK v1.14's controlPlaneCloudInit with kubeadm v1beta4.
func initCloudConfig(p *pki, endpoint string) string {
	return `## template: jinja
#cloud-config

write_files:
` + p.files() + `-   path: /run/kubeadm/kubeadm.yaml
    owner: root:root
    permissions: '0640'
    content: |
      ---
      apiServer:
        certSANs:
        - localhost
        - 127.0.0.1
      apiVersion: kubeadm.k8s.io/v1beta4
      caCertificateValidityPeriod: 87600h0m0s
      certificateValidityPeriod: 8760h0m0s
      certificatesDir: /etc/kubernetes/pki
      clusterName: demo
      controlPlaneEndpoint: ` + endpoint + `
      controllerManager:
        extraArgs:
        - name: cloud-provider
          value: external
      dns: {}
      encryptionAlgorithm: RSA-2048
      etcd:
        local:
          dataDir: /var/lib/etcd
      imageRepository: registry.k8s.io
      kind: ClusterConfiguration
      kubernetesVersion: v1.33.4
      networking:
        dnsDomain: cluster.local
        podSubnet: 192.168.0.0/16
        serviceSubnet: 10.96.0.0/12
      proxy: {}
      scheduler: {}
      
      ---
      apiVersion: kubeadm.k8s.io/v1beta4
      kind: InitConfiguration
      localAPIEndpoint: {}
      nodeRegistration:
        criSocket: /var/run/containerd/containerd.sock
        imagePullPolicy: IfNotPresent
        kubeletExtraArgs:
        - name: cloud-provider
          value: external
        name: '{{ ds.meta_data.local_hostname }}'
        taints: null
      timeouts:
        controlPlaneComponentHealthCheck: 4m0s
` + placeholder + `runcmd:
  - 'hostnamectl set-hostname "{{ ds.meta_data.hostname }}"'
  - 'kubeadm init --config /run/kubeadm/kubeadm.yaml  && echo success > /run/cluster-api/bootstrap-success.complete'
users:
  - name: capv
    sudo: ALL=(ALL) NOPASSWD:ALL
`
}

// joinCloudConfig is shaped like CABPK v1.14's nodeCloudInit (worker) or controlPlaneJoinCloudInit.
func joinCloudConfig(p *pki, endpoint string, controlPlane bool) string {
	var files, cp string
	if controlPlane {
		files = p.files()
		cp = "      controlPlane:\n        localAPIEndpoint: {}\n"
	}
	return `## template: jinja
#cloud-config

write_files:
` + files + `-   path: /run/kubeadm/kubeadm-join-config.yaml
    owner: root:root
    permissions: '0640'
    content: |
      ---
      apiVersion: kubeadm.k8s.io/v1beta4
      caCertPath: /etc/kubernetes/pki/ca.crt
` + cp + `      discovery:
        bootstrapToken:
          apiServerEndpoint: ` + endpoint + `
          caCertHashes:
          - ` + PublicKeyHash(p.ca) + `
          token: abcdef.0123456789abcdef
          unsafeSkipCAVerification: false
      kind: JoinConfiguration
      nodeRegistration:
        imagePullPolicy: IfNotPresent
        kubeletExtraArgs:
        - name: cloud-provider
          value: external
        name: '{{ local_hostname }}'
      timeouts:
        tlsBootstrap: 5m0s
` + placeholder + `runcmd:
  - kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml  && echo success > /run/cluster-api/bootstrap-success.complete
`
}

// metadataYAML is what the provider writes (src/plan/capi_machine/bootstrap.rs).
const metadataYAML = `instance-id: demo-cp-abcde
local-hostname: demo-cp-abcde
wait-on-network:
  ipv4: true
  ipv6: false
network:
  version: 2
  ethernets:
    id0:
      match:
        macaddress: 00:50:56:aa:bb:cc
      set-name: eth0
      wakeonlan: true
      dhcp4: true
`

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func gzb64(t *testing.T, s string) string {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	_ = zw.Close()
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

func guest(userdata, encoding string) Guestinfo {
	return Guestinfo{
		"guestinfo.userdata": userdata, "guestinfo.userdata.encoding": encoding,
		"guestinfo.metadata": b64(metadataYAML), "guestinfo.metadata.encoding": "base64",
	}
}

func TestInitFromCloudConfig(t *testing.T) {
	p := newPKI(t)
	for _, enc := range []string{"base64", "gzip+base64", "gz+b64"} {
		t.Run(enc, func(t *testing.T) {
			data := b64(initCloudConfig(p, "127.0.0.1:20123"))
			if strings.HasPrefix(enc, "gz") {
				data = gzb64(t, initCloudConfig(p, "127.0.0.1:20123"))
			}
			b, err := ParseBoot(guest(data, enc))
			if err != nil {
				t.Fatal(err)
			}
			if b.Role != RoleInit || b.NodeName != "demo-cp-abcde" || b.ClusterName != "demo" ||
				b.Port != 20123 || b.KubernetesVersion != "v1.33.4" || b.Endpoint != "127.0.0.1:20123" {
				t.Fatalf("unexpected boot %+v", b)
			}
			if !b.CA.Cert.Equal(p.ca) || !b.EtcdCA.Cert.Equal(p.etcd) {
				t.Fatal("CA files not decoded")
			}
			if !strings.Contains(b.ClusterConfiguration, "kind: ClusterConfiguration") || strings.Contains(b.ClusterConfiguration, "InitConfiguration") {
				t.Fatalf("ClusterConfiguration: %q", b.ClusterConfiguration)
			}
		})
	}
}

func TestJoin(t *testing.T) {
	p := newPKI(t)
	cp, err := ParseBoot(guest(b64(joinCloudConfig(p, "127.0.0.1:20123", true)), "base64"))
	if err != nil {
		t.Fatal(err)
	}
	if cp.Role != RoleControlPlane || cp.Port != 20123 || cp.TokenID() != "abcdef" || cp.CA == nil || cp.EtcdCA == nil ||
		len(cp.CACertHashes) != 1 || cp.CACertHashes[0] != PublicKeyHash(p.ca) {
		t.Fatalf("control plane join: %+v", cp)
	}
	w, err := ParseBoot(guest(b64(joinCloudConfig(p, "127.0.0.1:20123", false)), "base64"))
	if err != nil {
		t.Fatal(err)
	}
	if w.Role != RoleWorker || w.CA != nil || w.NodeName != "demo-cp-abcde" {
		t.Fatalf("worker join: %+v", w)
	}
}

func TestWriteFilesEncodings(t *testing.T) {
	p := newPKI(t)
	// cloud-init's write_files `encoding: b64` for the key file.
	cc := initCloudConfig(p, "127.0.0.1:20123")
	keyBlock := "    content: |\n" + indent(p.caKey, 6) + "\n"
	if !strings.Contains(cc, keyBlock) {
		t.Fatal("fixture changed")
	}
	cc = strings.Replace(cc, keyBlock, "    encoding: \"base64\"\n    content: "+b64(p.caKey)+"\n", 1)
	b, err := ParseBoot(guest(b64(cc), "base64"))
	if err != nil {
		t.Fatal(err)
	}
	if b.CA.Key == nil {
		t.Fatal("no key")
	}
}

// CABPK's Ignition layout (bootstrap/kubeadm/pkg/ignition/clc): the kubeadm config at
// /etc/kubeadm.yml, run by /etc/kubeadm.sh after the preKubeadmCommands, which in CAPV's
// Ignition template envsubst ${COREOS_CUSTOM_HOSTNAME} (guestinfo.metadata's local-hostname).
func TestIgnition(t *testing.T) {
	p := newPKI(t)
	kubeadm := "---\napiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nclusterName: demo\ncontrolPlaneEndpoint: 127.0.0.1:20124\nkubernetesVersion: v1.33.4\n---\napiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\nnodeRegistration:\n  name: ${COREOS_CUSTOM_HOSTNAME}\n"
	script := "#!/bin/bash\nset -e\nenvsubst < /etc/kubeadm.yml > /etc/kubeadm.yml.tmp\nmv /etc/kubeadm.yml.tmp /etc/kubeadm.yml\nkubeadm init --config /etc/kubeadm.yml\nmv /etc/kubeadm.yml /tmp/\n"
	dataURL := func(s string) string { return "data:," + url.PathEscape(s) }
	type file struct {
		Path     string            `json:"path"`
		Contents map[string]string `json:"contents"`
	}
	cfg := map[string]any{
		"ignition": map[string]any{"version": "3.4.0"},
		"storage": map[string]any{"files": []file{
			{"/etc/kubernetes/pki/ca.crt", map[string]string{"source": dataURL(p.caCert)}},
			{"/etc/kubernetes/pki/ca.key", map[string]string{"source": "data:;base64," + b64(p.caKey)}},
			{"/etc/kubernetes/pki/etcd/ca.crt", map[string]string{"source": dataURL(p.etcdCert)}},
			{"/etc/kubernetes/pki/etcd/ca.key", map[string]string{"source": dataURL(p.etcdKey)}},
			{"/etc/kubeadm.yml", map[string]string{"source": dataURL(kubeadm)}},
			{"/etc/kubeadm.sh", map[string]string{"source": dataURL(script)}},
		}},
		"systemd": map[string]any{"units": []map[string]any{{
			"name": "kubeadm.service", "enabled": true,
			"contents": "[Unit]\nDescription=kubeadm\n[Service]\nType=oneshot\nExecStart=/bin/bash /etc/kubeadm.sh\n",
		}}},
	}
	raw, _ := json.Marshal(cfg)
	g := Guestinfo{
		"guestinfo.ignition.config.data": b64(string(raw)), "guestinfo.ignition.config.data.encoding": "base64",
		"guestinfo.metadata": b64(metadataYAML), "guestinfo.metadata.encoding": "base64",
	}
	b, err := ParseBoot(g)
	if err != nil {
		t.Fatal(err)
	}
	if b.Role != RoleInit || b.Port != 20124 || b.NodeName != "demo-cp-abcde" {
		t.Fatalf("%+v", b)
	}
	// Without the envsubst the name stays a variable: no Node is made of it.
	cfg["storage"].(map[string]any)["files"].([]file)[5] = file{"/etc/kubeadm.sh", map[string]string{"source": dataURL("kubeadm init --config /etc/kubeadm.yml\n")}}
	raw, _ = json.Marshal(cfg)
	g["guestinfo.ignition.config.data"] = b64(string(raw))
	if _, err := ParseBoot(g); err == nil || !strings.Contains(err.Error(), "COREOS_CUSTOM_HOSTNAME") {
		t.Fatalf("want the unrendered name refused, got %v", err)
	}
}

func TestBrokenUserDataRefused(t *testing.T) {
	p := newPKI(t)
	other := newPKI(t)
	good := initCloudConfig(p, "127.0.0.1:20123")
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecDER, _ := x509.MarshalPKCS8PrivateKey(ecKey)
	ecPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ecDER}))
	cases := map[string]struct {
		g    Guestinfo
		want string
	}{
		"no user data": {Guestinfo{"guestinfo.metadata": b64(metadataYAML), "guestinfo.metadata.encoding": "base64"}, "no guestinfo.userdata"},
		"no metadata":  {Guestinfo{"guestinfo.userdata": b64(good), "guestinfo.userdata.encoding": "base64"}, "no guestinfo.metadata"},
		"no local-hostname": {func() Guestinfo {
			g := guest(b64(good), "base64")
			g["guestinfo.metadata"] = b64("instance-id: x\n")
			return g
		}(), "no local-hostname"},
		"bad base64":       {guest("%%%not base64%%%", "base64"), "base64"},
		"bad gzip":         {guest(b64(good), "gzip+base64"), "gzip"},
		"unknown encoding": {guest(b64(good), "rot13"), "unknown encoding"},
		"encoding missing": {guest(b64(good), ""), "not a #cloud-config"},
		"not cloud-config": {guest(b64("#!/bin/sh\necho hi\n"), "base64"), "not a #cloud-config"},
		"bad yaml":         {guest(b64("#cloud-config\nwrite_files: [\n"), "base64"), "cloud-config"},
		"no kubeadm":       {guest(b64("#cloud-config\nruncmd:\n- echo hi\n"), "base64"), "neither"},
		"kubeadm not run":  {guest(b64(strings.Replace(good, "kubeadm init --config", "echo", 1)), "base64"), "no command runs kubeadm"},
		"no CA key":        {guest(b64(strings.Replace(good, "/etc/kubernetes/pki/ca.key", "/tmp/ca.key", 1)), "base64"), "no /etc/kubernetes/pki/ca.key"},
		"CA key mismatch":  {guest(b64(strings.Replace(good, indent(p.caKey, 6), indent(other.caKey, 6), 1)), "base64"), "does not match"},
		"EC CA key":        {guest(b64(strings.Replace(good, indent(p.caKey, 6), indent(ecPEM, 6), 1)), "base64"), "not an RSA key"},
		"garbage cert":     {guest(b64(strings.Replace(good, indent(p.caCert, 6), "      not a cert", 1)), "base64"), "not a PEM certificate"},
		"no endpoint":      {guest(b64(strings.Replace(good, "      controlPlaneEndpoint: 127.0.0.1:20123\n", "", 1)), "base64"), "no controlPlaneEndpoint"},
		"bad port":         {guest(b64(strings.Replace(good, "127.0.0.1:20123", "127.0.0.1:http", 1)), "base64"), "bad port"},
		"join without pin": {guest(b64(strings.Replace(joinCloudConfig(p, "127.0.0.1:1", false), "          - "+PublicKeyHash(p.ca)+"\n", "", 1)), "base64"),
			"no caCertHashes"},
		"cp join without CA": {guest(b64(strings.Replace(joinCloudConfig(p, "127.0.0.1:1", true), "/etc/kubernetes/pki/etcd/ca.key", "/x", 1)), "base64"),
			"no /etc/kubernetes/pki/etcd/ca.key"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			b, err := ParseBoot(c.g)
			if err == nil {
				t.Fatalf("booted %+v", b)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not contain %q", err, c.want)
			}
		})
	}
}

func TestPortSet(t *testing.T) {
	var p portSet
	if err := p.Set("20000-20002,21000"); err != nil {
		t.Fatal(err)
	}
	for port, want := range map[int32]bool{19999: false, 20000: true, 20002: true, 20003: false, 21000: true} {
		if p.allows(port) != want {
			t.Errorf("%d: want %v", port, want)
		}
	}
	if err := p.Set("5-1"); err == nil {
		t.Error("5-1 accepted")
	}
}
