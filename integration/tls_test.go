package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/infergate/infergate/proto/kservepb"
)

// pki is a throwaway CA with one server and one client certificate, written
// as PEM files.
type pki struct {
	dir                                      string
	caFile, srvCert, srvKey, cliCert, cliKey string
}

func newPKI(t *testing.T) pki {
	t.Helper()
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "infergate test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	p := pki{dir: dir, caFile: filepath.Join(dir, "ca.pem")}
	writePEM(t, p.caFile, "CERTIFICATE", caDER)
	issue := func(name string, serial int64, usage x509.ExtKeyUsage) (string, string) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kd, _ := x509.MarshalECPrivateKey(key)
		cf, kf := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
		writePEM(t, cf, "CERTIFICATE", der)
		writePEM(t, kf, "EC PRIVATE KEY", kd)
		return cf, kf
	}
	p.srvCert, p.srvKey = issue("server", 2, x509.ExtKeyUsageServerAuth)
	p.cliCert, p.cliKey = issue("client", 3, x509.ExtKeyUsageClientAuth)
	return p
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestMTLS chains two proxies: client → A (plaintext) → B (TLS listener that
// requires a client certificate) → simserver. A reaches B with upstream
// TLS and a client certificate; a client without a certificate cannot reach
// B directly.
func TestMTLS(t *testing.T) {
	p := newPKI(t)
	sim := startSim(t)
	b := startProxy(t, sim.grpc, "--tls-cert", p.srvCert, "--tls-key", p.srvKey, "--tls-client-ca", p.caFile)
	a := startProxy(t, b.grpc, "--upstream-ca", p.caFile, "--upstream-cert", p.cliCert, "--upstream-key", p.cliKey)

	ctx := testCtx(t)
	resp, err := kservepb.NewGRPCInferenceServiceClient(dial(t, a.grpc)).ModelInfer(ctx, simpleRequest("tls"))
	if err != nil {
		t.Fatalf("through A and B: %v\nA:\n%s\nB:\n%s", err, a.log, b.log)
	}
	if resp.Id != "tls" {
		t.Fatalf("id %q", resp.Id)
	}
	// B's relay ended TLS and forwarded the call itself: the front
	// door's limits hold on a TLS listener too.
	if n := counterSum(scrape(t, b.admin), "infergate_fast_path_calls_total", map[string]string{"path": "forwarded"}); n < 1 {
		t.Fatalf("B's fast path forwarded %v calls, want some", n)
	}

	pool := x509.NewCertPool()
	caPEM, _ := os.ReadFile(p.caFile)
	pool.AppendCertsFromPEM(caPEM)
	noCert := credentials.NewTLS(&tls.Config{RootCAs: pool})
	cc := dial(t, b.grpc, grpc.WithTransportCredentials(noCert))
	if _, err := kservepb.NewGRPCInferenceServiceClient(cc).ModelInfer(ctx, simpleRequest("nocert")); err == nil {
		t.Fatal("a client without a certificate reached the mTLS listener")
	}
}

// TestTLSPool: a pool of two TLS upstreams (two infergate TLS listeners,
// each in front of its simserver) behind upstream TLS: each endpoint is
// dialled and verified on its own, and both take calls.
func TestTLSPool(t *testing.T) {
	p := newPKI(t)
	var bs []*proc
	for range 2 {
		sim := startSim(t)
		bs = append(bs, startProxy(t, sim.grpc, "--tls-cert", p.srvCert, "--tls-key", p.srvKey, "--tls-client-ca", p.caFile))
	}
	a := startProxy(t, bs[0].grpc+","+bs[1].grpc, "--upstream-ca", p.caFile, "--upstream-cert", p.cliCert, "--upstream-key", p.cliKey)
	kc := kservepb.NewGRPCInferenceServiceClient(dial(t, a.grpc))
	for i := range 40 {
		if _, err := kc.ModelInfer(testCtx(t), simpleRequest(fmt.Sprint("tls-", i))); err != nil {
			t.Fatalf("call %d through the TLS pool: %v\nA:\n%s", i, err, a.log)
		}
	}
	eps := endpointDocs(t, a.admin)
	for _, b := range bs {
		if e := eps[b.grpc]; e.Calls == 0 || e.Failed > 0 {
			t.Errorf("TLS endpoint %s: %+v, want calls and no failure", b.grpc, e)
		}
	}
}
