package main

// The pure part: what a VM's guestinfo says it is. Decodes guestinfo.userdata (+ .encoding),
// guestinfo.ignition.config.data (+ .encoding) and guestinfo.metadata (+ .encoding) as cloud-init
// and Ignition would, and reads the kubeadm configuration files CABPK writes into them
// (/run/kubeadm/kubeadm.yaml for `kubeadm init`, /run/kubeadm/kubeadm-join-config.yaml for
// `kubeadm join`) plus the CA files kubeadm init needs. Anything a real boot would choke on is an
// error: such a VM never becomes a Node.

import (
	"bytes"
	"compress/gzip"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// Role is what the kubeadm command in the user data makes of the machine.
type Role string

const (
	RoleInit         Role = "init"          // kubeadm init: the first control plane machine
	RoleControlPlane Role = "control-plane" // kubeadm join with controlPlane: another control plane machine
	RoleWorker       Role = "worker"        // kubeadm join without controlPlane
)

// The files CABPK writes and kubeadm reads.
const (
	initConfigPath = "/run/kubeadm/kubeadm.yaml"
	joinConfigPath = "/run/kubeadm/kubeadm-join-config.yaml"
	// CABPK's Ignition format writes one file for init and join alike, run by /etc/kubeadm.sh
	// (`kubeadm init|join --config /etc/kubeadm.yml`).
	ignitionConfigPath = "/etc/kubeadm.yml"
	// The variable CAPV's Ignition template sets from guestinfo.metadata's local-hostname
	// (its coreos-metadata unit) and envsubst puts into the kubeadm config.
	coreosHostnameVar = "COREOS_CUSTOM_HOSTNAME"
	caCertPath        = "/etc/kubernetes/pki/ca.crt"
	caKeyPath         = "/etc/kubernetes/pki/ca.key"
	etcdCACertPath    = "/etc/kubernetes/pki/etcd/ca.crt"
	etcdCAKeyPath     = "/etc/kubernetes/pki/etcd/ca.key"
)

// Boot is everything a VM's guestinfo says about the node it becomes.
type Boot struct {
	NodeName string
	Role     Role
	// Init: from ClusterConfiguration. Join: empty (kubeadm join does not carry it).
	ClusterName       string
	KubernetesVersion string
	// ClusterConfiguration is the ClusterConfiguration document of the init config, verbatim.
	ClusterConfiguration string
	// Endpoint is the control plane endpoint (init: ClusterConfiguration.controlPlaneEndpoint;
	// join: discovery.bootstrapToken.apiServerEndpoint), Port its port.
	Endpoint string
	Port     int32
	// Join: the bootstrap token and the CA pins (sha256:<hex of the CA's SubjectPublicKeyInfo>).
	Token        string
	CACertHashes []string
	// Init and control plane join: the CA files (control plane join carries them too).
	CA     *KeyPair
	EtcdCA *KeyPair
}

// KeyPair is a CA certificate and its RSA key (the in-memory server signs with *rsa.PrivateKey).
type KeyPair struct {
	Cert *x509.Certificate
	Key  *rsa.PrivateKey
}

// PublicKeyHash is kubeadm's CA pin: sha256 of the certificate's SubjectPublicKeyInfo.
func PublicKeyHash(c *x509.Certificate) string {
	sum := sha256.Sum256(c.RawSubjectPublicKeyInfo)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// decodeGuestinfo undoes a guestinfo `.encoding`: none, base64 (b64) or gzip+base64 (gz+b64),
// the names cloud-init's VMware datasource accepts.
func decodeGuestinfo(value, encoding string) ([]byte, error) {
	switch strings.ToLower(strings.TrimSpace(encoding)) {
	case "":
		return []byte(value), nil
	case "base64", "b64":
		return decodeBase64(value)
	case "gzip+base64", "gz+base64", "gzip+b64", "gz+b64":
		raw, err := decodeBase64(value)
		if err != nil {
			return nil, err
		}
		return gunzip(raw)
	default:
		return nil, fmt.Errorf("unknown encoding %q", encoding)
	}
}

func decodeBase64(s string) ([]byte, error) {
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == ' ' || r == '\t' {
			return -1
		}
		return r
	}, s)
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		if b2, err2 := base64.RawStdEncoding.DecodeString(s); err2 == nil {
			return b2, nil
		}
		return nil, fmt.Errorf("base64: %w", err)
	}
	return b, nil
}

