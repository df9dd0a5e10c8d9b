package deploy_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

var update = flag.Bool("update", false, "rewrite the chart's files/prometheus-rules.yaml and the manifests of kubernetes/ rendered from the chart (make manifests)")

// bin is infergate, built once by TestMain from this tree.
var bin string

// stopMargin is what infergate needs after the drain to exit: the admin
// listener's shutdown (at most 2s) and saving the alert state. Grace
// periods and stop timeouts must leave it.
const stopMargin = 5 * time.Second

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "infergate-deploy-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	build := exec.Command("go", "build", "-o", dir+"/", "../cmd/infergate")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build:", err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "infergate")
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// runInfergate runs the built binary and returns its exit code and output.
func runInfergate(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out)
	}
	t.Fatalf("infergate %q: %v", args, err)
	return 0, ""
}

// checkConfig runs `infergate --check-config ARGS` and fails unless the
// binary accepts them.
func checkConfig(t *testing.T, where string, args []string) {
	t.Helper()
	code, out := runInfergate(t, append([]string{"--check-config"}, args...)...)
	if code != 0 || !strings.Contains(out, "configuration is valid") {
		t.Fatalf("%s: infergate --check-config %s: exit %d\n%s", where, strings.Join(args, " "), code, out)
	}
	t.Logf("%s: infergate --check-config %s: valid", where, strings.Join(args, " "))
}

// flagValue returns the value of a non-boolean flag in args as Go's flag
// package reads it (-name v, --name v, -name=v, --name=v; the last wins).
func flagValue(args []string, name string) (string, bool) {
	var v string
	found := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || !strings.HasPrefix(a, "-") {
			break
		}
		a = strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if k, val, ok := strings.Cut(a, "="); ok {
			if k == name {
				v, found = val, true
			}
			continue
		}
		if a == name && i+1 < len(args) {
			v, found = args[i+1], true
			i++
		}
	}
	return v, found
}

// setting is one of infergate's settings as started by args: the flag if
// given, else the key of the YAML file that --config names. The files in
// deploy/ state every setting that their ports, probes and timeouts rely
// on, so a changed default cannot move them silently: absent is a failure.
func setting(t *testing.T, where string, args []string, flagName, key string) string {
	t.Helper()
	if v, ok := flagValue(args, flagName); ok {
		return v
	}
	if path, ok := flagValue(args, "config"); ok {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var file map[string]any
		if err := yaml.Unmarshal(b, &file); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if v, ok := file[key]; ok {
			return fmt.Sprint(v)
		}
	}
	t.Fatalf("%s: --%s (or %q in its config file) is not given; state it, the rest of the file depends on it", where, flagName, key)
	return ""
}

func duration(t *testing.T, where string, args []string, flagName, key string) time.Duration {
	t.Helper()
	v := setting(t, where, args, flagName, key)
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s: --%s %q: %v", where, flagName, v, err)
	}
	return d
}

// hostPort splits a listen address and returns its numeric port.
func hostPort(t *testing.T, where, addr string) (string, int) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%s: %q: %v", where, addr, err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatalf("%s: %q: port %q is not a number", where, addr, port)
	}
	return host, n
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ---- Dockerfile ----

type dockerInstruction struct {
	cmd, rest string
	line      int
}

type dockerStage struct {
	base, name string
	ins        []dockerInstruction
}

// last returns the rest of the stage's last instruction cmd, or "".
func (s *dockerStage) last(cmd string) string {
	for i := len(s.ins) - 1; i >= 0; i-- {
		if s.ins[i].cmd == cmd {
			return s.ins[i].rest
		}
	}
	return ""
}

