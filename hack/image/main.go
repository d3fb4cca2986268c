// Command image builds the scheduler's container image without Docker and
// without pulling a base image: each platform's static binary in one layer on
// an empty base, run as 65532:65532, gathered into one OCI image index and
// written as an OCI layout and as one docker-archive tarball per platform
// (make image). Every input that would vary between two builds of the same
// commit is fixed: tar entries are sorted, owned by 0:0 with fixed modes and
// the commit's time, and every timestamp in the configs is that time, so the
// same binaries give the same digests.
package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

// The user the scheduler runs as (distroless' "nonroot"): no account on
// any node, so a container escape is nobody there.
const (
	nonRootID = 65532
	// binaryPath is the entrypoint, at the root as in the chart and
	// manifests/scheduler/deployment.yaml (command: /hivesched-scheduler).
	binaryPath = "hivesched-scheduler"
)

// platformBinaries is the repeatable -binary flag: os/arch=path.
type platformBinaries map[string]string

func (p platformBinaries) String() string { return fmt.Sprint(map[string]string(p)) }

func (p platformBinaries) Set(v string) error {
	platform, path, ok := strings.Cut(v, "=")
	if !ok || strings.Count(platform, "/") != 1 {
		return fmt.Errorf("want os/arch=path, got %q", v)
	}
	p[platform] = path
	return nil
}

func main() {
	binaries := platformBinaries{}
	flag.Var(binaries, "binary", "os/arch=path of a static scheduler binary (repeat per platform)")
	layoutDir := flag.String("layout", "", "directory to write the OCI layout to (replaced)")
	archiveDir := flag.String("archive-dir", "", "directory for one docker-archive per platform, <repo-base>-<arch>.tar")
	repo := flag.String("repo", "hivesched-scheduler", "image repository named in the layout's ref and the archives' tags")
	tag := flag.String("tag", "dev", "image tag")
	version := flag.String("version", "", "org.opencontainers.image.version")
	revision := flag.String("revision", "", "org.opencontainers.image.revision (the commit)")
	source := flag.String("source", "https://github.com/hivesched/hivesched", "org.opencontainers.image.source")
	epoch := flag.String("source-date-epoch", os.Getenv("SOURCE_DATE_EPOCH"), "seconds since 1970 stamped on every file and config (default $SOURCE_DATE_EPOCH)")
	digestFile := flag.String("digest-file", "", "write the index digest here")
	extract := flag.String("extract", "", "instead of building: write the entrypoint binary of -platform's image in -layout to this path")
	extractPlatform := flag.String("platform", "linux/amd64", "the platform -extract takes")
	flag.Parse()
	if *extract != "" {
		if err := extractBinary(*layoutDir, *extractPlatform, *extract); err != nil {
			fmt.Fprintln(os.Stderr, "image:", err)
			os.Exit(1)
		}
		return
	}
	if len(binaries) == 0 || *layoutDir == "" || *epoch == "" {
		fmt.Fprintln(os.Stderr, "usage: image -binary linux/amd64=PATH [-binary linux/arm64=PATH] -layout DIR -source-date-epoch N [flags]")
		os.Exit(2)
	}
	if err := run(binaries, *layoutDir, *archiveDir, *repo, *tag, *version, *revision, *source, *epoch, *digestFile); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(binaries platformBinaries, layoutDir, archiveDir, repo, tag, version, revision, source, epoch, digestFile string) error {
	secs, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil {
		return fmt.Errorf("source date epoch %q: %w", epoch, err)
	}
	created := time.Unix(secs, 0).UTC()
	labels := map[string]string{
		"org.opencontainers.image.source":   source,
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.revision": revision,
		"org.opencontainers.image.created":  created.Format(time.RFC3339),
		"org.opencontainers.image.title":    "hivesched-scheduler",
		"org.opencontainers.image.description": "kube-scheduler with the hivesched plugins (HiveD-style GPU sharing); " +
			"a static binary on an empty base, run as 65532:65532",
	}
	ref, err := name.NewTag(repo + ":" + tag)
	if err != nil {
		return err
	}

	platforms := make([]string, 0, len(binaries))
	for p := range binaries {
		platforms = append(platforms, p)
	}
	sort.Strings(platforms) // the index lists them in one order every time

	index := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	index = mutate.Annotations(index, labels).(v1.ImageIndex)
	images := map[string]v1.Image{}
	for _, platform := range platforms {
		osName, arch, _ := strings.Cut(platform, "/")
		binary, err := os.ReadFile(binaries[platform])
		if err != nil {
			return err
		}
		img, err := platformImage(osName, arch, binary, created, labels)
		if err != nil {
			return fmt.Errorf("%s: %w", platform, err)
		}
		if err := validate.Image(img); err != nil {
			return fmt.Errorf("%s: the image does not validate: %w", platform, err)
		}
		images[platform] = img
		index = mutate.AppendManifests(index, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: osName, Architecture: arch}},
		})
	}
	if err := validate.Index(index); err != nil {
		return fmt.Errorf("the index does not validate: %w", err)
	}

	// The layout: index.json names the image index by its tag
	// (skopeo copy oci:DIR:TAG, crane push DIR take it from there).
	if err := os.RemoveAll(layoutDir); err != nil {
		return err
	}
	p, err := layout.Write(layoutDir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendIndex(index, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": tag,
		"io.containerd.image.name":          ref.Name(),
	})); err != nil {
		return err
	}

	// The docker-archives: one per platform (an archive holds one image per
	// tag; docker load and podman load take these).
	if archiveDir != "" {
		if err := os.MkdirAll(archiveDir, 0o755); err != nil {
			return err
		}
		base := filepath.Base(repo)
		for _, platform := range platforms {
			_, arch, _ := strings.Cut(platform, "/")
			out := filepath.Join(archiveDir, base+"-"+arch+".tar")
			if err := tarball.WriteToFile(out, ref, images[platform]); err != nil {
				return err
			}
			// Read back as docker load would and validate it.
			loaded, err := tarball.ImageFromPath(out, &ref)
			if err != nil {
				return fmt.Errorf("%s: %w", out, err)
			}
			if err := validate.Image(loaded); err != nil {
				return fmt.Errorf("%s does not validate: %w", out, err)
			}
		}
	}

	digest, err := index.Digest()
	if err != nil {
		return err
	}
	report := map[string]string{"index": digest.String(), "ref": ref.Name()}
	for _, platform := range platforms {
		d, err := images[platform].Digest()
		if err != nil {
			return err
		}
		report[platform] = d.String()
	}
	out, _ := json.MarshalIndent(report, "", "  ")
	fmt.Println(string(out))
	if digestFile != "" {
		return os.WriteFile(digestFile, []byte(digest.String()+"\n"), 0o644)
	}
	return nil
}