func gunzip(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	out, err := io.ReadAll(io.LimitReader(zr, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	return out, nil
}

// Metadata is the part of guestinfo.metadata that matters here.
type Metadata struct {
	InstanceID    string `json:"instance-id"`
	LocalHostname string `json:"local-hostname"`
}

// ParseMetadata reads cloud-init metadata (YAML or JSON).
func ParseMetadata(b []byte) (*Metadata, error) {
	var m Metadata
	if err := yaml.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	if m.LocalHostname == "" {
		return nil, errors.New("metadata has no local-hostname")
	}
	return &m, nil
}

// files is the guest's view: path → content, and the commands it runs.
type files struct {
	content  map[string]string
	commands []string
}

type cloudConfig struct {
	WriteFiles []struct {
		Path     string `json:"path"`
		Content  string `json:"content"`
		Encoding string `json:"encoding"`
	} `json:"write_files"`
	RunCmd []json.RawMessage `json:"runcmd"`
}

// parseCloudConfig reads `#cloud-config` user data (CABPK prefixes `## template: jinja`).
func parseCloudConfig(b []byte) (*files, error) {
	text := string(b)
	first := strings.TrimSpace(strings.SplitN(text, "\n", 2)[0])
	if first == "## template: jinja" {
		parts := strings.SplitN(text, "\n", 2)
		if len(parts) == 2 {
			first = strings.TrimSpace(strings.SplitN(parts[1], "\n", 2)[0])
		}
	}
	if first != "#cloud-config" {
		return nil, fmt.Errorf("user data is not a #cloud-config (first line %q)", truncate(first, 40))
	}
	var cc cloudConfig
	if err := yaml.Unmarshal(b, &cc); err != nil {
		return nil, fmt.Errorf("cloud-config: %w", err)
	}
	f := &files{content: map[string]string{}}
	for _, wf := range cc.WriteFiles {
		c, err := decodeWriteFile(wf.Content, wf.Encoding)
		if err != nil {
			return nil, fmt.Errorf("write_files %s: %w", wf.Path, err)
		}
		f.content[wf.Path] = c
	}
	for _, raw := range cc.RunCmd {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			f.commands = append(f.commands, s)
			continue
		}
		var argv []string
		if json.Unmarshal(raw, &argv) == nil {
			f.commands = append(f.commands, strings.Join(argv, " "))
		}
	}
	return f, nil
}

// decodeWriteFile: cloud-init's write_files encodings.
func decodeWriteFile(content, encoding string) (string, error) {
	switch strings.ToLower(encoding) {
	case "", "text/plain":
		return content, nil
	case "b64", "base64":
		b, err := decodeBase64(content)
		return string(b), err
	case "gz", "gzip":
		b, err := gunzip([]byte(content))
		return string(b), err
	case "gz+base64", "gzip+base64", "gz+b64", "gzip+b64":
		raw, err := decodeBase64(content)
		if err != nil {
			return "", err
		}
		b, err := gunzip(raw)
		return string(b), err
	default:
		return "", fmt.Errorf("unknown encoding %q", encoding)
	}
}

type ignitionConfig struct {
	Ignition struct {
		Version string `json:"version"`
	} `json:"ignition"`
	Storage struct {
		Files []struct {
			Path     string `json:"path"`
			Contents struct {
				Source      string `json:"source"`
				Compression string `json:"compression"`
			} `json:"contents"`
		} `json:"files"`
	} `json:"storage"`
	Systemd struct {
		Units []struct {
			Name     string `json:"name"`
			Enabled  *bool  `json:"enabled"`
			Contents string `json:"contents"`
		} `json:"units"`
	} `json:"systemd"`
}

// parseIgnition reads an Ignition config (v2 or v3 JSON) whose files carry data: URLs, as
// CABPK's Ignition output does; the commands are the ExecStart lines of its systemd units
// (CABPK's kubeadm.service runs /etc/kubeadm.sh, which it writes as a file).
func parseIgnition(b []byte) (*files, error) {
	var ic ignitionConfig
	if err := json.Unmarshal(b, &ic); err != nil {
		return nil, fmt.Errorf("ignition: %w", err)
	}
	if ic.Ignition.Version == "" {
		return nil, errors.New("ignition: no ignition.version")
	}
	f := &files{content: map[string]string{}}
	for _, file := range ic.Storage.Files {
		data, err := decodeDataURL(file.Contents.Source)
		if err != nil {
			return nil, fmt.Errorf("ignition file %s: %w", file.Path, err)
		}
		if file.Contents.Compression == "gzip" {
			if data, err = gunzip(data); err != nil {
				return nil, fmt.Errorf("ignition file %s: %w", file.Path, err)
			}
		}
		f.content[file.Path] = string(data)
	}
	for _, u := range ic.Systemd.Units {
		for _, line := range strings.Split(u.Contents, "\n") {
			if cmd, ok := strings.CutPrefix(strings.TrimSpace(line), "ExecStart="); ok {
				f.commands = append(f.commands, cmd)
			}
		}
	}
	// The scripts those units run (CABPK: /etc/kubeadm.sh holds the kubeadm command).
	for _, cmd := range f.commands {
		for _, word := range strings.Fields(cmd) {
			if script, ok := f.content[word]; ok {
				f.commands = append(f.commands, strings.Split(script, "\n")...)
			}
		}
	}
	return f, nil
}

// decodeDataURL: data:[<mediatype>][;base64],<data> (RFC 2397).
func decodeDataURL(src string) ([]byte, error) {
	rest, ok := strings.CutPrefix(src, "data:")
	if !ok {
		return nil, fmt.Errorf("source is not a data: URL (%q); remote sources are not fetched", truncate(src, 40))
	}
	meta, data, ok := strings.Cut(rest, ",")
	if !ok {
		return nil, errors.New("data: URL without a comma")
	}
	if strings.HasSuffix(meta, ";base64") {
		return decodeBase64(data)
	}
	s, err := url.PathUnescape(data)
	if err != nil {
		return nil, err
	}
	return []byte(s), nil
}

// Guestinfo is the VM's extraConfig, key → value.
type Guestinfo map[string]string

// ParseBoot decides what the VM boots into, from its guestinfo alone.
func ParseBoot(g Guestinfo) (*Boot, error) {
	rawMeta, ok := g["guestinfo.metadata"]
	if !ok || rawMeta == "" {
		return nil, errors.New("no guestinfo.metadata")
	}
	metaBytes, err := decodeGuestinfo(rawMeta, g["guestinfo.metadata.encoding"])
	if err != nil {
		return nil, fmt.Errorf("guestinfo.metadata: %w", err)
	}
	meta, err := ParseMetadata(metaBytes)
	if err != nil {
		return nil, err
	}

	var f *files
	switch {
	case g["guestinfo.userdata"] != "":
		b, err := decodeGuestinfo(g["guestinfo.userdata"], g["guestinfo.userdata.encoding"])
		if err != nil {
			return nil, fmt.Errorf("guestinfo.userdata: %w", err)
		}
		if f, err = parseCloudConfig(b); err != nil {
			return nil, err
		}
	case g["guestinfo.ignition.config.data"] != "":
		b, err := decodeGuestinfo(g["guestinfo.ignition.config.data"], g["guestinfo.ignition.config.data.encoding"])
		if err != nil {
			return nil, fmt.Errorf("guestinfo.ignition.config.data: %w", err)
		}
		if f, err = parseIgnition(b); err != nil {
			return nil, err
		}
	default:
		return nil, errors.New("no guestinfo.userdata nor guestinfo.ignition.config.data")
	}
	return bootFromFiles(f, meta)
}

func bootFromFiles(f *files, meta *Metadata) (*Boot, error) {
	runs := func(sub, path string) bool {
		for _, c := range f.commands {
			if strings.Contains(c, sub) && strings.Contains(c, path) {
				return true
			}
		}
		return false
	}
	initCfg, hasInit := f.content[initConfigPath]
	joinCfg, hasJoin := f.content[joinConfigPath]
	ignCfg, hasIgn := f.content[ignitionConfigPath]
	if hasIgn && runs("envsubst", ignitionConfigPath) {
		ignCfg = envsubst(ignCfg, map[string]string{coreosHostnameVar: meta.LocalHostname})
	}
	switch {
	case hasInit && runs("kubeadm init", initConfigPath):
		return bootInit(f, meta, initCfg)
	case hasJoin && runs("kubeadm join", joinConfigPath):
		return bootJoin(f, meta, joinCfg)
	case hasIgn && runs("kubeadm init", ignitionConfigPath):
		return bootInit(f, meta, ignCfg)
	case hasIgn && runs("kubeadm join", ignitionConfigPath):
		return bootJoin(f, meta, ignCfg)
	case hasInit || hasJoin || hasIgn:
		return nil, errors.New("a kubeadm config file is written but no command runs kubeadm init/join with it")
	default:
		return nil, fmt.Errorf("neither %s nor %s in the user data", initConfigPath, joinConfigPath)
	}
}

// envsubst replaces ${NAME} and $NAME for the variables in env, as gettext's envsubst does
// with the environment the boot gives it; other variables are left as they are (a real envsubst
// would empty them, and the node name check then says what could not be rendered).
func envsubst(text string, env map[string]string) string {
	for k, v := range env {
		text = strings.ReplaceAll(text, "${"+k+"}", v)
		text = strings.ReplaceAll(text, "$"+k, v)
	}
	return text
}

// kubeadmDocs splits a multi-document kubeadm YAML into kind → (document text, decoded map).
func kubeadmDocs(text string) (map[string]string, map[string]map[string]any, error) {
	texts := map[string]string{}
	maps := map[string]map[string]any{}
	for _, doc := range splitYAML(text) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			return nil, nil, fmt.Errorf("kubeadm config: %w", err)
		}
		kind, _ := m["kind"].(string)
		api, _ := m["apiVersion"].(string)
		if !strings.HasPrefix(api, "kubeadm.k8s.io/") {
			continue
		}
		texts[kind] = doc
		maps[kind] = m
	}
	return texts, maps, nil
}

