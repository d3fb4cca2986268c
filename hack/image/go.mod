// The image builder (make image) in a module of its own: go-containerregistry
// is its dependency only, and the scheduler's go.mod stays as it is. The
// main module's go vet ./... and go test ./... skip this directory (a nested
// module).
module github.com/hivesched/hivesched/hack/image

go 1.26

require github.com/google/go-containerregistry v0.22.1

require (
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/klauspost/compress v1.19.2 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
	golang.org/x/sync v0.22.0 // indirect
)
