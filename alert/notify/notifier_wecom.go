package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// WeCom's limits on a robot message's content, in bytes.
const (
	wecomMarkdownMax = 4096
	wecomTextMax     = 2048
)

// WeCom error codes that may pass: -1 "system busy" and 45009 "API
// freq out of limit" (a robot takes 20 messages a minute).
const (
	wecomBusy      = -1
	wecomRateLimit = 45009
)

// wecomNotifier posts to a WeCom group robot.
type wecomNotifier struct {
	cfg    WeComConfig
	client *http.Client
}

type wecomContent struct {
	Content             string   `json:"content"`
	MentionedMobileList []string `json:"mentioned_mobile_list,omitempty"`
}

type wecomPayload struct {
	MsgType  string        `json:"msgtype"`
	Markdown *wecomContent `json:"markdown,omitempty"`
	Text     *wecomContent `json:"text,omitempty"`
}

type wecomResponse struct {
	ErrCode *int   `json:"errcode"`
	ErrMsg  string `json:"errmsg"`
}

// body is the JSON body posted for m: markdown with a coloured title, or
// plain text when phones are to be mentioned, which WeCom supports only
// in text messages.
func (n *wecomNotifier) body(m *Message) []byte {
	var p wecomPayload
	if len(n.cfg.MentionedMobileList) > 0 {
		p.MsgType = "text"
		p.Text = &wecomContent{
			Content:             truncate(Text(m), wecomTextMax),
			MentionedMobileList: n.cfg.MentionedMobileList,
		}
	} else {
		p.MsgType = "markdown"
		p.Markdown = &wecomContent{Content: wecomMarkdown(m)}
	}
	b, err := json.Marshal(p)
	if err != nil {
		panic(err) // only strings: cannot fail
	}
	return b
}

// wecomMarkdown is Text with the title in bold, orange while firing and
// green once resolved (WeCom's "warning" and "info" colours), cut to
// WeCom's limit.
func wecomMarkdown(m *Message) string {
	text := Text(m)
	title, rest, _ := strings.Cut(text, "\n")
	color := "warning"
	if strings.HasPrefix(title, "[RESOLVED") {
		color = "info"
	}
	s := `<font color="` + color + `">**` + title + "**</font>"
	if rest != "" {
		s += "\n" + rest
	}
	return truncate(s, wecomMarkdownMax)
}

// Notify posts the message once. WeCom answers 200 even to failures, with
// the verdict in errcode.
func (n *wecomNotifier) Notify(ctx context.Context, m *Message) (bool, error) {
	resp, retryable, err := postJSON(ctx, n.client, n.cfg.URL, n.cfg.Timeout, nil, n.body(m))
	if err != nil {
		return retryable, fmt.Errorf("wecom: %w", err)
	}
	var r wecomResponse
	if err := json.Unmarshal(resp, &r); err != nil || r.ErrCode == nil {
		// Not WeCom's answer: most likely a wrong URL, which retrying
		// will not fix.
		return false, fmt.Errorf("wecom: unexpected answer: %s", snippet(resp))
	}
	if *r.ErrCode != 0 {
		code := *r.ErrCode
		return code == wecomRateLimit || code == wecomBusy, fmt.Errorf("wecom: errcode %d: %s", code, r.ErrMsg)
	}
	return false, nil
}
