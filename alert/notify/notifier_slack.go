package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// slackNotifier posts plain text to a Slack-compatible incoming webhook.
type slackNotifier struct {
	cfg    SlackConfig
	client *http.Client
}

type slackPayload struct {
	Text     string `json:"text"`
	Channel  string `json:"channel,omitempty"`
	Username string `json:"username,omitempty"`
}

// slackEscape escapes the three characters Slack's mrkdwn reserves for
// links and mentions; "resnet50 -> resnet18" must not become markup.
var slackEscape = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// slackBody is the JSON body posted for m.
func (n *slackNotifier) body(m *Message) []byte {
	b, err := json.Marshal(slackPayload{
		Text:     slackEscape.Replace(Text(m)),
		Channel:  n.cfg.Channel,
		Username: n.cfg.Username,
	})
	if err != nil {
		panic(err) // only strings: cannot fail
	}
	return b
}

// Notify posts the message once.
func (n *slackNotifier) Notify(ctx context.Context, m *Message) (bool, error) {
	_, retryable, err := postJSON(ctx, n.client, n.cfg.URL, n.cfg.Timeout, nil, n.body(m))
	if err != nil {
		return retryable, fmt.Errorf("slack: %w", err)
	}
	return false, nil
}
