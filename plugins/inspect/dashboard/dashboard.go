// Package dashboard is the read-only web page the inspect API serves beside
// itself (docs/dashboard.md): plain HTML, SVG and JavaScript embedded in
// the binary, no framework, nothing fetched from the internet. The page
// reads the inspect API (../v1/inspect/...) with relative URLs, so it works
// on the scheduler's address, behind the API server's service proxy and
// behind `kubectl hivesched dashboard` alike, and polls it for live
// updates.
package dashboard

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed assets
var assets embed.FS

// ContentSecurityPolicy of the page: its own scripts, styles and API only.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

type asset struct {
	body        []byte
	contentType string
	version     string // a hash of body: the page names assets with it
}

// Handler serves the page at "/" and its assets, below wherever it is
// mounted (the inspect server strips its /dashboard prefix).
func Handler() http.Handler {
	files := map[string]asset{}
	_ = fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		files[strings.TrimPrefix(p, "assets/")] = asset{body: body, contentType: contentType(p), version: hex.EncodeToString(sum[:6])}
		return nil
	})
	page := template.Must(template.New("index.html").Parse(string(files["index.html"].body)))
	var index bytes.Buffer
	if err := page.Execute(&index, map[string]string{
		"JS":  "app.js?v=" + files["app.js"].version,
		"CSS": "app.css?v=" + files["app.css"].version,
	}); err != nil {
		panic(err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
		h := w.Header()
		if name == "" || name == "index.html" {
			h.Set("Content-Type", "text/html; charset=utf-8")
			h.Set("Content-Security-Policy", ContentSecurityPolicy)
			h.Set("Cache-Control", "no-store")
			_, _ = w.Write(index.Bytes())
			return
		}
		a, ok := files[name]
		if !ok || name == "index.html" {
			http.NotFound(w, r)
			return
		}
		h.Set("Content-Type", a.contentType)
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		if r.URL.Query().Get("v") == a.version {
			h.Set("Cache-Control", "private, max-age=86400, immutable")
		} else {
			h.Set("Cache-Control", "no-cache")
		}
		_, _ = w.Write(a.body)
	})
}

func contentType(p string) string {
	switch path.Ext(p) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	}
	return "application/octet-stream"
}
