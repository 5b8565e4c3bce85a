package main

// `workload-sim etcd`: asks an in-memory etcd member for MemberList and Status the way KCP's etcd
// client does — TLS with SNI (and gRPC authority) etcd-<node>, verified against the etcd CA — over
// an address such as a `kubectl port-forward pod/etcd-<node> :2379`. Prints one line per member.
//
//	workload-sim etcd --address 127.0.0.1:PORT --member etcd-<node> --ca etcd-ca.crt

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"net"
	"os"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

func etcdMain(args []string) int {
	fs := flag.NewFlagSet("workload-sim etcd", flag.ContinueOnError)
	addr := fs.String("address", "", "host:port to dial (e.g. a kubectl port-forward)")
	member := fs.String("member", "", "etcd-<node>: SNI and gRPC authority")
	caFile := fs.String("ca", "", "etcd CA certificate (PEM)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := etcdRun(*addr, *member, *caFile); err != nil {
		fmt.Fprintf(os.Stderr, "workload-sim etcd: %v\n", err)
		return 1
	}
	return 0
}

func etcdRun(addr, member, caFile string) error {
	if addr == "" || member == "" || caFile == "" {
		return fmt.Errorf("--address, --member and --ca are required")
	}
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return fmt.Errorf("%s: no certificate", caFile)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := grpc.NewClient("passthrough:///"+member,
		grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{ServerName: member, RootCAs: pool, MinVersion: tls.VersionTLS12})),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		}))
	if err != nil {
		return err
	}
	defer conn.Close()
	members, err := pb.NewClusterClient(conn).MemberList(ctx, &pb.MemberListRequest{})
	if err != nil {
		return fmt.Errorf("MemberList: %w", err)
	}
	status, err := pb.NewMaintenanceClient(conn).Status(ctx, &pb.StatusRequest{})
	if err != nil {
		return fmt.Errorf("Status: %w", err)
	}
	for _, m := range members.Members {
		leader := ""
		if m.ID == status.Leader {
			leader = " leader"
		}
		fmt.Printf("member %s id=%d%s\n", m.Name, m.ID, leader)
	}
	return nil
}
