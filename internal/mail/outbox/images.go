package outbox

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"html/template"
	"mime"
	"mime/multipart"
	"net/textproto"
	"regexp"
)

// Image is a picture shown inline in a reply: its HTML part refers to it as cid:ContentID.
type Image struct {
	// ContentID names the picture inside the message, without angle brackets, e.g.
	// "p1-desktop@job.webordinary". Required; letters, digits and ".-_@" only.
	ContentID string
	// ContentType is image/png or image/jpeg.
	ContentType string
	// Data is the encoded picture.
	Data []byte
	// Width and Height are its size in pixels (the HTML says so, for mail clients that lay out
	// before loading).
	Width, Height int
	// Screen is the width the page was shown at ("phone", "desktop"); the reply shows one
	// picture, the phone's when there is one.
	Screen string
	// Alt says what the picture shows, for those who cannot see it.
	Alt string
	// Caption is shown under the picture; optional.
	Caption string
}

var contentIDChars = regexp.MustCompile(`^[A-Za-z0-9._@-]+$`)

func (im Image) validate() error {
	if !contentIDChars.MatchString(im.ContentID) {
		return fmt.Errorf("image content id %q: use letters, digits and .-_@ only", im.ContentID)
	}
	if im.ContentType != "image/png" && im.ContentType != "image/jpeg" {
		return fmt.Errorf("image %s: content type %q: use image/png or image/jpeg", im.ContentID, im.ContentType)
	}
	return nil
}

// CID is the picture's address in the HTML part. It is a template.URL because html/template
// refuses schemes it does not know; ContentID is checked to be plain characters (validate).
func (im Image) CID() template.URL {
	if !contentIDChars.MatchString(im.ContentID) {
		return ""
	}
	return template.URL("cid:" + im.ContentID)
}

// related wraps the multipart/alternative body in a multipart/related with the pictures after
// it (RFC 2387), each inline with its Content-ID, base64 in 76-character lines. It returns the
// body and its Content-Type.
func related(alt []byte, altBoundary string, images []Image) ([]byte, string, error) {
	sum := sha256.New()
	sum.Write(alt)
	for _, im := range images {
		if err := im.validate(); err != nil {
			return nil, "", err
		}
		sum.Write(im.Data)
	}
	boundary := "=_wo_rel_" + hex.EncodeToString(sum.Sum(nil)[:12])
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	if err := w.SetBoundary(boundary); err != nil {
		return nil, "", err
	}
	pw, err := w.CreatePart(textproto.MIMEHeader{"Content-Type": {
		mime.FormatMediaType("multipart/alternative", map[string]string{"boundary": altBoundary})}})
	if err == nil {
		_, err = pw.Write(alt)
	}
	for i := 0; err == nil && i < len(images); i++ {
		err = writeImage(w, images[i])
	}
	if err == nil {
		err = w.Close()
	}
	ctype := mime.FormatMediaType("multipart/related", map[string]string{"type": "multipart/alternative", "boundary": boundary})
	return b.Bytes(), ctype, err
}

func writeImage(w *multipart.Writer, im Image) error {
	ext := ".png"
	if im.ContentType == "image/jpeg" {
		ext = ".jpg"
	}
	pw, err := w.CreatePart(textproto.MIMEHeader{
		"Content-Type":              {im.ContentType},
		"Content-Transfer-Encoding": {"base64"},
		"Content-ID":                {"<" + im.ContentID + ">"},
		"Content-Disposition":       {mime.FormatMediaType("inline", map[string]string{"filename": safeFileName(im.ContentID) + ext})},
	})
	if err != nil {
		return err
	}
	enc := base64.StdEncoding.EncodeToString(im.Data)
	for len(enc) > 76 {
		if _, err := pw.Write([]byte(enc[:76] + "\r\n")); err != nil {
			return err
		}
		enc = enc[76:]
	}
	_, err = pw.Write([]byte(enc + "\r\n"))
	return err
}

var fileNameUnsafe = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

func safeFileName(cid string) string {
	return fileNameUnsafe.ReplaceAllString(cid, "-")
}
