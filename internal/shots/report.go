package shots

import (
	"cmp"
	"errors"
	"fmt"
	"image"
	"runtime"
	"strings"
	"sync"
)

// Report is what Shoot did for a job; the job page and the reply are made from it. It is
// stored as Dir/<job>/report.json.
type Report struct {
	// Pages are the pages with pictures, most relevant first.
	Pages []Page `json:"pages,omitempty"`
	// Unchanged are URL paths whose HTML changed but which look the same at every width.
	Unchanged []string `json:"unchanged,omitempty"`
	// Note says why there are no pictures or fewer than pages, for the job page ("" when all
	// went well). A reply never shows it.
	Note string `json:"note,omitempty"`
	// MailBytes is what the reply's pictures weigh together.
	MailBytes int `json:"mailBytes,omitempty"`
	// Rendered counts the pictures the browser took; Reused those taken by an earlier job of
	// the same content (the previous job's after is this one's before).
	Rendered   int   `json:"rendered,omitempty"`
	Reused     int   `json:"reused,omitempty"`
	DurationMs int64 `json:"durationMs"`
}

// Page is one changed page.
type Page struct {
	Path  string    `json:"path"` // URL path, e.g. "/about/"
	Title string    `json:"title,omitempty"`
	New   bool      `json:"new,omitempty"` // the previous version did not have it
	Shots []Picture `json:"shots"`
}

// Picture is a page at one width. File names are relative to Dir/<job>/.
type Picture struct {
	Width   string  `json:"width"`            // Width.Name
	Before  string  `json:"before,omitempty"` // full-size PNG of the previous version
	After   string  `json:"after,omitempty"`  // full-size PNG of the new version
	Marked  string  `json:"marked,omitempty"` // After with the changed regions outlined
	Boxes   []Box   `json:"boxes,omitempty"`  // the changed regions, in After's pixels
	Changed float64 `json:"changed,omitempty"`
	// Mail is the reply's picture: cropped around the change and scaled; "" when it did not
	// fit in the reply's budget.
	Mail     string `json:"mail,omitempty"`
	MailType string `json:"mailType,omitempty"`
	MailW    int    `json:"mailW,omitempty"`
	MailH    int    `json:"mailH,omitempty"`
	Alt      string `json:"alt,omitempty"`   // what the picture shows, for alt text
	Error    string `json:"error,omitempty"` // why this width has no picture
}

// Box is a changed region.
type Box struct{ X, Y, W, H int }

func boxesOf(rs []image.Rectangle) []Box {
	out := make([]Box, len(rs))
	for i, r := range rs {
		out[i] = Box{r.Min.X, r.Min.Y, r.Dx(), r.Dy()}
	}
	return out
}

// compose turns the rendered pictures into the report, writing the files: it diffs before
// against after, drops pages that look the same, and fits the reply's pictures in the budget.
func (s *Shooter) compose(jobID string, cands []Candidate, results map[job]result) (Report, error) {
	var rep Report
	for _, r := range results {
		if r.cached {
			rep.Reused++
		} else if r.err == nil {
			rep.Rendered++
		}
	}
	var small [][]*image.RGBA // the reply's picture of rep.Pages[i].Shots[j], not encoded yet
	var errs []string
	for i, pc := range s.composePages(jobID, cands, results) {
		c, pg, pics, changed := cands[i], pc.page, pc.small, pc.changed
		errs = append(errs, pc.errs...)
		switch {
		case !changed:
			rep.Unchanged = append(rep.Unchanged, c.Path)
		case len(pg.Shots) > 0:
			rep.Pages = append(rep.Pages, pg)
			small = append(small, pics)
		}
	}
	var err error
	if rep.MailBytes, err = s.fitMail(jobID, &rep, small); err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		rep.Note = "Some pictures are missing: " + strings.Join(errs, "; ")
	}
	if len(rep.Pages) == 0 && len(errs) > 0 {
		return rep, errors.New(strings.Join(errs, "; "))
	}
	return rep, nil
}

// composed is one page's part of the report.
type composed struct {
	page    Page
	small   []*image.RGBA
	changed bool
	errs    []string
}

// composePages composes the pages concurrently, one per processor (diffing and encoding
// full-size pictures is most of the work after the renders).
func (s *Shooter) composePages(jobID string, cands []Candidate, results map[job]result) []composed {
	out := make([]composed, len(cands))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, c := range cands {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			pg, small, changed, errs := s.composePage(jobID, i, c, results)
			out[i] = composed{pg, small, changed, errs}
		})
	}
	wg.Wait()
	return out
}