// parseDockerfile reads the instructions of each stage, with continuation
// lines joined and comments dropped, and the ARGs before the first FROM.
func parseDockerfile(t *testing.T, path string) (map[string]string, []*dockerStage) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	globals := map[string]string{}
	var stages []*dockerStage
	var cur strings.Builder
	start := 0
	for i, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		if cont, ok := strings.CutSuffix(trimmed, `\`); ok {
			cur.WriteString(cont + " ")
			continue
		}
		cur.WriteString(trimmed)
		cmd, rest, _ := strings.Cut(cur.String(), " ")
		cur.Reset()
		in := dockerInstruction{cmd: strings.ToUpper(cmd), rest: strings.TrimSpace(rest), line: start}
		switch {
		case in.cmd == "FROM":
			f := strings.Fields(in.rest)
			st := &dockerStage{base: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.name = f[2]
			}
			stages = append(stages, st)
		case len(stages) == 0 && in.cmd == "ARG":
			k, v, _ := strings.Cut(in.rest, "=")
			globals[k] = v
		case len(stages) > 0:
			stages[len(stages)-1].ins = append(stages[len(stages)-1].ins, in)
		}
	}
	return globals, stages
}

// execForm decodes an exec-form (JSON array) instruction: the image has
// no shell to run the shell form.
func execForm(t *testing.T, what, rest string) []string {
	t.Helper()
	var argv []string
	if err := json.Unmarshal([]byte(rest), &argv); err != nil || len(argv) == 0 {
		t.Fatalf("%s %s: not the exec form (a JSON array): the image has no shell", what, rest)
	}
	return argv
}

// goVersion turns "1.26.8" into comparable numbers.
func goVersion(t *testing.T, v string) []int {
	t.Helper()
	var out []int
	for _, p := range strings.Split(v, ".") {
		n, err := strconv.Atoi(p)
		if err != nil {
			t.Fatalf("Go version %q", v)
		}
		out = append(out, n)
	}
	return out
}

// TestDockerfile: every image the Dockerfile makes starts infergate as a
// non-root user with a CMD the binary accepts (--check-config with exactly
// those arguments), and checks its health with `infergate healthcheck` on
// /readyz of the admin address that CMD gives. The default image is the
// static (CGO_ENABLED=0) build, and the builder's Go is not older than
// go.mod's.
func TestDockerfile(t *testing.T) {
	globals, stages := parseDockerfile(t, "Dockerfile")

	gomod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(gomod)
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	if want, got := string(m[1]), globals["GO_VERSION"]; slices.Compare(goVersion(t, got), goVersion(t, want)) < 0 {
		t.Errorf("ARG GO_VERSION=%s is older than go.mod's go %s (the official images do not switch toolchains)", got, want)
	}

	images := 0
	for _, st := range stages {
		entry := st.last("ENTRYPOINT")
		if entry == "" {
			continue
		}
		images++
		where := "Dockerfile stage " + cmpOr(st.name, "(default)")
		t.Run(cmpOr(st.name, "default"), func(t *testing.T) {
			user, _, _ := strings.Cut(st.last("USER"), ":")
			if user == "" || user == "root" || user == "0" {
				t.Errorf("%s: USER %q: the image must run as a non-root user", where, st.last("USER"))
			}
			ep := execForm(t, where+": ENTRYPOINT", entry)
			copied := false
			for _, in := range st.ins {
				f := strings.Fields(in.rest)
				copied = copied || (in.cmd == "COPY" && f[len(f)-1] == ep[0])
			}
			if !copied {
				t.Errorf("%s: ENTRYPOINT %s: no COPY puts the binary there", where, ep[0])
			}
			cmdArgs := execForm(t, where+": CMD", st.last("CMD"))
			checkConfig(t, where+": ENTRYPOINT + CMD", append(ep[1:], cmdArgs...))

			admin := setting(t, where+": CMD", cmdArgs, "admin", "admin")
			_, adminPort := hostPort(t, where+": --admin", admin)

			hc := st.last("HEALTHCHECK")
			_, after, ok := strings.Cut(hc, "CMD ")
			if !ok {
				t.Fatalf("%s: HEALTHCHECK %q has no CMD", where, hc)
			}
			argv := execForm(t, where+": HEALTHCHECK CMD", after)
			if argv[0] != ep[0] || len(argv) < 3 || argv[1] != "healthcheck" {
				t.Fatalf("%s: HEALTHCHECK CMD %q: want %s healthcheck URL", where, argv, ep[0])
			}
			u, err := url.Parse(argv[len(argv)-1])
			if err != nil {
				t.Fatal(err)
			}
			if u.Path != "/readyz" || !isLoopback(u.Hostname()) || u.Port() != strconv.Itoa(adminPort) {
				t.Errorf("%s: HEALTHCHECK asks %s; want /readyz on loopback at the admin port %d (--admin %s)", where, u, adminPort, admin)
			}
			// The subcommand accepts exactly these arguments: 0 or 1
			// (whatever answers on that port here, if anything), never 2.
			if code, out := runInfergate(t, argv[1:]...); code != 0 && code != 1 {
				t.Errorf("%s: infergate %s: exit %d (bad usage)\n%s", where, strings.Join(argv[1:], " "), code, out)
			}
		})
	}
	if images == 0 {
		t.Fatal("Dockerfile: no stage has an ENTRYPOINT")
	}

	// The default image (the last stage) holds the static build.
	final := stages[len(stages)-1]
	static := false
	for _, in := range final.ins {
		from, ok := strings.CutPrefix(in.rest, "--from=")
		if in.cmd != "COPY" || !ok || !strings.HasSuffix(in.rest, " /usr/local/bin/infergate") {
			continue
		}
		name, _, _ := strings.Cut(from, " ")
		for _, st := range stages {
			for _, b := range st.ins {
				if st.name == name && b.cmd == "RUN" && strings.Contains(b.rest, "CGO_ENABLED=0") && strings.Contains(b.rest, "go build") {
					static = true
				}
			}
		}
	}
	if !static {
		t.Error("Dockerfile: the default (last) stage does not copy a CGO_ENABLED=0 build: it has no libc to link against")
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TestDockerImageBuilds builds the default image and runs --check-config in
// it with the Dockerfile's CMD. It needs a Docker daemon; without one it
// skips and says so.
func TestDockerImageBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: building an image downloads base images")
	}
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("no docker command")
	}
	if out, err := exec.Command("docker", "info").CombinedOutput(); err != nil {
		t.Skipf("no Docker daemon reachable: %v\n%s", err, bytes.TrimSpace(out))
	}
	_, stages := parseDockerfile(t, "Dockerfile")
	cmdArgs := execForm(t, "CMD", stages[len(stages)-1].last("CMD"))
	tag := fmt.Sprintf("infergate-deploy-test:%d", os.Getpid())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "docker", "build", "-f", "deploy/Dockerfile", "-t", tag, ".")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("docker build: %v\n%s", err, out)
	}
	defer exec.Command("docker", "rmi", "-f", tag).Run()
	out, err := exec.CommandContext(ctx, "docker", append([]string{"run", "--rm", tag, "--check-config"}, cmdArgs...)...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "configuration is valid") {
		t.Fatalf("docker run %s --check-config: %v\n%s", tag, err, out)
	}
}

// ---- Kubernetes ----

type k8sObject struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"`
	Spec yaml.Node         `yaml:"spec"`
	file string
}