func splitYAML(text string) []string {
	var docs []string
	var cur []string
	for _, line := range strings.Split(text, "\n") {
		if strings.TrimRight(line, " \t\r") == "---" {
			docs = append(docs, strings.Join(cur, "\n"))
			cur = nil
			continue
		}
		cur = append(cur, line)
	}
	return append(docs, strings.Join(cur, "\n"))
}

func str(m map[string]any, path ...string) string {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return ""
		}
		cur = mm[p]
	}
	s, _ := cur.(string)
	return s
}

// nodeName: nodeRegistration.name with cloud-init's jinja for the hostname rendered, else the
// metadata's local-hostname.
func nodeName(reg map[string]any, meta *Metadata) (string, error) {
	name := str(reg, "nodeRegistration", "name")
	for _, v := range []string{"{{ ds.meta_data.local_hostname }}", "{{ds.meta_data.local_hostname}}", "{{ v1.local_hostname }}", "{{v1.local_hostname}}", "{{ local_hostname }}", "{{local_hostname}}"} {
		name = strings.ReplaceAll(name, v, meta.LocalHostname)
	}
	if name == "" {
		name = meta.LocalHostname
	}
	if strings.Contains(name, "{{") || strings.Contains(name, "$") {
		return "", fmt.Errorf("nodeRegistration.name %q has a template this simulator cannot render", name)
	}
	return strings.ToLower(name), nil
}

