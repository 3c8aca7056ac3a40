package message

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"net/mail"
	"net/textproto"

	"golang.org/x/text/encoding/htmlindex"
)

// parseFallback reads what the standard library can when enmime gave up on the MIME structure:
// the top-level headers and the undecoded body as text.
func parseFallback(raw []byte, cause error) (*Message, error) {
	std, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("unreadable message (mime: %v; headers: %v): %w", cause, err, ErrMalformed)
	}
	body, _ := io.ReadAll(std.Body) // a bytes.Reader does not fail
	msg := &Message{Headers: copyHeaders(textproto.MIMEHeader(std.Header))}
	decode := func(name string) string { return decodeWords(std.Header.Get(name)) }
	msg.setHeaderFields(decode)
	msg.Text = cleanText(string(body))
	msg.addProblem("error: mime structure unreadable, body kept undecoded: " + cause.Error())
	return msg, nil
}

// wordDecoder decodes RFC 2047 encoded words in any charset golang.org/x/text knows.
var wordDecoder = &mime.WordDecoder{CharsetReader: charsetReader}

// charsetReader converts r from charset to UTF-8.
func charsetReader(charset string, r io.Reader) (io.Reader, error) {
	enc, err := htmlindex.Get(charset)
	if err != nil {
		return nil, err
	}
	return enc.NewDecoder().Reader(r), nil
}

// decodeWords decodes RFC 2047 encoded words, keeping the input when it does not decode.
func decodeWords(s string) string {
	d, err := wordDecoder.DecodeHeader(s)
	if err != nil {
		return s
	}
	return d
}
