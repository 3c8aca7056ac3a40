package reply_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/webordinary/webordinary/internal/mail/message"
	"github.com/webordinary/webordinary/internal/mail/reply"
)

// TestPipeline runs raw messages from package message's testdata through Parse and Extract, as
// the router does.
func TestPipeline(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file string
		want string
	}{
		{"gmail_alternative.eml", "Hi! Please make the header green and change the tagline to \"Pan recién hecho\".\n\nGracias,\nAna"},
		{"outlook_mixed_image.eml", "Bitte das angehängte Foto als Titelbild verwenden. Grüße\n\nKlaus Brandt"},
		{"html_only.eml", "Please remove the “Careers” page & add our phone number to the footer.\n\nSam"},
		{"thunderbird_latin1.eml", "Bonjour,\n\nPouvez-vous changer la couleur du titre en bleu foncé ? Et écrire « Spécialités » au lieu de « Produits ».\n\nÀ bientôt,\nGérard"},
		{"ios_base64_heic.eml", "Can you use this photo on the About page? 📸"},
		{"apple_mail_mixed_inline.eml", "Put this picture first in the gallery:\n\nand this one second:"},
		{"mislabeled_big5.eml", "請把營業時間改成週一到週五，早上九點開門。\n\n謝謝，\n林小姐"},
		{"mislabeled_latin1.eml", "Bitte die Öffnungszeiten ändern: Montag bis Freitag 8–18 Uhr.\n\nGrüße,\nJürgen"},
		{"alternative_no_parts.eml", "Please move the contact form to the top of the page."},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			raw, err := os.ReadFile(filepath.Join("..", "message", "testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			msg, err := message.Parse(raw)
			if err != nil {
				t.Fatal(err)
			}
			if got := reply.Extract(msg.Text).Text; got != tt.want {
				t.Errorf("Extract(Parse(%s)).Text =\n%q\nwant\n%q", tt.file, got, tt.want)
			}
		})
	}
}
