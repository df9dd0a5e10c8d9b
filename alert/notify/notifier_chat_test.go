package notify

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// capture is a server that records the last body and answers with answer.
func capture(t *testing.T, answer string) (*httptest.Server, *[]byte) {
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var err error
		if body, err = io.ReadAll(r.Body); err != nil {
			t.Error(err)
		}
		if ct := r.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type %q", ct)
		}
		io.WriteString(w, answer)
	}))
	t.Cleanup(srv.Close)
	return srv, &body
}

func TestSlackNotify(t *testing.T) {
	srv, body := capture(t, "ok")
	n := &slackNotifier{cfg: SlackConfig{URL: srv.URL, Channel: "#alerts", Username: "infergate", Timeout: 5 * time.Second}, client: srv.Client()}
	if _, err := n.Notify(context.Background(), testMessage()); err != nil {
		t.Fatal(err)
	}
	var got map[string]string
	if err := json.Unmarshal(*body, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		// Slack reserves &, < and >: "->" must arrive escaped.
		"text":     strings.ReplaceAll(Text(testMessage()), "->", "-&gt;"),
		"channel":  "#alerts",
		"username": "infergate",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("body\n%v\nwant\n%v", got, want)
	}

	// Optional fields are left out.
	n.cfg.Channel, n.cfg.Username = "", ""
	if _, err := n.Notify(context.Background(), testMessage()); err != nil {
		t.Fatal(err)
	}
	got = nil
	json.Unmarshal(*body, &got)
	if _, ok := got["channel"]; ok || len(got) != 1 {
		t.Errorf("body %v, want only text", got)
	}
}

func TestWeComNotify(t *testing.T) {
	srv, body := capture(t, `{"errcode":0,"errmsg":"ok"}`)
	n := &wecomNotifier{cfg: WeComConfig{URL: srv.URL + "/cgi-bin/webhook/send?key=k", Timeout: 5 * time.Second}, client: srv.Client()}
	if _, err := n.Notify(context.Background(), testMessage()); err != nil {
		t.Fatal(err)
	}
	var got struct {
		MsgType  string `json:"msgtype"`
		Markdown struct {
			Content string `json:"content"`
		} `json:"markdown"`
	}
	if err := json.Unmarshal(*body, &got); err != nil {
		t.Fatal(err)
	}
	text := Text(testMessage())
	title, rest, _ := strings.Cut(text, "\n")
	wantContent := `<font color="warning">**` + title + "**</font>\n" + rest
	if got.MsgType != "markdown" || got.Markdown.Content != wantContent {
		t.Errorf("got %s %q\nwant markdown %q", got.MsgType, got.Markdown.Content, wantContent)
	}

	// Mentions need a text message.
	n.cfg.MentionedMobileList = []string{"13800000000", "@all"}
	if _, err := n.Notify(context.Background(), testMessage()); err != nil {
		t.Fatal(err)
	}
	var gotText struct {
		MsgType string `json:"msgtype"`
		Text    struct {
			Content             string   `json:"content"`
			MentionedMobileList []string `json:"mentioned_mobile_list"`
		} `json:"text"`
	}
	if err := json.Unmarshal(*body, &gotText); err != nil {
		t.Fatal(err)
	}
	if gotText.MsgType != "text" || gotText.Text.Content != text || !reflect.DeepEqual(gotText.Text.MentionedMobileList, n.cfg.MentionedMobileList) {
		t.Errorf("with mentions got %+v", gotText)
	}
}

func TestWeComErrcode(t *testing.T) {
	for _, tc := range []struct {
		name      string
		answer    string
		ok        bool
		retryable bool
	}{
		{"ok", `{"errcode":0,"errmsg":"ok"}`, true, false},
		{"rate limit", `{"errcode":45009,"errmsg":"api freq out of limit"}`, false, true},
		{"busy", `{"errcode":-1,"errmsg":"system busy"}`, false, true},
		{"invalid webhook url", `{"errcode":93000,"errmsg":"invalid webhook url"}`, false, false},
		{"not json", `<html>hello</html>`, false, false},
		{"no errcode", `{}`, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := capture(t, tc.answer)
			n := &wecomNotifier{cfg: WeComConfig{URL: srv.URL, Timeout: 5 * time.Second}, client: srv.Client()}
			retryable, err := n.Notify(context.Background(), testMessage())
			if (err == nil) != tc.ok || retryable != tc.retryable {
				t.Errorf("Notify = %v, retryable %v; want ok %v, retryable %v", err, retryable, tc.ok, tc.retryable)
			}
		})
	}
}

// TestWeComTruncates: a group too large for one robot message is cut at
// 4096 bytes on a rune boundary.
func TestWeComTruncates(t *testing.T) {
	m := testMessage()
	for i := range 200 {
		m.Alerts = append(m.Alerts, Alert{Name: "延迟过高", Status: StatusFiring, Severity: "critical",
			Labels: map[string]string{"model": "模型" + strings.Repeat("x", i%7)}, Evidence: "p99 812ms 😀"})
	}
	content := wecomMarkdown(m)
	if len(content) > 4096 || !utf8.ValidString(content) || !strings.HasSuffix(content, "…") {
		t.Errorf("content is %d bytes, valid UTF-8 %v, ends %q", len(content), utf8.ValidString(content), content[len(content)-10:])
	}
	if len(content) < 4096-200 {
		t.Errorf("content cut to %d bytes, far below the limit", len(content))
	}
	if !strings.HasPrefix(content, `<font color="warning">**[FIRING:201] resnet50**</font>`) {
		t.Errorf("content starts %q", content[:60])
	}
}