type deploymentSpec struct {
	Selector struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	} `yaml:"selector"`
	Template struct {
		Metadata struct {
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"metadata"`
		Spec struct {
			TerminationGracePeriodSeconds *int64      `yaml:"terminationGracePeriodSeconds"`
			Containers                    []container `yaml:"containers"`
			Volumes                       []volume    `yaml:"volumes"`
		} `yaml:"spec"`
	} `yaml:"template"`
}

type container struct {
	Name    string   `yaml:"name"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Ports   []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	Env []struct {
		Name  string `yaml:"name"`
		Value string `yaml:"value"`
	} `yaml:"env"`
	Resources struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	ReadinessProbe *probe `yaml:"readinessProbe"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	Lifecycle      struct {
		PreStop *struct {
			Exec *struct {
				Command []string `yaml:"command"`
			} `yaml:"exec"`
			Sleep *struct {
				Seconds int64 `yaml:"seconds"`
			} `yaml:"sleep"`
		} `yaml:"preStop"`
	} `yaml:"lifecycle"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		SubPath   string `yaml:"subPath"`
	} `yaml:"volumeMounts"`
	SecurityContext struct {
		RunAsNonRoot           *bool  `yaml:"runAsNonRoot"`
		RunAsUser              *int64 `yaml:"runAsUser"`
		ReadOnlyRootFilesystem *bool  `yaml:"readOnlyRootFilesystem"`
	} `yaml:"securityContext"`
}

type probe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
}

type volume struct {
	Name      string `yaml:"name"`
	ConfigMap *struct {
		Name  string `yaml:"name"`
		Items []struct {
			Key  string `yaml:"key"`
			Path string `yaml:"path"`
		} `yaml:"items"`
	} `yaml:"configMap"`
	EmptyDir *yaml.Node `yaml:"emptyDir"`
	Secret   *struct {
		SecretName string `yaml:"secretName"`
	} `yaml:"secret"`
}

// port resolves a probe's or a Service's port (a number or a port name)
// against the container's ports.
func (c container) port(t *testing.T, p string) int {
	t.Helper()
	if n, err := strconv.Atoi(p); err == nil {
		return n
	}
	for _, cp := range c.Ports {
		if cp.Name == p {
			return cp.ContainerPort
		}
	}
	t.Fatalf("container %s has no port named %q", c.Name, p)
	return 0
}

// portName returns the name of the container's port n.
func (c container) portName(n int) string {
	for _, cp := range c.Ports {
		if cp.ContainerPort == n {
			return cp.Name
		}
	}
	return ""
}

// preStopDelay is how long the container's preStop hook holds SIGTERM
// back: a sleep action, or an exec of sleep N; none is 0.
func (c container) preStopDelay(t *testing.T) time.Duration {
	t.Helper()
	ps := c.Lifecycle.PreStop
	switch {
	case ps == nil:
		return 0
	case ps.Sleep != nil:
		return time.Duration(ps.Sleep.Seconds) * time.Second
	case ps.Exec != nil && len(ps.Exec.Command) == 2 && filepath.Base(ps.Exec.Command[0]) == "sleep":
		n, err := strconv.Atoi(ps.Exec.Command[1])
		if err == nil {
			return time.Duration(n) * time.Second
		}
	}
	t.Fatalf("container %s: cannot read a delay from its preStop hook (want sleep N)", c.Name)
	return 0
}

func loadK8s(t *testing.T) []*k8sObject {
	t.Helper()
	files, err := filepath.Glob("kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in kubernetes/: %v", err)
	}
	var objs []*k8sObject
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for {
			o := &k8sObject{file: f}
			err := dec.Decode(o)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if o.Kind == "" || o.APIVersion == "" || o.Metadata.Name == "" {
				t.Fatalf("%s: a document without apiVersion, kind or metadata.name", f)
			}
			objs = append(objs, o)
		}
	}
	return objs
}

func find(objs []*k8sObject, kind string) []*k8sObject {
	var out []*k8sObject
	for _, o := range objs {
		if o.Kind == kind {
			out = append(out, o)
		}
	}
	return out
}

// selects reports whether every label of the selector is on the pod.
func selects(selector, pod map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if pod[k] != v {
			return false
		}
	}
	return true
}

// promLabelName is the label Prometheus' Kubernetes discovery makes of an
// annotation name: every character outside [a-zA-Z0-9_] becomes _.
func promLabelName(s string) string {
	return regexp.MustCompile(`[^a-zA-Z0-9_]`).ReplaceAllString(s, "_")
}

// k8sSetup is the Deployment's infergate container with its mounted files
// written under a temporary root, and its args pointing there.
type k8sSetup struct {
	objs        []*k8sObject
	deploy      deploymentSpec
	infergate   container
	args        []string // rewritten to the temporary root
	configPath  string   // the --config file under the temporary root
	adminPort   int
	adminPortNm string
}

func setupK8s(t *testing.T) *k8sSetup {
	t.Helper()
	objs := loadK8s(t)
	if n := len(find(objs, "Deployment")); n != 1 {
		t.Fatalf("want one Deployment, found %d", n)
	}
	return setupPod(t, objs, "")
}