// composePage builds page i's pictures at every width and their reply-sized versions. changed
// is false when every width rendered before and after alike.
func (s *Shooter) composePage(jobID string, i int, c Candidate, results map[job]result) (Page, []*image.RGBA, bool, []string) {
	pg := Page{Path: c.Path, New: c.New}
	var small []*image.RGBA
	var errs []string
	changed := false
	for w, width := range s.cfg.Widths {
		after, before := results[job{i, w, false}], results[job{i, w, true}]
		if after.err != nil {
			errs = append(errs, fmt.Sprintf("%s at %s width: %v", c.Path, width.Name, after.err))
			changed = true // unknown: keep the page if another width shows it
			continue
		}
		pg.Title = cmp.Or(pg.Title, after.title)
		pic := Picture{Width: width.Name}
		var boxes []image.Rectangle
		if before.err == nil && before.img != nil {
			boxes, pic.Changed = Diff(before.img, after.img)
			if len(boxes) == 0 {
				continue
			}
		}
		changed = true
		img, err := s.savePicture(jobID, i, width, &pic, before, after, boxes)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		pic.Alt = altText(pg, c, width, len(pic.Boxes) > 0)
		pg.Shots = append(pg.Shots, pic)
		small = append(small, img)
	}
	return pg, small, changed, errs
}

// savePicture writes the full-size pictures and returns the reply's version (cropped around
// the change, scaled to the reply's column), not encoded yet. The changed regions are
// outlined unless they fill most of the view (see outlines).
func (s *Shooter) savePicture(jobID string, i int, w Width, pic *Picture, before, after result, boxes []image.Rectangle) (*image.RGBA, error) {
	stem := fmt.Sprintf("p%d-%s-", i+1, w.Name)
	shown := toRGBA(after.img)
	pic.After = stem + "after.png"
	files := []stored{{pic.After, after}}
	if before.err == nil && before.img != nil {
		pic.Before = stem + "before.png"
		files = append(files, stored{pic.Before, before})
	}
	if marks := outlines(boxes, shown.Bounds(), w); len(marks) > 0 {
		pic.Boxes = boxesOf(marks)
		pic.Marked = stem + "marked.png"
		shown = Mark(shown, marks)
		files = append(files, stored{pic.Marked, result{rendered: rendered{img: shown}}})
	}
	for _, f := range files {
		if err := s.store.put(jobID, f.name, f.r); err != nil {
			return nil, err
		}
	}
	return scale(shown, mailCrop(shown, boxes, w), mailWidth(w)), nil
}

// stored is a full-size picture to store under name.
type stored struct {
	name string
	r    result
}

// altText says what a picture shows, for people who cannot see it.
func altText(pg Page, c Candidate, w Width, marked bool) string {
	name := c.Path
	if pg.Title != "" {
		name = fmt.Sprintf("%q (%s)", pg.Title, c.Path)
	}
	switch {
	case c.New:
		return fmt.Sprintf("The new page %s on a %s screen.", name, w.Name)
	case marked:
		return fmt.Sprintf("The page %s on a %s screen after the change; the changed part is outlined.", name, w.Name)
	}
	return fmt.Sprintf("The page %s on a %s screen after the change.", name, w.Name)
}

// mailQualities are the JPEG qualities tried, best first, until the reply's pictures fit.
var mailQualities = []int{82, 60}

// fitMail encodes the reply's pictures and writes them, in the smallest form at the best
// quality that fits the budget; what still does not fit is left out, least relevant first
// (the last pages, the phone before the desktop within a page).
func (s *Shooter) fitMail(jobID string, rep *Report, small [][]*image.RGBA) (int, error) {
	type enc struct {
		data []byte
		typ  string
	}
	var encs [][]enc
	total := 0
	for _, q := range mailQualities {
		encs, total = nil, 0
		for _, row := range small {
			var er []enc
			for _, img := range row {
				data, typ := encodeMail(img, q)
				er = append(er, enc{data, typ})
				total += len(data)
			}
			encs = append(encs, er)
		}
		if total <= s.cfg.MailBytes {
			break
		}
	}
	for i := len(encs) - 1; i >= 0 && total > s.cfg.MailBytes; i-- {
		for j := len(encs[i]) - 1; j >= 0 && total > s.cfg.MailBytes; j-- {
			total -= len(encs[i][j].data)
			encs[i][j].data = nil
		}
	}
	for i, row := range encs {
		for j, e := range row {
			if e.data == nil {
				continue
			}
			pic := &rep.Pages[i].Shots[j]
			pic.Mail = strings.TrimSuffix(pic.After, "after.png") + "mail" + extOf(e.typ)
			pic.MailType = e.typ
			pic.MailW, pic.MailH = small[i][j].Bounds().Dx(), small[i][j].Bounds().Dy()
			if err := s.store.write(jobID, pic.Mail, e.data); err != nil {
				pic.Mail = ""
				return total, err
			}
		}
	}
	return total, nil
}

func extOf(contentType string) string {
	if contentType == "image/png" {
		return ".png"
	}
	return ".jpg"
}
