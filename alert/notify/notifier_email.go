package notify

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/smtp"
	"net/textproto"
	"os"
	"strings"
	"time"
)

// emailNotifier sends plain-text mail through an SMTP smarthost.
type emailNotifier struct {
	cfg EmailConfig
	now func() time.Time
	// tlsConfig, when set, replaces the default TLS settings (tests trust
	// their own certificate with it).
	tlsConfig *tls.Config
}

// permanentError marks a failure that retrying cannot fix.
type permanentError struct{ error }

func (e permanentError) Unwrap() error { return e.error }

func permanent(format string, args ...any) error {
	return permanentError{fmt.Errorf(format, args...)}
}

// Notify sends the message once. SMTP 4xx replies and network errors are
// retryable, 5xx replies and configuration problems are not.
func (n *emailNotifier) Notify(ctx context.Context, m *Message) (bool, error) {
	err := n.send(ctx, m)
	if err == nil {
		return false, nil
	}
	err = fmt.Errorf("email: %w", err)
	if tp, ok := errors.AsType[*textproto.Error](err); ok {
		return tp.Code/100 == 4, err
	}
	if _, ok := errors.AsType[permanentError](err); ok {
		return false, err
	}
	return transportRetryable(err), err
}

func (n *emailNotifier) send(ctx context.Context, m *Message) error {
	host, port, err := net.SplitHostPort(n.cfg.Smarthost)
	if err != nil {
		return permanent("smarthost: %w", err)
	}
	from, err := mail.ParseAddress(n.cfg.From)
	if err != nil {
		return permanent("from: %w", err)
	}
	to := make([]*mail.Address, len(n.cfg.To))
	for i, s := range n.cfg.To {
		if to[i], err = mail.ParseAddress(s); err != nil {
			return permanent("to: %w", err)
		}
	}
	var password string
	if n.cfg.AuthUsername != "" {
		b, err := os.ReadFile(n.cfg.AuthPasswordFile)
		if err != nil {
			return permanent("auth_password_file: %w", err)
		}
		password = strings.TrimRight(string(b), "\r\n")
	}
	msg := n.message(m, from, to)

	ctx, cancel := context.WithTimeout(ctx, n.cfg.Timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", n.cfg.Smarthost)
	if err != nil {
		return err
	}
	// net/smtp knows no contexts: a deadline bounds every read and
	// write, and cancellation (Close giving up) closes the connection.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	tlsConfig := n.tls(host)
	if port == "465" {
		// SMTPS: TLS from the first byte.
		conn = tls.Client(conn, tlsConfig)
	}
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Hello(helloName(from)); err != nil {
		return err
	}
	if _, isTLS := c.TLSConnectionState(); !isTLS {
		if ok, _ := c.Extension("STARTTLS"); ok {
			if err := c.StartTLS(tlsConfig); err != nil {
				return fmt.Errorf("starttls: %w", err)
			}
		} else if n.cfg.RequireTLS {
			return permanent("require_tls: %s does not offer STARTTLS", n.cfg.Smarthost)
		}
	}
	if n.cfg.AuthUsername != "" {
		if ok, _ := c.Extension("AUTH"); !ok {
			return permanent("auth_username: %s does not offer AUTH", n.cfg.Smarthost)
		}
		// PlainAuth refuses to send the password in clear text to
		// anything but localhost.
		if err := c.Auth(smtp.PlainAuth("", n.cfg.AuthUsername, password, host)); err != nil {
			return fmt.Errorf("auth: %w", err)
		}
	}
	if err := c.Mail(from.Address); err != nil {
		return fmt.Errorf("mail from: %w", err)
	}
	for _, a := range to {
		if err := c.Rcpt(a.Address); err != nil {
			return fmt.Errorf("rcpt to %s: %w", a.Address, err)
		}
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("data: %w", err)
	}
	if _, err := w.Write(msg); err != nil {
		return fmt.Errorf("data: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("data: %w", err)
	}
	// The message is accepted; a failing QUIT changes nothing.
	_ = c.Quit()
	return nil
}

// tls returns the TLS settings for the smarthost.
func (n *emailNotifier) tls(host string) *tls.Config {
	if n.tlsConfig != nil {
		return n.tlsConfig.Clone()
	}
	return &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
}

// helloName is the name given in EHLO: the local host name when it looks
// like one, else the sender's domain. Some servers reject "localhost".
func helloName(from *mail.Address) string {
	if h, err := os.Hostname(); err == nil && strings.Contains(h, ".") {
		return h
	}
	if _, domain, ok := strings.Cut(from.Address, "@"); ok && domain != "" {
		return domain
	}
	return "localhost"
}

// message renders the RFC 5322 message: headers (the config's override
// the defaults), then Text(m) as quoted-printable UTF-8, which keeps lines
// short and non-ASCII safe through any relay.
func (n *emailNotifier) message(m *Message, from *mail.Address, to []*mail.Address) []byte {
	now := n.now()
	tos := make([]string, len(to))
	for i, a := range to {
		tos[i] = a.String()
	}
	h := map[string]string{
		"From":                      from.String(),
		"To":                        strings.Join(tos, ", "),
		"Subject":                   mime.QEncoding.Encode("utf-8", Title(m)),
		"Date":                      now.Format(time.RFC1123Z),
		"Message-Id":                messageID(now, from),
		"Mime-Version":              "1.0",
		"Content-Type":              "text/plain; charset=UTF-8",
		"Content-Transfer-Encoding": "quoted-printable",
	}
	for k, v := range n.cfg.Headers {
		k = textproto.CanonicalMIMEHeaderKey(k)
		if k == "Subject" {
			v = mime.QEncoding.Encode("utf-8", v)
		}
		h[k] = v
	}
	var b bytes.Buffer
	for _, k := range sortedKeys(h) {
		fmt.Fprintf(&b, "%s: %s\r\n", k, oneLine(h[k]))
	}
	b.WriteString("\r\n")
	qp := quotedprintable.NewWriter(&b)
	io.WriteString(qp, strings.ReplaceAll(Text(m), "\n", "\r\n"))
	qp.Close()
	b.WriteString("\r\n")
	return b.Bytes()
}

// messageID returns a unique Message-Id in the sender's domain.
func messageID(now time.Time, from *mail.Address) string {
	var r [8]byte
	rand.Read(r[:])
	_, domain, _ := strings.Cut(from.Address, "@")
	if domain == "" {
		domain = "infergate"
	}
	return fmt.Sprintf("<%d.%s@%s>", now.UnixNano(), hex.EncodeToString(r[:]), domain)
}
