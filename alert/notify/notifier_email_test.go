package notify

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"io"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/http/httptest"
	"net/mail"
	"net/textproto"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// smtpServer is a tiny SMTP server: EHLO, optionally STARTTLS and AUTH
// PLAIN, MAIL, RCPT, DATA, QUIT.
type smtpServer struct {
	ln       net.Listener
	tls      *tls.Config // offer STARTTLS when set
	auth     bool        // offer AUTH PLAIN
	rcptCode int         // reply to RCPT, default 250
	wg       sync.WaitGroup

	mu   sync.Mutex
	mail []smtpMail
}

type smtpMail struct {
	from  string
	to    []string
	auth  string // decoded PLAIN credentials, "\x00user\x00pass"
	tls   bool
	data  []byte
	hello string
}

func startSMTP(t *testing.T, s *smtpServer) *smtpServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.ln = ln
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Go(func() { s.serve(c) })
		}
	})
	t.Cleanup(func() { ln.Close(); s.wg.Wait() })
	return s
}

func (s *smtpServer) addr() string { return s.ln.Addr().String() }

func (s *smtpServer) got() []smtpMail {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]smtpMail(nil), s.mail...)
}

func (s *smtpServer) serve(c net.Conn) {
	defer func() { c.Close() }()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	tp := textproto.NewConn(c)
	var cur smtpMail
	tp.PrintfLine("220 test ESMTP")
	for {
		line, err := tp.ReadLine()
		if err != nil {
			return
		}
		verb, arg, _ := strings.Cut(line, " ")
		switch strings.ToUpper(verb) {
		case "EHLO", "HELO":
			cur.hello = arg
			ext := []string{"250-test", "250-8BITMIME"}
			if s.tls != nil && !cur.tls {
				ext = append(ext, "250-STARTTLS")
			}
			if s.auth {
				ext = append(ext, "250-AUTH PLAIN")
			}
			ext = append(ext, "250 SIZE 1000000")
			tp.PrintfLine("%s", strings.Join(ext, "\r\n"))
		case "STARTTLS":
			tp.PrintfLine("220 go ahead")
			tc := tls.Server(c, s.tls)
			if err := tc.Handshake(); err != nil {
				return
			}
			c, cur.tls = tc, true
			tp = textproto.NewConn(c)
		case "AUTH":
			mech, resp, _ := strings.Cut(arg, " ")
			b, err := base64.StdEncoding.DecodeString(resp)
			if mech != "PLAIN" || err != nil {
				tp.PrintfLine("504 unsupported")
				continue
			}
			cur.auth = string(b)
			tp.PrintfLine("235 2.7.0 accepted")
		case "MAIL":
			cur.from = arg
			tp.PrintfLine("250 ok")
		case "RCPT":
			if s.rcptCode != 0 {
				tp.PrintfLine("%d no such user", s.rcptCode)
				continue
			}
			cur.to = append(cur.to, arg)
			tp.PrintfLine("250 ok")
		case "DATA":
			tp.PrintfLine("354 go on")
			data, err := tp.ReadDotBytes()
			if err != nil {
				return
			}
			cur.data = data
			s.mu.Lock()
			s.mail = append(s.mail, cur)
			s.mu.Unlock()
			tp.PrintfLine("250 queued")
		case "QUIT":
			tp.PrintfLine("221 bye")
			return
		case "RSET", "NOOP":
			tp.PrintfLine("250 ok")
		default:
			tp.PrintfLine("502 unknown")
		}
	}
}

func emailConfig(smarthost string) EmailConfig {
	return EmailConfig{
		To:        []string{"ops@example.com", "Second <ml@example.com>"},
		From:      "Infergate <alerts@example.com>",
		Smarthost: smarthost,
		Timeout:   5 * time.Second,
		Headers:   map[string]string{"reply-to": "noc@example.com"},
	}
}

func TestEmailNotify(t *testing.T) {
	srv := startSMTP(t, &smtpServer{})
	n := &emailNotifier{cfg: emailConfig(srv.addr()), now: func() time.Time { return t0 }}
	if retryable, err := n.Notify(context.Background(), testMessage()); err != nil {
		t.Fatalf("Notify = %v (retryable %v)", err, retryable)
	}
	got := srv.got()
	if len(got) != 1 {
		t.Fatalf("server got %d messages, want 1", len(got))
	}
	g := got[0]
	if !strings.HasPrefix(g.from, "FROM:<alerts@example.com>") {
		t.Errorf("MAIL %q", g.from)
	}
	if want := []string{"TO:<ops@example.com>", "TO:<ml@example.com>"}; strings.Join(g.to, ",") != strings.Join(want, ",") {
		t.Errorf("RCPT %q, want %q", g.to, want)
	}
	msg, err := mail.ReadMessage(strings.NewReader(string(g.data)))
	if err != nil {
		t.Fatal(err)
	}
	subject, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"From":                      `"Infergate" <alerts@example.com>`,
		"To":                        `<ops@example.com>, "Second" <ml@example.com>`,
		"Date":                      "Sun, 01 Mar 2026 12:00:00 +0000",
		"Content-Type":              "text/plain; charset=UTF-8",
		"Content-Transfer-Encoding": "quoted-printable",
		"Reply-To":                  "noc@example.com",
	} {
		if got := msg.Header.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	if want := "[FIRING:1] resnet50"; subject != want {
		t.Errorf("Subject %q, want %q", subject, want)
	}
	if id := msg.Header.Get("Message-Id"); !regexp.MustCompile(`^<\d+\.[0-9a-f]{16}@example\.com>$`).MatchString(id) {
		t.Errorf("Message-Id %q", id)
	}
	body, err := io.ReadAll(quotedprintable.NewReader(msg.Body))
	if err != nil {
		t.Fatal(err)
	}
	// The quoted-printable reader turns the CRLFs back into LFs.
	if got, want := strings.TrimRight(string(body), "\r\n"), Text(testMessage()); got != want {
		t.Errorf("body\n%q\nwant\n%q", got, want)
	}
}

