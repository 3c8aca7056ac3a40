package inbound

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Tokens sign thread ids for reply addresses: edit+<thread>.<mac>@domain. Our replies set it
// in Reply-To, so an owner's reply names its thread even when a mail client drops
// In-Reply-To; the MAC keeps others from guessing thread ids.
type Tokens struct{ secret []byte }

// Make returns the token for thread.
func (k Tokens) Make(thread string) string { return thread + "." + k.mac(thread) }

// Open returns the thread a token names, or false when the token is not ours.
func (k Tokens) Open(token string) (string, bool) {
	thread, mac, ok := strings.Cut(strings.ToLower(token), ".")
	if !ok || thread == "" {
		return "", false
	}
	return thread, hmac.Equal([]byte(mac), []byte(k.mac(thread)))
}

func (k Tokens) mac(thread string) string {
	h := hmac.New(sha256.New, k.secret)
	h.Write([]byte("webordinary-thread:" + thread))
	return hex.EncodeToString(h.Sum(nil))[:20]
}

// Address returns local+token@domain.
func (k Tokens) Address(local, domain, thread string) string {
	return local + "+" + k.Make(thread) + "@" + domain
}

// FromAddress finds a token in a recipient address local+token@domain.
func (k Tokens) FromAddress(addr string) (string, bool) {
	local, _, ok := strings.Cut(addr, "@")
	if !ok {
		return "", false
	}
	_, token, ok := strings.Cut(local, "+")
	if !ok {
		return "", false
	}
	return k.Open(token)
}
