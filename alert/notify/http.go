package notify

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// userAgent identifies infergate to receivers.
const userAgent = "infergate-alert-notify"

// maxErrorBody is how much of a failed response's body goes into the
// error: enough for an error message, not a whole HTML page.
const maxErrorBody = 512

// postJSON posts body to target within timeout and returns the response body
// of a 2xx answer. Failures are retryable when the cause may pass: network
// errors, timeouts, 5xx and 429. 4xx answers and TLS verification errors
// are not: sending the same request again cannot fix them.
func postJSON(ctx context.Context, client *http.Client, target string, timeout time.Duration, header http.Header, body []byte) (respBody []byte, retryable bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return nil, false, err
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent)
	resp, err := client.Do(req)
	if err != nil {
		return nil, transportRetryable(err), redactURL(err)
	}
	defer resp.Body.Close()
	// Read it all (bounded) so the connection can be reused.
	respBody, readErr := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		retryable := resp.StatusCode/100 == 5 || resp.StatusCode == http.StatusTooManyRequests
		return nil, retryable, fmt.Errorf("%s: %s", resp.Status, snippet(respBody))
	}
	if readErr != nil {
		return nil, true, fmt.Errorf("reading response: %w", readErr)
	}
	return respBody, false, nil
}

// transportRetryable reports whether a failure to talk to a server may
// pass: everything but certificate problems, which need a config change.
func transportRetryable(err error) bool {
	var (
		verify    *tls.CertificateVerificationError
		unknown   x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		recordHdr tls.RecordHeaderError
	)
	switch {
	case errors.As(err, &verify), errors.As(err, &unknown), errors.As(err, &hostname),
		errors.As(err, &invalid), errors.As(err, &recordHdr):
		return false
	}
	return true
}

// redactURL drops the URL from a client error: webhook URLs often carry
// their secret (Slack's path, WeCom's key), and errors end up in logs.
func redactURL(err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

// snippet is the start of a response body, on one line, for an error.
func snippet(b []byte) string {
	s := oneLine(strings.TrimSpace(string(b)))
	return truncate(s, maxErrorBody)
}