// setupPod is setupK8s for the Deployment named name (any, when name is
// "") among objs: the raw manifests or a chart's rendered objects.
func setupPod(t *testing.T, objs []*k8sObject, name string) *k8sSetup {
	t.Helper()
	s := &k8sSetup{objs: objs}
	deps := slices.DeleteFunc(find(s.objs, "Deployment"), func(o *k8sObject) bool { return name != "" && o.Metadata.Name != name })
	if len(deps) != 1 {
		t.Fatalf("want one Deployment %q, found %d", name, len(deps))
	}
	if err := deps[0].Spec.Decode(&s.deploy); err != nil {
		t.Fatal(err)
	}
	pod := s.deploy.Template.Spec
	i := slices.IndexFunc(pod.Containers, func(c container) bool { return c.Name == "infergate" })
	if i < 0 {
		t.Fatal("the Deployment has no container named infergate")
	}
	s.infergate = pod.Containers[i]
	if len(s.infergate.Command) > 0 {
		t.Fatalf("container infergate: command %q replaces the image's ENTRYPOINT (infergate); give args only", s.infergate.Command)
	}

	// Write what the pod mounts into the infergate container under root,
	// each at its mount path; then point every path under a mount there.
	// Nothing else of the args changes.
	root := t.TempDir()
	var mounts []string
	for _, vm := range s.infergate.VolumeMounts {
		vi := slices.IndexFunc(pod.Volumes, func(v volume) bool { return v.Name == vm.Name })
		if vi < 0 {
			t.Fatalf("volumeMount %s: no such volume", vm.Name)
		}
		v := pod.Volumes[vi]
		dir := filepath.Join(root, vm.MountPath)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		mounts = append(mounts, vm.MountPath)
		switch {
		case v.EmptyDir != nil:
		case v.ConfigMap != nil && vm.SubPath == "":
			cms := find(s.objs, "ConfigMap")
			ci := slices.IndexFunc(cms, func(o *k8sObject) bool { return o.Metadata.Name == v.ConfigMap.Name })
			if ci < 0 {
				t.Fatalf("volume %s: no ConfigMap %s in kubernetes/", v.Name, v.ConfigMap.Name)
			}
			files := map[string]string{}
			for k := range cms[ci].Data {
				files[k] = k
			}
			if len(v.ConfigMap.Items) > 0 {
				files = map[string]string{}
				for _, it := range v.ConfigMap.Items {
					files[it.Key] = it.Path
				}
			}
			for key, path := range files {
				data, ok := cms[ci].Data[key]
				if !ok {
					t.Fatalf("volume %s: ConfigMap %s has no key %s", v.Name, v.ConfigMap.Name, key)
				}
				p := filepath.Join(dir, path)
				os.MkdirAll(filepath.Dir(p), 0o755)
				if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		case v.Secret != nil && vm.SubPath == "":
			// The Secret's keys as files: its data where the objects hold
			// it, else (a Secret made beside them) a placeholder under
			// the keys the args name.
			files := map[string][]byte{}
			for _, o := range find(s.objs, "Secret") {
				if o.Metadata.Name == v.Secret.SecretName {
					for k, d := range o.Data {
						b, err := base64.StdEncoding.DecodeString(d)
						if err != nil {
							t.Fatalf("Secret %s key %s: %v", o.Metadata.Name, k, err)
						}
						files[k] = b
					}
				}
			}
			if len(files) == 0 {
				for _, a := range s.infergate.Args {
					if _, rest, ok := strings.Cut(a, vm.MountPath+"/"); ok {
						files[rest] = []byte("placeholder-token")
					}
				}
			}
			for k, b := range files {
				if err := os.WriteFile(filepath.Join(dir, k), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
		default:
			t.Fatalf("volume %s: only configMap, secret and emptyDir volumes (without subPath) are written out here; teach setupK8s the new kind", v.Name)
		}
	}
	slices.SortFunc(mounts, func(a, b string) int { return len(b) - len(a) }) // the deepest mount first
	for _, a := range s.infergate.Args {
		for _, m := range mounts {
			if i := strings.Index(a, m+"/"); i >= 0 {
				a = a[:i] + filepath.Join(root, m) + "/" + a[i+len(m)+1:]
				break
			}
		}
		s.args = append(s.args, a)
	}
	if p, ok := flagValue(s.args, "config"); ok {
		s.configPath = p
	}

	admin := setting(t, "infergate args", s.args, "admin", "admin")
	var host string
	host, s.adminPort = hostPort(t, "--admin", admin)
	if isLoopback(host) {
		t.Errorf("--admin %s: on loopback the kubelet's probes and Prometheus cannot reach it", admin)
	}
	s.adminPortNm = s.infergate.portName(s.adminPort)
	if s.adminPortNm == "" {
		t.Errorf("container infergate declares no port %d (--admin %s)", s.adminPort, admin)
	}
	return s
}

// checkProbes: readiness on /readyz, liveness on /healthz (a Triton
// outage must not restart infergate), both on the admin port.
func checkProbes(t *testing.T, s *k8sSetup) {
	c := s.infergate
	for _, p := range []struct {
		name, path string
		probe      *probe
	}{{"readinessProbe", "/readyz", c.ReadinessProbe}, {"livenessProbe", "/healthz", c.LivenessProbe}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("container infergate: no %s.httpGet", p.name)
			continue
		}
		if got := c.port(t, p.probe.HTTPGet.Port); p.probe.HTTPGet.Path != p.path || got != s.adminPort {
			t.Errorf("container infergate: %s asks %s on port %d; want %s on the admin port %d", p.name, p.probe.HTTPGet.Path, got, p.path, s.adminPort)
		}
	}
}

// TestKubernetes: the infergate container's args and the ConfigMap's file,
// exactly as mounted, pass --check-config; probes, ports, the Service, the
// scrape annotations and the PodMonitor name the addresses those args
// give; the grace period covers the drain; the PrometheusRule is what
// `infergate rules export` prints for that file.
func TestKubernetes(t *testing.T) {
	s := setupK8s(t)
	checkConfig(t, "Deployment container infergate", s.args)
	pod := s.deploy.Template
	c := s.infergate

	if !selects(s.deploy.Selector.MatchLabels, pod.Metadata.Labels) {
		t.Errorf("Deployment selector %v does not select its pods %v", s.deploy.Selector.MatchLabels, pod.Metadata.Labels)
	}
	if c.SecurityContext.RunAsNonRoot == nil || !*c.SecurityContext.RunAsNonRoot {
		t.Error("container infergate: securityContext.runAsNonRoot is not true")
	}

	checkProbes(t, s)

	// Clients reach infergate's gRPC listener, never Triton directly.
	listen := setting(t, "infergate args", s.args, "listen", "listen")
	host, listenPort := hostPort(t, "--listen", listen)
	if isLoopback(host) {
		t.Errorf("--listen %s: on loopback no client outside the pod reaches it", listen)
	}
	services := 0
	for _, o := range find(s.objs, "Service") {
		var spec struct {
			Selector map[string]string `yaml:"selector"`
			Ports    []struct {
				Name       string `yaml:"name"`
				TargetPort string `yaml:"targetPort"`
			} `yaml:"ports"`
		}
		if err := o.Spec.Decode(&spec); err != nil {
			t.Fatal(err)
		}
		if !selects(spec.Selector, pod.Metadata.Labels) {
			continue
		}
		services++
		for _, p := range spec.Ports {
			if got := c.port(t, p.TargetPort); got != listenPort {
				t.Errorf("Service %s port %s: targetPort %s is %d, not infergate's --listen %s", o.Metadata.Name, p.Name, p.TargetPort, got, listen)
			}
		}
	}
	if services == 0 {
		t.Error("no Service selects the Deployment's pods")
	}

	// The upstream is the Triton container on the pod's loopback.
	i := slices.IndexFunc(pod.Spec.Containers, func(c container) bool { return c.Name == "triton" })
	if i < 0 {
		t.Fatal("the Deployment has no container named triton")
	}
	triton := pod.Spec.Containers[i]
	upstream := setting(t, "infergate args", s.args, "upstream", "upstream")
	uhost, uport := hostPort(t, "--upstream", upstream)
	grpcPort := "8001" // tritonserver's default
	if v, ok := flagValue(triton.Args, "grpc-port"); ok {
		grpcPort = v
	}
	if !isLoopback(uhost) || strconv.Itoa(uport) != grpcPort {
		t.Errorf("--upstream %s: want the triton container's gRPC port %s on loopback", upstream, grpcPort)
	}

	// Shutdown arithmetic (see the comment in the manifest): infergate
	// drains for drain-delay and shutdown-timeout after its preStop; Triton
	// keeps serving until then and exits within its exit timeout; the
	// grace period covers both, with a margin.
	drain := duration(t, "infergate args", s.args, "drain-delay", "drain_delay")
	shutdown := duration(t, "infergate args", s.args, "shutdown-timeout", "shutdown_timeout")
	if pod.Spec.TerminationGracePeriodSeconds == nil {
		t.Fatal("no terminationGracePeriodSeconds: the default 30s is shorter than the drain")
	}
	grace := time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	igDone := c.preStopDelay(t) + drain + shutdown
	if grace < igDone+stopMargin {
		t.Errorf("terminationGracePeriodSeconds %s < infergate's preStop + drain-delay %s + shutdown-timeout %s + margin %s", grace, drain, shutdown, stopMargin)
	}
	tritonStop := triton.preStopDelay(t)
	if tritonStop < igDone {
		t.Errorf("triton's preStop delay %s < %s (infergate's preStop + drain-delay + shutdown-timeout): calls still draining would find Triton gone", tritonStop, igDone)
	}
	exitTimeout := "30" // tritonserver's default
	if v, ok := flagValue(triton.Args, "exit-timeout-secs"); ok {
		exitTimeout = v
	}
	et, err := strconv.Atoi(exitTimeout)
	if err != nil {
		t.Fatalf("triton --exit-timeout-secs %q", exitTimeout)
	}
	if need := tritonStop + time.Duration(et)*time.Second + stopMargin; grace < need {
		t.Errorf("terminationGracePeriodSeconds %s < triton's preStop %s + --exit-timeout-secs %ds + margin %s", grace, tritonStop, et, stopMargin)
	}

	// Scrape annotations name the admin port, and every annotation the
	// annotation job of ../prometheus/scrape.yml reads is there.
	ann := pod.Metadata.Annotations
	if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/port"] != strconv.Itoa(s.adminPort) || ann["prometheus.io/path"] != "/metrics" {
		t.Errorf("pod annotations %v: want prometheus.io/scrape true, port %d (--admin), path /metrics", ann, s.adminPort)
	}
	for _, name := range annotationsScraped(t) {
		found := false
		for k := range ann {
			found = found || promLabelName(k) == name
		}
		if !found {
			t.Errorf("../prometheus/scrape.yml reads pod annotation %s; the pod template has no such annotation", name)
		}
	}

	t.Run("Memory", func(t *testing.T) { checkK8sMemory(t, s) })
	t.Run("PodMonitor", func(t *testing.T) { checkPodMonitor(t, s) })
	t.Run("PrometheusRule", func(t *testing.T) { checkPrometheusRule(t, s) })
}

// checkPodMonitor: it selects the pods, scrapes /metrics on the admin
// port, and keeps the classic histogram buckets that the exported rules
// read when it asks for native histograms. The histogram settings are
// the PodMonitor's (spec), not an endpoint's: there the operator's schema
// has no such fields.
func checkPodMonitor(t *testing.T, s *k8sSetup) {
	pms := find(s.objs, "PodMonitor")
	if len(pms) != 1 {
		t.Fatalf("want one PodMonitor, found %d", len(pms))
	}
	var spec struct {
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		ScrapeNative  *bool            `yaml:"scrapeNativeHistograms"`
		ScrapeClassic *bool            `yaml:"scrapeClassicHistograms"`
		Endpoints     []map[string]any `yaml:"podMetricsEndpoints"`
	}
	if err := pms[0].Spec.Decode(&spec); err != nil {
		t.Fatal(err)
	}
	if !selects(spec.Selector.MatchLabels, s.deploy.Template.Metadata.Labels) {
		t.Errorf("PodMonitor selector %v does not select the pods %v", spec.Selector.MatchLabels, s.deploy.Template.Metadata.Labels)
	}
	if spec.ScrapeNative != nil && *spec.ScrapeNative && (spec.ScrapeClassic == nil || !*spec.ScrapeClassic) {
		t.Error("PodMonitor: scrapeNativeHistograms without scrapeClassicHistograms drops the _bucket series the exported rules read")
	}
	admin := false
	for _, ep := range spec.Endpoints {
		for _, k := range []string{"scrapeNativeHistograms", "scrapeClassicHistograms", "scrapeProtocols"} {
			if _, ok := ep[k]; ok {
				t.Errorf("PodMonitor: %s is a field of spec, not of podMetricsEndpoints", k)
			}
		}
		path, _ := ep["path"].(string)
		admin = admin || (ep["port"] == s.adminPortNm && cmpOr(path, "/metrics") == "/metrics")
	}
	if !admin {
		t.Errorf("PodMonitor: no endpoint scrapes /metrics on port %q (infergate's admin port %d)", s.adminPortNm, s.adminPort)
	}
}

// checkPrometheusRule: the PrometheusRule (rendered from the chart, see
// helm_test.go) holds the groups `infergate rules export` prints for the
// mounted config; promtool checks the rules.
func checkPrometheusRule(t *testing.T, s *k8sSetup) {
	if s.configPath == "" {
		t.Fatal("container infergate has no --config")
	}
	code, out := runInfergate(t, "rules", "export", "--config", s.configPath)
	if code != 0 {
		t.Fatalf("infergate rules export --config %s: exit %d\n%s", s.configPath, code, out)
	}
	prs := find(s.objs, "PrometheusRule")
	if len(prs) != 1 {
		t.Fatalf("want one PrometheusRule, found %d", len(prs))
	}
	var got, want any
	if err := prs[0].Spec.Decode(&got); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(out), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("PrometheusRule %s (%s) is not what `infergate rules export` prints for the ConfigMap's config; run make manifests. Want:\n%s", prs[0].Metadata.Name, prs[0].file, out)
	}
	if _, err := exec.LookPath("promtool"); err != nil {
		t.Fatal("promtool not installed (Debian's prometheus package; .ci/run installs it): the rules' syntax cannot be checked")
	}
	rules := filepath.Join(t.TempDir(), "rules.yml")
	if err := os.WriteFile(rules, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command("promtool", "check", "rules", rules).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, b)
	}
}

