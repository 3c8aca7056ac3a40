package demo

import (
	"context"
	"embed"
	"io/fs"
)

// AstroRepoName is the bare repository CreateAstroRepo makes in its directory.
const AstroRepoName = "astro-site.git"

// AstroPage is the Astro site's page, the file an owner's edits change.
const AstroPage = "src/pages/index.astro"

//go:embed all:astro
var astroSite embed.FS

// WriteAstroSite writes a minimal Astro 5 site (Corner Bakery: one page, package.json with
// Astro pinned, its lockfile and a generator's .gitignore; npm install and npm run build
// make it) into dir, creating it, overwriting files of the same names.
func WriteAstroSite(dir string) error {
	files, _ := fs.Sub(astroSite, "astro")
	return writeTree(files, dir)
}

// CreateAstroRepo is CreateSampleRepo for the Astro site: it commits it on branch main in
// the bare repository dir/astro-site.git and returns that repository's path.
func CreateAstroRepo(ctx context.Context, dir string) (bareRepo string, err error) {
	return createRepo(ctx, dir, AstroRepoName, WriteAstroSite, "Corner Bakery Astro site")
}
