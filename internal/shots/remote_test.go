package shots

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/webordinary/webordinary/internal/broker/natsjs/natsjstest"
)

// TestPicturesTravelThroughTheEngine: a worker's store and serve's store on different
// directories share pictures through the engine's blob store: serve reads the report, the
// files and the reply's images; a re-shoot (check turn) replaces serve's copy; a hostile
// archive is refused without writing outside the store.
func TestPicturesTravelThroughTheEngine(t *testing.T) {
	t.Parallel()
	env := natsjstest.Start(t, natsjstest.Options{NoSync: true})
	ctx := context.Background()
	blobs, err := env.Backend.Blobs(ctx, BlobStore)
	if err != nil {
		t.Fatal(err)
	}
	worker := Store{Dir: t.TempDir(), Remote: blobs}
	serve := Store{Dir: t.TempDir(), Remote: blobs}
	const job = "j18eac0aa00000000000000001"
	shoot := func(title string, png []byte) {
		t.Helper()
		if err := worker.reset(job); err != nil {
			t.Fatal(err)
		}
		if err := worker.write(job, "p1-desktop-mail.png", png); err != nil {
			t.Fatal(err)
		}
		rep := Report{Pages: []Page{{Path: "/", Title: title, Shots: []Picture{{Width: "desktop", After: "p1-desktop-mail.png",
			Mail: "p1-desktop-mail.png", MailType: "image/png", MailW: 640, MailH: 400, Alt: "the page"}}}}}
		if err := worker.save(job, rep); err != nil {
			t.Fatal(err)
		}
		if err := worker.publish(ctx, job); err != nil {
			t.Fatal(err)
		}
	}

	if _, err := serve.Report(job); !errors.Is(err, ErrNoPictures) {
		t.Fatalf("report before any pictures: %v; want ErrNoPictures", err)
	}
	shoot("First", []byte("first picture"))
	rep, err := serve.Report(job)
	if err != nil || rep.Pages[0].Title != "First" {
		t.Fatalf("serve's report: %+v, %v", rep, err)
	}
	if imgs := serve.Images(job); len(imgs) != 1 || string(imgs[0].Data) != "first picture" {
		t.Fatalf("serve's reply images: %+v", imgs)
	}
	if p, err := serve.Path(job, "p1-desktop-mail.png"); err != nil || !strings.HasPrefix(p, filepath.Join(serve.Dir, remoteDirName)) {
		t.Fatalf("serve's path: %s, %v; want the fetched copy", p, err)
	}

	shoot("Fixed", []byte("second picture")) // the check turn's fix, shot again
	if rep, err = serve.Report(job); err != nil || rep.Pages[0].Title != "Fixed" {
		t.Fatalf("serve's report after the re-shoot: %+v, %v", rep, err)
	}
	if data, err := serve.Read(job, "p1-desktop-mail.png"); err != nil || string(data) != "second picture" {
		t.Fatalf("serve's picture after the re-shoot: %q, %v", data, err)
	}

	// A serve with workers of its own reads the directory they write: a look at the job page
	// while the job is shot again shows the published pictures and leaves the new ones be.
	shared := worker
	if err := shared.reset(job); err != nil {
		t.Fatal(err)
	}
	if err := shared.write(job, "p1-desktop-mail.png", []byte("third, in progress")); err != nil {
		t.Fatal(err)
	}
	if rep, err = shared.Report(job); err != nil || rep.Pages[0].Title != "Fixed" {
		t.Fatalf("report while shooting again: %+v, %v; want the published one", rep, err)
	}
	if data, err := os.ReadFile(filepath.Join(shared.jobDir(job), "p1-desktop-mail.png")); err != nil || string(data) != "third, in progress" {
		t.Fatalf("the picture being taken: %q, %v; a reader must not touch it", data, err)
	}
	shoot("Third", []byte("third picture"))
	if rep, err = shared.Report(job); err != nil || rep.Pages[0].Title != "Third" {
		t.Fatalf("report after shooting again: %+v, %v", rep, err)
	}

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "../../escaped.png", Mode: 0o644, Size: 1, Typeflag: tar.TypeReg})
	_, _ = tw.Write([]byte("x"))
	_ = tw.Close()
	const hostile = "j18eac0aa00000000000000002"
	if _, err := blobs.Put(ctx, hostile, buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	if _, err := serve.Report(hostile); err == nil || errors.Is(err, ErrNoPictures) {
		t.Fatalf("a hostile archive: %v; want a refusal", err)
	}
	matches, _ := filepath.Glob(filepath.Join(filepath.Dir(serve.Dir), "*", "escaped.png"))
	if _, err := os.Stat(filepath.Join(filepath.Dir(serve.Dir), "escaped.png")); err == nil || len(matches) > 0 {
		t.Fatal("the hostile archive wrote outside the store")
	}
}
