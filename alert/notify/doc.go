// Package notify sends alert notifications to receivers: generic webhooks
// (Alertmanager's webhook format), Alertmanager's API v2, Slack-compatible
// webhooks, WeCom group robots, e-mail over SMTP and the process log.
//
// The alert engine hands a [Message] (one flush of one alert group) to a
// [Receiver] built from a [ReceiverConfig] by [Build]. A Receiver fans the
// message out to one [Sender] per configured integration. Sending never
// blocks the engine: each Sender owns a bounded FIFO queue and one worker
// goroutine that delivers messages in order, retrying retryable failures
// with exponential backoff until they succeed or grow older than the
// maximum age. Messages therefore queue up through a receiver outage and
// are all delivered once it comes back; when the queue is full the oldest
// message is dropped, because the newest one describes the current state.
//
// # Metrics
//
// [NewMetrics] registers, on the given registerer:
//
//   - infergate_alert_notifications_total{receiver,integration,outcome}:
//     messages by final outcome, success or failure (dropped for any
//     reason); every message is counted once.
//   - infergate_alert_notification_attempts_total{receiver,integration,outcome}:
//     delivery attempts, success or error.
//   - infergate_alert_notifications_dropped_total{receiver,integration,reason}:
//     messages given up, by reason: queue_full, expired, not_retryable,
//     closed.
//   - infergate_alert_notification_queue_length{receiver,integration}:
//     messages waiting in a Sender's queue (not counting the one being
//     sent).
//
// The integration label is the kind (webhook, alertmanager, slack, wecom,
// email, log), followed by /index only when a receiver configures more
// than one integration of that kind, e.g. webhook/1.
package notify
