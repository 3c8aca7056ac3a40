package message

import (
	"fmt"
	"mime"
	"strings"

	"github.com/jhillyerd/enmime/v2"
)

// collectAttachments gathers enmime's Attachments, Inlines and OtherParts, once each, skipping
// the parts that are the message body itself.
func collectAttachments(env *enmime.Envelope) []Attachment {
	seen := make(map[*enmime.Part]bool)
	var out []Attachment
	for _, group := range [][]*enmime.Part{env.Attachments, env.Inlines, env.OtherParts} {
		for _, p := range group {
			if p == nil || seen[p] || isBody(p) {
				continue
			}
			seen[p] = true
			out = append(out, newAttachment(p, len(out)+1))
		}
	}
	return out
}

// isBody reports whether p is a text or HTML body part that enmime listed because it carries
// Content-Disposition: inline (Apple Mail and mutt do that).
func isBody(p *enmime.Part) bool {
	return isBodyPart(p, "text/plain") || isBodyPart(p, "text/html")
}

// newAttachment converts the n-th (1-based) attachment part.
func newAttachment(p *enmime.Part, n int) Attachment {
	ctype := p.ContentType
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	return Attachment{
		Name:        attachmentName(p, ctype, n),
		ContentType: ctype,
		Data:        p.Content,
		Inline:      p.Disposition == "inline" || (p.Disposition == "" && p.ContentID != ""),
	}
}

// attachmentName returns the part's own file name, or "attachment-N.ext" when it has none.
func attachmentName(p *enmime.Part, ctype string, n int) string {
	if strings.TrimSpace(p.FileName) != "" {
		return p.FileName
	}
	if name := rfc2231Name(p); name != "" {
		return name
	}
	return fmt.Sprintf("attachment-%d%s", n, extensionFor(ctype))
}

// knownExtensions covers the types mail actually carries, so names do not depend on the host's
// mime.types file.
var knownExtensions = map[string]string{
	"application/msword":       ".doc",
	"application/octet-stream": ".bin",
	"application/pdf":          ".pdf",
	"application/vnd.openxmlformats-officedocument.presentationml.presentation": ".pptx",
	"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet":         ".xlsx",
	"application/vnd.openxmlformats-officedocument.wordprocessingml.document":   ".docx",
	"application/zip": ".zip",
	"image/gif":       ".gif",
	"image/heic":      ".heic",
	"image/jpeg":      ".jpg",
	"image/jpg":       ".jpg",
	"image/png":       ".png",
	"image/svg+xml":   ".svg",
	"image/webp":      ".webp",
	"message/rfc822":  ".eml",
	"text/calendar":   ".ics",
	"text/csv":        ".csv",
	"text/html":       ".html",
	"text/plain":      ".txt",
	"video/mp4":       ".mp4",
	"video/quicktime": ".mov",
}

// extensionFor guesses a file extension (with dot) for a media type; ".bin" when unknown.
func extensionFor(ctype string) string {
	ctype = strings.ToLower(ctype)
	if ext, ok := knownExtensions[ctype]; ok {
		return ext
	}
	if exts, err := mime.ExtensionsByType(ctype); err == nil && len(exts) > 0 {
		return exts[0]
	}
	return ".bin"
}