func portOf(endpoint string) (int32, error) {
	_, p, err := net.SplitHostPort(endpoint)
	if err != nil {
		return 0, fmt.Errorf("endpoint %q: %w", endpoint, err)
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("endpoint %q: bad port", endpoint)
	}
	return int32(n), nil
}

func bootInit(f *files, meta *Metadata, cfg string) (*Boot, error) {
	texts, docs, err := kubeadmDocs(cfg)
	if err != nil {
		return nil, err
	}
	cc, ok := docs["ClusterConfiguration"]
	if !ok {
		return nil, fmt.Errorf("%s has no ClusterConfiguration", initConfigPath)
	}
	ic, ok := docs["InitConfiguration"]
	if !ok {
		return nil, fmt.Errorf("%s has no InitConfiguration", initConfigPath)
	}
	b := &Boot{
		Role:                 RoleInit,
		ClusterName:          str(cc, "clusterName"),
		KubernetesVersion:    str(cc, "kubernetesVersion"),
		ClusterConfiguration: strings.TrimSpace(texts["ClusterConfiguration"]) + "\n",
		Endpoint:             str(cc, "controlPlaneEndpoint"),
	}
	if b.ClusterName == "" {
		return nil, errors.New("ClusterConfiguration has no clusterName")
	}
	if b.Endpoint == "" {
		return nil, errors.New("ClusterConfiguration has no controlPlaneEndpoint")
	}
	if b.Port, err = portOf(b.Endpoint); err != nil {
		return nil, err
	}
	if b.NodeName, err = nodeName(ic, meta); err != nil {
		return nil, err
	}
	if b.CA, b.EtcdCA, err = caFiles(f); err != nil {
		return nil, err
	}
	return b, nil
}