// extractBinary reads the OCI layout back as a registry client would (the
// index, the platform's manifest, its layer) and writes the entrypoint file
// out of the layer: the install test runs exactly what the image holds.
func extractBinary(layoutDir, platform, out string) error {
	p, err := layout.FromPath(layoutDir)
	if err != nil {
		return err
	}
	outer, err := p.ImageIndex()
	if err != nil {
		return err
	}
	outerManifest, err := outer.IndexManifest()
	if err != nil {
		return err
	}
	if len(outerManifest.Manifests) != 1 {
		return fmt.Errorf("%s: want one image index in the layout, found %d", layoutDir, len(outerManifest.Manifests))
	}
	index, err := outer.ImageIndex(outerManifest.Manifests[0].Digest)
	if err != nil {
		return err
	}
	manifest, err := index.IndexManifest()
	if err != nil {
		return err
	}
	osName, arch, _ := strings.Cut(platform, "/")
	for _, desc := range manifest.Manifests {
		if desc.Platform == nil || desc.Platform.OS != osName || desc.Platform.Architecture != arch {
			continue
		}
		img, err := index.Image(desc.Digest)
		if err != nil {
			return err
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			return err
		}
		entrypoint := strings.TrimPrefix(cfg.Config.Entrypoint[0], "/")
		rc := mutate.Extract(img)
		defer rc.Close()
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				return fmt.Errorf("%s: no %s in the image", platform, entrypoint)
			}
			if err != nil {
				return err
			}
			if h.Name != entrypoint {
				continue
			}
			f, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o755)
			if err != nil {
				return err
			}
			if _, err := io.Copy(f, tr); err != nil {
				f.Close()
				return err
			}
			return f.Close()
		}
	}
	return fmt.Errorf("%s: no %s image in the index", layoutDir, platform)
}

// platformImage is one platform's image: the binary and the few files a
// non-root process on an empty base expects, in one layer, with OCI media
// types and the labels.
func platformImage(osName, arch string, binary []byte, created time.Time, labels map[string]string) (v1.Image, error) {
	layerTar, err := rootFS(binary, created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	// Only the v1.Layer methods: tarball's own Descriptor carries an empty,
	// non-nil annotation map that the manifest's JSON drops, which
	// validate.Image reports as a mismatch.
	layer = plainLayer{layer}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: arch,
		OS:           osName,
		Created:      v1.Time{Time: created},
		Config: v1.Config{
			Entrypoint: []string{"/" + binaryPath},
			User:       fmt.Sprintf("%d:%d", nonRootID, nonRootID),
			WorkingDir: "/",
			Labels:     labels,
		},
		RootFS: v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return nil, err
	}
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History: v1.History{
			Created:   v1.Time{Time: created},
			CreatedBy: "hack/image: the static hivesched-scheduler binary, /etc/passwd and /etc/group for 65532, /tmp",
		},
	})
	if err != nil {
		return nil, err
	}
	return mutate.CreatedAt(img, v1.Time{Time: created})
}

// plainLayer hides everything of a layer but v1.Layer.
type plainLayer struct{ v1.Layer }

// rootFS is the layer's tar: entries sorted by name, owned by 0:0, fixed
// modes, every time the commit's. /etc/passwd and /etc/group name 65532 so
// that tools resolving the user (and Go's os/user, pure Go here) find it;
// /tmp is where a container without the chart's emptyDir may write.
func rootFS(binary []byte, created time.Time) ([]byte, error) {
	type entry struct {
		name string
		mode int64
		dir  bool
		body []byte
	}
	entries := []entry{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, body: []byte(fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", nonRootID))},
		{name: "etc/passwd", mode: 0o644, body: []byte(fmt.Sprintf(
			"root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", nonRootID, nonRootID))},
		{name: binaryPath, mode: 0o755, body: binary},
		{name: "tmp/", mode: 0o1777, dir: true},
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, ModTime: created, Format: tar.FormatPAX}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
