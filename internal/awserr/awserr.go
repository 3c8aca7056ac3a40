// Package awserr reads AWS API errors: the one helper every AWS adapter needs.
package awserr

import (
	"errors"

	"github.com/aws/smithy-go"
)

// HasCode reports whether err is an AWS API error with one of codes (for example
// "ConditionalCheckFailedException", "PreconditionFailed").
func HasCode(err error, codes ...string) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	for _, c := range codes {
		if ae.ErrorCode() == c {
			return true
		}
	}
	return false
}
