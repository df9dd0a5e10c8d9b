package deploy_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestKubernetesGateway: the gateway example is infergate in front of a
// headless Service of Triton pods. Its args are a valid configuration;
// its upstream is dns:/// of that headless Service (clusterIP None, so DNS
// lists every ready pod) on the Service's gRPC port; the infergate
// Service reaches infergate's --listen port; the grace period covers the
// drain.
func TestKubernetesGateway(t *testing.T) {
	const file = "kubernetes/gateway/infergate-gateway.yaml"
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var objs []*k8sObject
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		o := &k8sObject{file: file}
		if err := dec.Decode(o); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, o)
	}
	s := setupPod(t, objs, "infergate")
	c := s.infergate
	checkConfig(t, "gateway Deployment container infergate", s.args)

	upstream := setting(t, "gateway infergate", s.args, "upstream", "upstream")
	rest, ok := strings.CutPrefix(upstream, "dns:///")
	if !ok {
		t.Fatalf("--upstream %q: want dns:///SERVICE:PORT, a pool of the Service's pods", upstream)
	}
	host, port, err := net.SplitHostPort(rest)
	if err != nil {
		t.Fatalf("--upstream %q: %v", upstream, err)
	}
	svcName := strings.Split(host, ".")[0]
	found := false
	for _, o := range find(objs, "Service") {
		var spec struct {
			ClusterIP string `yaml:"clusterIP"`
			Ports     []struct {
				Port int `yaml:"port"`
			} `yaml:"ports"`
		}
		if err := o.Spec.Decode(&spec); err != nil {
			t.Fatal(err)
		}
		if o.Metadata.Name != svcName {
			continue
		}
		found = true
		if spec.ClusterIP != "None" {
			t.Errorf("Service %s: clusterIP %q; want None (headless), or DNS gives one virtual IP and every connection lands on one pod", svcName, spec.ClusterIP)
		}
		if len(spec.Ports) == 0 || port != strconv.Itoa(spec.Ports[0].Port) {
			t.Errorf("--upstream port %s is not Service %s's port %v", port, svcName, spec.Ports)
		}
	}
	if !found {
		t.Errorf("--upstream names Service %q, which the example does not define", svcName)
	}
	listen := setting(t, "gateway infergate", s.args, "listen", "listen")
	if _, lp, err := net.SplitHostPort(listen); err != nil || !slices.ContainsFunc(c.Ports, func(p struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	}) bool {
		return p.Name == "grpc" && strconv.Itoa(p.ContainerPort) == lp
	}) {
		t.Errorf("--listen %s is not the container's grpc port %v", listen, c.Ports)
	}
}
