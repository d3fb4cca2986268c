package placement

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Placement records are signed. A restarted scheduler rebuilds its state from
// the records on bound pods (the seed's ec), and anyone who can create a pod
// can write annotations and spec.nodeName: an unsigned record would let a
// tenant block or take any VC's cells at any priority, or make a real gang
// fail recovery so that its busy GPUs are handed out again. The signature is
// an HMAC of the pod's UID, namespace and the record, with a key only the
// scheduler reads, so a record counts only on the very pod hivesched bound
// (a record copied onto another pod does not verify).
const (
	// AnnotationSignature is written at bind beside the placement.
	AnnotationSignature = "hivesched.io/placement-signature"

	// KeySecret is the Secret (data key "key") that holds the
	// signing key, in the scheduler's namespace. The scheduler creates it
	// with a random key the first time it starts; every replica and every
	// restart reads the same one. Deleting it makes every running group's
	// record unverifiable: the next restart would not count their cells.
	KeySecret         = "hivesched-placement-key"
	placementKeyField = "key"

	// envPodNamespace names the scheduler's namespace (downward API in
	// manifests/scheduler/deployment.yaml); DefaultNamespace without it.
	envPodNamespace = "POD_NAMESPACE"

	// DefaultNamespace is the namespace the shipped manifests run the
	// scheduler in (manifests/scheduler/namespace.yaml), and where a
	// scheduler without POD_NAMESPACE (one run outside the cluster) keeps
	// its key. Not kube-system: whoever may read Secrets there would read
	// the key (issue 28, finding 8).
	DefaultNamespace = "hivesched-system"

	signatureDomain = "hivesched.io/placement/v1\n"
)

// Signer signs and verifies placement records.
type Signer struct{ key []byte }

func schedulerNamespace() string {
	if ns := os.Getenv(envPodNamespace); ns != "" {
		return ns
	}
	return DefaultNamespace
}

// LoadSigner reads the signing key, creating it on first use. Two
// replicas starting at once both try to create it: the loser reads the
// winner's.
func LoadSigner(ctx context.Context, cs kubernetes.Interface) (*Signer, error) {
	ns := schedulerNamespace()
	secrets := cs.CoreV1().Secrets(ns)
	// The namespace may not exist yet on a cluster that is coming up (it
	// is applied with the scheduler's manifests): a minute of retries.
	for attempt := 0; attempt < 120; attempt++ {
		s, err := secrets.Get(ctx, KeySecret, metav1.GetOptions{})
		if err == nil {
			key := s.Data[placementKeyField]
			if len(key) < 16 {
				return nil, fmt.Errorf("secret %s/%s: data %q holds %d bytes, want a random key of at least 16 (delete the secret to have the scheduler create one; running groups are then not recovered at the next restart)",
					ns, KeySecret, placementKeyField, len(key))
			}
			return &Signer{key: key}, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading secret %s/%s (the placement signing key): %w", ns, KeySecret, err)
		}
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		_, err = secrets.Create(ctx, &v1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: KeySecret, Namespace: ns,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "hivesched-scheduler"}},
			Type: v1.SecretTypeOpaque,
			Data: map[string][]byte{placementKeyField: key},
		}, metav1.CreateOptions{})
		if err == nil {
			return &Signer{key: key}, nil
		}
		switch {
		case apierrors.IsAlreadyExists(err): // another replica won: read it
		case apierrors.IsNotFound(err): // the namespace
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(500 * time.Millisecond):
			}
		default:
			return nil, fmt.Errorf("creating secret %s/%s (the placement signing key): %w", ns, KeySecret, err)
		}
	}
	return nil, fmt.Errorf("secret %s/%s: could not be read or created (does namespace %s exist? manifests/scheduler/namespace.yaml creates %s; %s names another)",
		ns, KeySecret, ns, DefaultNamespace, envPodNamespace)
}

func (s *Signer) mac(pod *v1.Pod, record string) []byte {
	h := hmac.New(sha256.New, s.key)
	h.Write([]byte(signatureDomain))
	h.Write([]byte(pod.UID))
	h.Write([]byte{'\n'})
	h.Write([]byte(pod.Namespace))
	h.Write([]byte{'\n'})
	h.Write([]byte(record))
	return h.Sum(nil)
}

// sign returns the signature of the encoded record on this pod.
func (s *Signer) sign(pod *v1.Pod, record string) string {
	return base64.RawURLEncoding.EncodeToString(s.mac(pod, record))
}

// Verify reports whether the pod's placement annotation is signed by this
// scheduler for this pod.
func (s *Signer) Verify(pod *v1.Pod) bool {
	rec, ok := pod.Annotations[Annotation]
	sig, ok2 := pod.Annotations[AnnotationSignature]
	if s == nil || !ok || !ok2 || pod.UID == "" {
		return false
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return false
	}
	return hmac.Equal(got, s.mac(pod, rec))
}

// Signature is the signature hivesched writes beside the pod's placement
// annotation, with the key of secret KeySecret. Tests use it to stand in
// for a scheduler that bound a pod before a restart.
func Signature(key []byte, pod *v1.Pod) string {
	return (&Signer{key: key}).sign(pod, pod.Annotations[Annotation])
}

// LoadKey reads (or creates) the signing key as the scheduler does.
func LoadKey(ctx context.Context, cs kubernetes.Interface) ([]byte, error) {
	s, err := LoadSigner(ctx, cs)
	if err != nil {
		return nil, err
	}
	return s.key, nil
}

// Trusted returns a bound pod's placement record if this scheduler wrote it
// for this pod: the signature verifies, the record's node is the pod's node
// and its group is in the pod's namespace. Anything else is not
// hivesched's allocation: it never takes or blocks cells.
func (s *Signer) Trusted(pod *v1.Pod) (Record, error) {
	raw, ok := pod.Annotations[Annotation]
	if !ok {
		return Record{}, fmt.Errorf("pod has no annotation %s", Annotation)
	}
	if !s.Verify(pod) {
		return Record{}, fmt.Errorf("annotation %s is not signed by this scheduler for this pod (%s missing or wrong): hivesched did not bind it", Annotation, AnnotationSignature)
	}
	rec, err := Decode(raw)
	if err != nil {
		return rec, err
	}
	if rec.Node != pod.Spec.NodeName {
		return rec, fmt.Errorf("annotation %s names node %q, but the pod is on node %q", Annotation, rec.Node, pod.Spec.NodeName)
	}
	if ns, _, ok := strings.Cut(rec.Group, "/"); !ok || ns != pod.Namespace {
		return rec, fmt.Errorf("annotation %s names affinity group %q, which is not in the pod's namespace %q", Annotation, rec.Group, pod.Namespace)
	}
	return rec, nil
}

// Annotations are what a pod is bound with: its record, its device indices
// (and HiveD's isolation annotation for a pod that asked in HiveD's form),
// and the record's signature for this pod.
func (s *Signer) Annotations(pod *v1.Pod, rec Record, hived bool) map[string]string {
	encoded, indices := rec.Encode(), indicesString(rec.LeafCellIndices)
	ann := map[string]string{Annotation: encoded}
	if !rec.CellLess() {
		// A member without leaf cells has no devices to name.
		ann[AnnotationLeafCellIndices] = indices
		if hived {
			ann[AnnotationHivedIsolation] = indices
		}
	}
	ann[AnnotationSignature] = s.sign(pod, encoded)
	return ann
}
