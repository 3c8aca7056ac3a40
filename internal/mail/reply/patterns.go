package reply

import (
	"strings"
)

// originalMarker matches "-----Original Message-----" and its localized and Samsung variants,
// also with the first header field run on behind it, as HTML-to-text conversion leaves it
// ("-------- Ursprüngliche Nachricht --------Von: …").
var originalMarker = lazy(`^-{2,}\s*(original message|original[ -]nachricht|ursprüngliche nachricht|message d'origine|message original|mensaje original|messaggio originale|oorspronkelijk bericht|origineel bericht|mensagem original|ursprungligt meddelande|oprindelig meddelelse|oprindelig besked|opprinnelig melding|alkuperäinen viesti|wiadomość oryginalna|oryginalna wiadomość|původní zpráva|исходное сообщение|元のメッセージ|原始邮件)\s*-{2,}(\s*\pL{1,20}\s?:.*)?$`)

// replyAbove matches the line a ticket or forum system puts above the history it quotes:
// "## Please type your reply above this line ##" and its translations.
var replyAbove = lazy(`^[#=\-\s]*((please )?(type|write|enter) your (reply|response) above this line|reply above this line|bitte gib deine antwort oberhalb dieser zeile ein|merci de répondre au-dessus de cette ligne)\.?[#=\-\s]*$`)

// isOriginalMarker reports whether l is an "Original Message" separator or a "reply above
// this line" mark: the history below it is not the person's.
func isOriginalMarker(l string) bool {
	sq := strings.Trim(squash(l), "*_")
	return originalMarker.MatchString(sq) || replyAbove.MatchString(sq)
}

// forwardDashed matches dashed forward separators (Gmail, Thunderbird, Outlook.com, …).
var forwardDashed = lazy(`^-{2,}\s*(forwarded message|weitergeleitete nachricht|message transféré|mensaje reenviado|messaggio inoltrato|doorgestuurd bericht|mensagem encaminhada|mensagem reencaminhada|vidarebefordrat meddelande|videresendt meddelelse|videresendt melding|przekazana wiadomość|wiadomość przekazana dalej|přeposlaná zpráva|пересылаемое сообщение|転送メッセージ|転送されたメッセージ|转发的邮件)\s*-*$`)

// forwardIntro matches "Begin forwarded message:" lines (Apple Mail) and their translations.
var forwardIntro = lazy(`^(begin forwarded message|forwarded message|anfang der weitergeleiteten nachricht|début du message réexpédié|début du message transféré|inicio del mensaje reenviado|comienzo del mensaje reenviado|inizio messaggio inoltrato|begin doorgestuurd bericht|início da mensagem reencaminhada|início da mensagem encaminhada|vidarebefordrat brev|början på vidarebefordrat brev|videresendt besked|początek przekazywanej wiadomości|転送されたメッセージ|以下为转发的邮件)\s*[:：]?$`)

// isForwardMarker reports whether l starts a forwarded message.
func isForwardMarker(l string) bool {
	sq := squash(l)
	return forwardDashed.MatchString(sq) || forwardIntro.MatchString(sq)
}

// separator matches the line Outlook puts above its header block.
var separator = lazy(`^\s*([_]{8,}|[-—]{8,}|[=]{8,})\s*$`)

// isSeparator reports whether l is a bare separator line.
func isSeparator(l string) bool {
	return separator.MatchString(l)
}

// maxLabelLen bounds the label of a "Label: value" line, in bytes.
const maxLabelLen = 40

// label returns the lowercased label of a header-like line ("From: …" → "from"), or "". It allows
// the "*From:*" bold that HTML-to-text conversion leaves and the space French puts before the
// colon, and needs whitespace or the end of the line after the colon (so "10:30" is no label).
func label(l string) string {
	t := strings.TrimLeft(l, " \t*")
	colon, width := labelColon(t)
	if colon <= 0 {
		return ""
	}
	after := strings.TrimLeft(t[colon+width:], "*")
	if after != "" && after[0] != ' ' && after[0] != '\t' {
		return ""
	}
	return squash(strings.TrimRight(t[:colon], " \t*"))
}

// labelColon finds the first ASCII or full-width colon within maxLabelLen bytes of t and returns
// its index and byte width, or -1.
func labelColon(t string) (int, int) {
	head := t
	if len(head) > maxLabelLen+len("：") {
		head = head[:maxLabelLen+len("：")]
	}
	i := strings.IndexAny(head, ":：")
	if i < 0 || i > maxLabelLen {
		return -1, 0
	}
	if t[i] == ':' {
		return i, 1
	}
	return i, len("：")
}

// labelSet turns a word list into a set.
func labelSet(words string) map[string]bool {
	set := make(map[string]bool)
	for _, w := range strings.Split(words, "|") {
		set[w] = true
	}
	return set
}

// Header block labels by role, in the languages Outlook and other clients write them.
var (
	fromLabels    = labelSet("from|von|de|da|van|från|fra|od|от|差出人|发件人|寄件者|lähettäjä|kimden|de la|feladó|από|من|nadawca")
	sentLabels    = labelSet("sent|date|message du|gesendet|datum|envoyé|envoye|date d'envoi|enviado el|enviado|enviada|data|inviato|verzonden|verstuurd|skickat|sendt|wysłano|wysłane|отправлено|дата|送信日時|日付|发送时间|日期|envoyé le|envoye le|lähetetty|odesláno|gönderildi|tarih|trimis|elküldve|dátum|στάλθηκε|ημερομηνία|تم الإرسال|التاريخ")
	toLabels      = labelSet("to|an|à|a|copie à|para|aan|till|til|do|кому|宛先|收件人|cc|kopie|cco|bcc|vastaanottaja|komu|kime|kopio|către|catre|címzett|másolat|προς|κοιν|إلى|نسخة|adresat")
	subjectLabels = labelSet("subject|sujet|betreff|objet|asunto|oggetto|onderwerp|ämne|emne|temat|assunto|тема|件名|主题|aihe|předmět|konu|subiect|tárgy|θέμα|الموضوع")
)
