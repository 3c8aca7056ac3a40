package awsq

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	stypes "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/webordinary/webordinary/internal/broker"

	"github.com/webordinary/webordinary/internal/awserr"
)

// envelope is a message body: the payload itself, or a reference to it in S3 (a claim check)
// when it is larger than MaxPayload.
type envelope struct {
	ID   string          `json:"id"`
	Body json.RawMessage `json:"body,omitempty"`
	S3   string          `json:"s3,omitempty"`
}

// wrap returns the message body for v: inline, or stored under key in S3.
func (a *adapter) wrap(ctx context.Context, id, key string, v any) (string, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	if len(body) > a.cfg.MaxMessage {
		return "", fmt.Errorf("%w: %s with its attachments is %d MB; the engine accepts %d MB (send smaller attachments)",
			broker.ErrTooLarge, id, len(body)>>20, a.cfg.MaxMessage>>20)
	}
	env := envelope{ID: id, Body: body}
	if len(body) > a.cfg.MaxPayload {
		if err := a.putObject(ctx, key, body); err != nil {
			return "", err
		}
		env = envelope{ID: id, S3: key}
	}
	out, err := json.Marshal(env)
	return string(out), err
}

// unwrap decodes a message body into v, fetching it from S3 when it is a reference.
// errPayloadGone when the referenced object no longer exists.
func (a *adapter) unwrap(ctx context.Context, msg string, v any) (envelope, error) {
	var env envelope
	if err := json.Unmarshal([]byte(msg), &env); err != nil {
		return env, fmt.Errorf("awsq: undecodable message: %w", err)
	}
	body := []byte(env.Body)
	if env.S3 != "" {
		b, err := a.getObject(ctx, env.S3)
		if err != nil {
			return env, err
		}
		body = b
	}
	if err := json.Unmarshal(body, v); err != nil {
		return env, fmt.Errorf("awsq: undecodable payload of %s: %w", env.ID, err)
	}
	return env, nil
}

// errPayloadGone: a message's S3 payload was deleted (its message was acknowledged before).
var errPayloadGone = errors.New("awsq: payload no longer in S3")

func (a *adapter) putObject(ctx context.Context, key string, body []byte) error {
	_, err := a.s3.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(a.cfg.Bucket), Key: aws.String(key), Body: bytes.NewReader(body),
		ContentType: aws.String("application/json"),
	})
	if err != nil {
		return fmt.Errorf("awsq: store payload %s: %w", key, ctxErr(ctx, err))
	}
	return nil
}

func (a *adapter) getObject(ctx context.Context, key string) ([]byte, error) {
	out, err := a.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(a.cfg.Bucket), Key: aws.String(key)})
	var nsk *stypes.NoSuchKey
	if errors.As(err, &nsk) || awserr.HasCode(err, "NoSuchKey", "NotFound") {
		return nil, errPayloadGone
	}
	if err != nil {
		return nil, fmt.Errorf("awsq: fetch payload %s: %w", key, ctxErr(ctx, err))
	}
	defer out.Body.Close()
	return io.ReadAll(out.Body)
}

// deleteObject removes a payload; a missing one is fine.
func (a *adapter) deleteObject(ctx context.Context, key string) error {
	_, err := a.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(a.cfg.Bucket), Key: aws.String(key)})
	if err != nil && !awserr.HasCode(err, "NoSuchKey", "NotFound") {
		return fmt.Errorf("awsq: delete payload %s: %w", key, ctxErr(ctx, err))
	}
	return nil
}
