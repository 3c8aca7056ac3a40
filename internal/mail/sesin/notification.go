package sesin

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Notification is the part of SES's "Received" notification the consumer uses
// (https://docs.aws.amazon.com/ses/latest/dg/receiving-email-notifications-contents.html).
type Notification struct {
	Type    string  `json:"notificationType"`
	Receipt Receipt `json:"receipt"`
	Mail    Mail    `json:"mail"`
}

// Receipt is SES's record of accepting the message: when, for whom, its verdicts, where it
// stored the message.
type Receipt struct {
	Timestamp    time.Time `json:"timestamp"`
	Recipients   []string  `json:"recipients"`
	SpamVerdict  Verdict   `json:"spamVerdict"`
	VirusVerdict Verdict   `json:"virusVerdict"`
	SPFVerdict   Verdict   `json:"spfVerdict"`
	DKIMVerdict  Verdict   `json:"dkimVerdict"`
	DMARCVerdict Verdict   `json:"dmarcVerdict"`
	Action       Action    `json:"action"`
}

// Verdict is PASS, FAIL, GRAY or PROCESSING_FAILED (DISABLED when scanning is off).
type Verdict struct {
	Status string `json:"status"`
}

// Failed reports a FAIL verdict.
func (v Verdict) Failed() bool { return strings.EqualFold(v.Status, "FAIL") }

// Action says where the S3 action stored the raw message.
type Action struct {
	Type       string `json:"type"`
	BucketName string `json:"bucketName"`
	ObjectKey  string `json:"objectKey"`
}

// Mail is SES's view of the message: the envelope sender and SES's id for it.
type Mail struct {
	Timestamp time.Time `json:"timestamp"`
	Source    string    `json:"source"`
	MessageID string    `json:"messageId"`
}

// snsEnvelope is what SNS delivers to SQS without raw message delivery.
type snsEnvelope struct {
	Type    string `json:"Type"`
	Message string `json:"Message"`
}

// errUnreadable marks an SQS message that is not a usable notification.
var errUnreadable = errors.New("not an SES receipt notification")

// ParseNotification reads an SQS message body: an SNS envelope around the notification, or the
// notification itself (raw message delivery).
func ParseNotification(body string) (Notification, error) {
	var env snsEnvelope
	if err := json.Unmarshal([]byte(body), &env); err == nil && env.Type == "Notification" && env.Message != "" {
		body = env.Message
	}
	var n Notification
	if err := json.Unmarshal([]byte(body), &n); err != nil {
		return n, fmt.Errorf("%w: %v", errUnreadable, err)
	}
	switch {
	case n.Type != "Received":
		return n, fmt.Errorf("%w: notificationType %q", errUnreadable, n.Type)
	case n.Receipt.Action.Type != "S3" || n.Receipt.Action.BucketName == "" || n.Receipt.Action.ObjectKey == "":
		return n, fmt.Errorf("%w: the receipt rule's action must be S3 (got %q)", errUnreadable, n.Receipt.Action.Type)
	case n.Receipt.Timestamp.IsZero():
		return n, fmt.Errorf("%w: no receipt timestamp", errUnreadable)
	}
	return n, nil
}
