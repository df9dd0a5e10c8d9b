// Package deploy holds no code: beside this file are the container build
// (Dockerfile), a Helm chart (helm/infergate: gateway or sidecar, its
// monitoring and scaling; helm_test.go runs helm lint and helm template
// and checks what they render against the binary), Kubernetes manifests
// rendered from that chart (`make manifests`; TestHelmManifests fails on
// drift) for infergate as Triton's sidecar
// (and autoscalers that scale it on infergate's own signals:
// kubernetes/README-scaling.md), a Prometheus scrape configuration and a
// systemd unit. deploy_test.go runs
// `infergate --check-config` with exactly the arguments and configuration
// files they give, and checks the ports, probes, scrape settings, exported
// rules, shutdown timings and memory limits they share (memory_test.go), and
// the autoscalers' targets, metric names and SLO (scaling_test.go), so that
// they cannot drift from the binary.
package deploy