// caFiles: the cluster CA and etcd CA that kubeadm init (and join --control-plane) needs on disk.
func caFiles(f *files) (*KeyPair, *KeyPair, error) {
	ca, err := keyPair(f, caCertPath, caKeyPath)
	if err != nil {
		return nil, nil, err
	}
	etcd, err := keyPair(f, etcdCACertPath, etcdCAKeyPath)
	if err != nil {
		return nil, nil, err
	}
	return ca, etcd, nil
}

func bootJoin(f *files, meta *Metadata, cfg string) (*Boot, error) {
	_, docs, err := kubeadmDocs(cfg)
	if err != nil {
		return nil, err
	}
	jc, ok := docs["JoinConfiguration"]
	if !ok {
		return nil, fmt.Errorf("%s has no JoinConfiguration", joinConfigPath)
	}
	b := &Boot{Role: RoleWorker}
	if _, cp := jc["controlPlane"]; cp && jc["controlPlane"] != nil {
		b.Role = RoleControlPlane
	}
	if b.NodeName, err = nodeName(jc, meta); err != nil {
		return nil, err
	}
	bt, _ := jc["discovery"].(map[string]any)
	bt, _ = bt["bootstrapToken"].(map[string]any)
	if bt == nil {
		return nil, errors.New("JoinConfiguration has no discovery.bootstrapToken (file discovery is not simulated)")
	}
	b.Endpoint = str(bt, "apiServerEndpoint")
	b.Token = str(bt, "token")
	if b.Endpoint == "" || b.Token == "" {
		return nil, errors.New("discovery.bootstrapToken needs apiServerEndpoint and token")
	}
	if b.Port, err = portOf(b.Endpoint); err != nil {
		return nil, err
	}
	if hashes, ok := bt["caCertHashes"].([]any); ok {
		for _, h := range hashes {
			if s, ok := h.(string); ok {
				b.CACertHashes = append(b.CACertHashes, strings.ToLower(s))
			}
		}
	}
	if len(b.CACertHashes) == 0 {
		if skip, _ := bt["unsafeSkipCAVerification"].(bool); !skip {
			return nil, errors.New("discovery.bootstrapToken has no caCertHashes and unsafeSkipCAVerification is not set")
		}
	}
	if b.Role == RoleControlPlane {
		// kubeadm join --control-plane needs the shared CAs on disk (CABPK writes them).
		if b.CA, b.EtcdCA, err = caFiles(f); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// TokenID is the public half of a bootstrap token (abcdef of abcdef.0123456789abcdef).
func (b *Boot) TokenID() string {
	id, _, _ := strings.Cut(b.Token, ".")
	return id
}

func keyPair(f *files, certPath, keyPath string) (*KeyPair, error) {
	certPEM, ok := f.content[certPath]
	if !ok {
		return nil, fmt.Errorf("no %s in the user data", certPath)
	}
	keyPEM, ok := f.content[keyPath]
	if !ok {
		return nil, fmt.Errorf("no %s in the user data", keyPath)
	}
	block, _ := pem.Decode([]byte(certPEM))
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s is not a PEM certificate", certPath)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", certPath, err)
	}
	kblock, _ := pem.Decode([]byte(keyPEM))
	if kblock == nil {
		return nil, fmt.Errorf("%s is not PEM", keyPath)
	}
	var key any
	switch kblock.Type {
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(kblock.Bytes)
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(kblock.Bytes)
	default:
		err = fmt.Errorf("unexpected PEM block %q", kblock.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", keyPath, err)
	}
	rsaKey, ok := key.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: not an RSA key (the in-memory server signs with RSA only)", keyPath)
	}
	pub, ok := cert.PublicKey.(*rsa.PublicKey)
	if !ok || !pub.Equal(&rsaKey.PublicKey) {
		return nil, fmt.Errorf("%s does not match %s", keyPath, certPath)
	}
	return &KeyPair{Cert: cert, Key: rsaKey}, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
