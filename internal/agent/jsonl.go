package agent

import (
	"bytes"
	"encoding/json"
	"errors"
)

// decode decodes one JSON line into v. A line that is not a JSON object (a warning, say) is
// not an event; a field of an unexpected type is skipped and the rest is still decoded, so a
// change in one field of an agent's output does not hide the others.
func decode(b []byte, v any) bool {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return false
	}
	err := json.Unmarshal(b, v)
	var typeErr *json.UnmarshalTypeError
	return err == nil || errors.As(err, &typeErr)
}