// TestEmailSubjectNonASCII: a subject outside ASCII is encoded, not sent
// raw.
func TestEmailSubjectNonASCII(t *testing.T) {
	srv := startSMTP(t, &smtpServer{})
	n := &emailNotifier{cfg: emailConfig(srv.addr()), now: time.Now}
	m := testMessage()
	m.GroupLabels = map[string]string{"model": "模型"}
	if _, err := n.Notify(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	msg, err := mail.ReadMessage(strings.NewReader(string(srv.got()[0].data)))
	if err != nil {
		t.Fatal(err)
	}
	raw := msg.Header.Get("Subject")
	subject, _ := new(mime.WordDecoder).DecodeHeader(raw)
	if !strings.HasPrefix(raw, "=?utf-8?q?") || subject != "[FIRING:1] 模型" {
		t.Errorf("Subject %q decodes to %q", raw, subject)
	}
}

// TestEmailStartTLSAuth: STARTTLS is used when offered, then AUTH PLAIN
// with the password from the file.
func TestEmailStartTLSAuth(t *testing.T) {
	// Borrow httptest's certificate for 127.0.0.1.
	hs := httptest.NewTLSServer(nil)
	defer hs.Close()
	roots := x509.NewCertPool()
	roots.AddCert(hs.Certificate())
	srv := startSMTP(t, &smtpServer{tls: &tls.Config{Certificates: hs.TLS.Certificates}, auth: true})

	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := emailConfig(srv.addr())
	cfg.AuthUsername, cfg.AuthPasswordFile, cfg.RequireTLS = "alerts", pwFile, true
	n := &emailNotifier{cfg: cfg, now: time.Now, tlsConfig: &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}}
	if retryable, err := n.Notify(context.Background(), testMessage()); err != nil {
		t.Fatalf("Notify = %v (retryable %v)", err, retryable)
	}
	got := srv.got()
	if len(got) != 1 || !got[0].tls || got[0].auth != "\x00alerts\x00hunter2" {
		t.Fatalf("server got %+v; want one message over TLS with PLAIN alerts/hunter2", got)
	}

	// An untrusted certificate is a configuration error.
	n.tlsConfig = &tls.Config{ServerName: "127.0.0.1"}
	if retryable, err := n.Notify(context.Background(), testMessage()); err == nil || retryable {
		t.Errorf("untrusted certificate: Notify = %v, retryable %v; want a permanent error", err, retryable)
	}
}

func TestEmailFailures(t *testing.T) {
	refused, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedAddr := refused.Addr().String()
	refused.Close()
	for _, tc := range []struct {
		name      string
		srv       *smtpServer // nil: connection refused
		edit      func(*EmailConfig)
		retryable bool
		errPart   string
	}{
		{"rcpt 550", &smtpServer{rcptCode: 550}, nil, false, "550"},
		{"rcpt 451", &smtpServer{rcptCode: 451}, nil, true, "451"},
		{"connection refused", nil, nil, true, "refused"},
		{"require_tls without STARTTLS", &smtpServer{}, func(c *EmailConfig) { c.RequireTLS = true }, false, "STARTTLS"},
		{"auth not offered", &smtpServer{}, func(c *EmailConfig) { c.AuthUsername, c.AuthPasswordFile = "u", os.DevNull }, false, "AUTH"},
		{"password file missing", &smtpServer{auth: true}, func(c *EmailConfig) { c.AuthUsername, c.AuthPasswordFile = "u", "/nonexistent/pw" }, false, "auth_password_file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := refusedAddr
			if tc.srv != nil {
				addr = startSMTP(t, tc.srv).addr()
			}
			cfg := emailConfig(addr)
			if tc.edit != nil {
				tc.edit(&cfg)
			}
			n := &emailNotifier{cfg: cfg, now: time.Now}
			retryable, err := n.Notify(context.Background(), testMessage())
			if err == nil || retryable != tc.retryable || !strings.Contains(err.Error(), tc.errPart) {
				t.Errorf("Notify = %v, retryable %v; want an error with %q, retryable %v", err, retryable, tc.errPart, tc.retryable)
			}
			if tc.srv != nil && len(tc.srv.got()) != 0 {
				t.Errorf("a message was accepted")
			}
		})
	}
}

// TestEmailCancel: cancelling the context (Close giving up) aborts a
// session stuck on a silent server.
func TestEmailCancel(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer ln.Close()
	accepted := make(chan struct{})
	wg.Go(func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		close(accepted)
		bufio.NewReader(c).ReadString('\n') // never greets; returns when the client hangs up
	})
	ctx, cancel := context.WithCancel(context.Background())
	n := &emailNotifier{cfg: emailConfig(ln.Addr().String()), now: time.Now}
	n.cfg.Timeout = time.Minute
	done := make(chan error, 1)
	go func() { _, err := n.Notify(ctx, testMessage()); done <- err }()
	<-accepted // the client now waits for the greeting
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Error("Notify succeeded")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Notify did not return after cancel")
	}
}