// ---- systemd ----

// unitFile is a systemd unit: section → key → values (keys repeat), and
// the file's comment lines.
type unitFile struct {
	keys     map[string]map[string][]string
	comments []string
}

func (u unitFile) get(section, key string) string {
	v := u.keys[section][key]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

func parseUnit(t *testing.T, path string) unitFile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	u := unitFile{keys: map[string]map[string][]string{}}
	section := ""
	var cur strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || strings.HasPrefix(trimmed, ";") {
			u.comments = append(u.comments, strings.TrimSpace(trimmed[1:]))
			continue
		}
		if cont, ok := strings.CutSuffix(trimmed, `\`); ok {
			cur.WriteString(cont + " ")
			continue
		}
		cur.WriteString(trimmed)
		l := strings.TrimSpace(cur.String())
		cur.Reset()
		switch {
		case l == "":
		case strings.HasPrefix(l, "[") && strings.HasSuffix(l, "]"):
			section = l[1 : len(l)-1]
			u.keys[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(l, "=")
			if !ok || section == "" {
				t.Fatalf("%s: cannot read %q", path, l)
			}
			u.keys[section][strings.TrimSpace(k)] = append(u.keys[section][strings.TrimSpace(k)], strings.TrimSpace(v))
		}
	}
	return u
}

// splitExec splits a command line as systemd does: words, with double or
// single quotes around a word that holds spaces, after the prefixes that
// change how the command runs (@-:+!).
func splitExec(s string) []string {
	s = strings.TrimLeft(s, "@-:+!")
	var out []string
	var w strings.Builder
	var quote rune
	inWord := false
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			w.WriteRune(r)
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				out = append(out, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		out = append(out, w.String())
	}
	return out
}

// systemdSpan reads a systemd time span ("45", "45s", "1min 30s").
func systemdSpan(t *testing.T, v string) time.Duration {
	t.Helper()
	if n, err := strconv.Atoi(v); err == nil {
		return time.Duration(n) * time.Second
	}
	d, err := time.ParseDuration(strings.ReplaceAll(strings.ReplaceAll(v, " ", ""), "min", "m"))
	if err != nil {
		t.Fatalf("time span %q: %v", v, err)
	}
	return d
}

// installed maps each path the unit's own install lines
// (`install ... SRC DEST`) put a repository file at to that file.
func installed(t *testing.T, u unitFile) map[string]string {
	t.Helper()
	re := regexp.MustCompile(`^install\s.*?(\S+)\s+(/\S+)$`)
	out := map[string]string{}
	for _, c := range u.comments {
		if m := re.FindStringSubmatch(c); m != nil && !strings.HasSuffix(m[2], "/") {
			abs, err := filepath.Abs(filepath.Join("..", m[1]))
			if err != nil {
				t.Fatal(err)
			}
			out[m[2]] = abs
		}
	}
	return out
}

// systemdArgs returns ExecStart's arguments with every path the unit's
// install lines name replaced by the repository file installed there.
func systemdArgs(t *testing.T, u unitFile) (argv0 string, args []string) {
	t.Helper()
	argv := splitExec(u.get("Service", "ExecStart"))
	if len(argv) == 0 {
		t.Fatal("infergate.service: no ExecStart")
	}
	inst := installed(t, u)
	if _, ok := inst[argv[0]]; !ok {
		t.Fatalf("infergate.service: ExecStart runs %s, which no install line of the unit puts there", argv[0])
	}
	for _, a := range argv[1:] {
		for dest, src := range inst {
			a = strings.ReplaceAll(a, dest, src)
		}
		args = append(args, a)
	}
	return argv[0], args
}

// TestSystemd: ExecStart's arguments, with the unit's infergate.yaml where
// its install lines put it, pass --check-config; TimeoutStopSec covers the
// drain; a bad configuration is not restarted; the state files are where
// ProtectSystem=strict lets the service write; systemd-analyze, where
// installed, finds nothing to say about the unit.
func TestSystemd(t *testing.T) {
	const path = "systemd/infergate.service"
	u := parseUnit(t, path)
	argv0, args := systemdArgs(t, u)
	checkConfig(t, path+" ExecStart", args)

	drain := duration(t, path, args, "drain-delay", "drain_delay")
	shutdown := duration(t, path, args, "shutdown-timeout", "shutdown_timeout")
	if ks := u.get("Service", "KillSignal"); ks != "" && ks != "SIGTERM" {
		t.Errorf("KillSignal=%s: infergate drains on SIGTERM", ks)
	}
	stop := u.get("Service", "TimeoutStopSec")
	if stop == "" {
		t.Fatal("no TimeoutStopSec: the default (90s, or DefaultTimeoutStopSec) is not tied to the drain")
	}
	if d := systemdSpan(t, stop); d < drain+shutdown+stopMargin {
		t.Errorf("TimeoutStopSec=%s < drain-delay %s + shutdown-timeout %s + margin %s", stop, drain, shutdown, stopMargin)
	}
	if r := u.get("Service", "Restart"); r != "on-failure" {
		t.Errorf("Restart=%s, want on-failure", r)
	}
	if !slices.Contains(strings.Fields(u.get("Service", "RestartPreventExitStatus")), "2") {
		t.Error("RestartPreventExitStatus lacks 2: a bad configuration (exit 2) would be restarted forever")
	}
	if u.get("Service", "DynamicUser") != "yes" && (u.get("Service", "User") == "" || u.get("Service", "User") == "root") {
		t.Error("the service runs as root: set DynamicUser=yes or User=")
	}

	// Under ProtectSystem=strict only the StateDirectory (and
	// ReadWritePaths) can be written: the state files must be there.
	if u.get("Service", "ProtectSystem") == "strict" {
		var writable []string
		for _, d := range strings.Fields(u.get("Service", "StateDirectory")) {
			writable = append(writable, "/var/lib/"+d+"/")
		}
		for _, d := range strings.Fields(u.get("Service", "ReadWritePaths")) {
			writable = append(writable, strings.TrimSuffix(strings.TrimLeft(d, "-"), "/")+"/")
		}
		cfgPath, _ := flagValue(args, "config")
		b, err := os.ReadFile(cfgPath)
		if err != nil {
			t.Fatal(err)
		}
		var cfg struct {
			Alerting struct {
				StateFile string `yaml:"state_file"`
				Baseline  struct {
					File string `yaml:"file"`
				} `yaml:"baseline"`
			} `yaml:"alerting"`
		}
		if err := yaml.Unmarshal(b, &cfg); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{cfg.Alerting.StateFile, cfg.Alerting.Baseline.File} {
			if f != "" && !slices.ContainsFunc(writable, func(w string) bool { return strings.HasPrefix(f, w) }) {
				t.Errorf("%s: not under a writable path %v of ProtectSystem=strict", f, writable)
			}
		}
	}

	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Fatal("systemd-analyze not installed (Debian's systemd package; .ci/run installs it): the unit cannot be verified")
	}
	// verify needs the executable to exist: a copy of the unit that runs
	// the built binary with the repository's config file.
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(b), argv0, bin)
	for dest, src := range installed(t, u) {
		text = strings.ReplaceAll(text, dest, src)
	}
	unit := filepath.Join(t.TempDir(), "infergate.service")
	if err := os.WriteFile(unit, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("systemd-analyze", "verify", unit).CombinedOutput()
	if err != nil || strings.Contains(string(out), "infergate.service:") {
		t.Errorf("systemd-analyze verify %s: %v\n%s", path, err, out)
	}
}

// ---- Prometheus ----

type promScrapeConfig struct {
	JobName         string `yaml:"job_name"`
	NativeHistogram *bool  `yaml:"scrape_native_histograms"`
	ClassicAlways   *bool  `yaml:"always_scrape_classic_histograms"`
	StaticConfigs   []struct {
		Targets []string `yaml:"targets"`
	} `yaml:"static_configs"`
	KubernetesSD   []map[string]any `yaml:"kubernetes_sd_configs"`
	RelabelConfigs []struct {
		SourceLabels []string `yaml:"source_labels"`
		TargetLabel  string   `yaml:"target_label"`
	} `yaml:"relabel_configs"`
}

type promConfig struct {
	RuleFiles     []string           `yaml:"rule_files"`
	ScrapeConfigs []promScrapeConfig `yaml:"scrape_configs"`
}

func loadScrape(t *testing.T) promConfig {
	t.Helper()
	b, err := os.ReadFile("prometheus/scrape.yml")
	if err != nil {
		t.Fatal(err)
	}
	var c promConfig
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatalf("prometheus/scrape.yml: %v", err)
	}
	return c
}

// annotationsScraped returns the pod annotations (as discovery labels
// name them) that scrape.yml's Kubernetes jobs read.
func annotationsScraped(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, sc := range loadScrape(t).ScrapeConfigs {
		for _, rc := range sc.RelabelConfigs {
			for _, l := range rc.SourceLabels {
				if a, ok := strings.CutPrefix(l, "__meta_kubernetes_pod_annotation_"); ok && !slices.Contains(out, a) {
					out = append(out, a)
				}
			}
		}
	}
	return out
}

// TestPrometheusScrape: every job that asks for native histograms keeps
// the classic buckets the exported rules read; the static job scrapes the
// admin port the systemd unit gives; promtool accepts the file with its
// rule file made by `infergate rules export` from the unit's config.
// Prometheus older than 3.8 does not know the lines marked "native"; with
// such a promtool they are left out first, as the file's header tells its
// users to do.
func TestPrometheusScrape(t *testing.T) {
	c := loadScrape(t)
	u := parseUnit(t, "systemd/infergate.service")
	_, args := systemdArgs(t, u)
	_, adminPort := hostPort(t, "systemd --admin", setting(t, "systemd ExecStart", args, "admin", "admin"))

	kube := false
	for _, sc := range c.ScrapeConfigs {
		if sc.NativeHistogram != nil && *sc.NativeHistogram && (sc.ClassicAlways == nil || !*sc.ClassicAlways) {
			t.Errorf("job %s: scrape_native_histograms without always_scrape_classic_histograms drops the _bucket series the exported rules read", sc.JobName)
		}
		for _, st := range sc.StaticConfigs {
			for _, target := range st.Targets {
				if _, p := hostPort(t, "job "+sc.JobName, target); p != adminPort {
					t.Errorf("job %s: target %s is not on the admin port %d of infergate.service", sc.JobName, target, adminPort)
				}
			}
		}
		kube = kube || len(sc.KubernetesSD) > 0
	}
	if !kube {
		t.Error("no job discovers the Kubernetes pods by their annotations")
	}

	if _, err := exec.LookPath("promtool"); err != nil {
		t.Fatal("promtool not installed (Debian's prometheus package; .ci/run installs it)")
	}
	dir := t.TempDir()
	cfgPath, _ := flagValue(args, "config")
	for _, rf := range c.RuleFiles {
		code, out := runInfergate(t, "rules", "export", "--config", cfgPath)
		if code != 0 {
			t.Fatalf("infergate rules export: exit %d\n%s", code, out)
		}
		if err := os.WriteFile(filepath.Join(dir, rf), []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile("prometheus/scrape.yml")
	if err != nil {
		t.Fatal(err)
	}
	ver, _ := exec.Command("promtool", "--version").CombinedOutput()
	if m := regexp.MustCompile(`version (\d+)\.(\d+)`).FindSubmatch(ver); m != nil {
		major, _ := strconv.Atoi(string(m[1]))
		minor, _ := strconv.Atoi(string(m[2]))
		if major < 3 || (major == 3 && minor < 8) {
			t.Logf("promtool %s.%s: checking scrape.yml without its lines marked native", m[1], m[2])
			var kept []string
			for _, l := range strings.Split(string(b), "\n") {
				if !strings.HasSuffix(l, "# native") {
					kept = append(kept, l)
				}
			}
			b = []byte(strings.Join(kept, "\n"))
		}
	}
	scrape := filepath.Join(dir, "scrape.yml")
	promtool := func() ([]byte, error) {
		if err := os.WriteFile(scrape, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return exec.Command("promtool", "check", "config", scrape).CombinedOutput()
	}
	out, err := promtool()
	if err != nil && bytes.Contains(out, []byte("field kubernetes_sd_configs not found")) {
		// Debian's Prometheus is built without Kubernetes discovery.
		t.Log("this promtool has no Kubernetes discovery: checking scrape.yml without kubernetes_sd_configs")
		b = withoutKey(t, b, "kubernetes_sd_configs")
		out, err = promtool()
	}
	if err != nil {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}
}

// withoutKey returns the YAML document b without the key name in any
// mapping.
func withoutKey(t *testing.T, b []byte, name string) []byte {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode {
			for i := 0; i < len(n.Content); i += 2 {
				if n.Content[i].Value == name {
					n.Content = slices.Delete(n.Content, i, i+2)
					i -= 2
				}
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(&doc)
	out, err := yaml.Marshal(&doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
