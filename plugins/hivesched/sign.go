package hivesched

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
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
	// AnnotationPlacementSignature is written at bind beside the placement.
	AnnotationPlacementSignature = "hivesched.io/placement-signature"

	// PlacementKeySecret is the Secret (data key "key") that holds the
	// signing key, in the scheduler's namespace. The scheduler creates it
	// with a random key the first time it starts; every replica and every
	// restart reads the same one. Deleting it makes every running group's
	// record unverifiable: the next restart would not count their cells.
	PlacementKeySecret = "hivesched-placement-key"
	placementKeyField  = "key"

	// envPodNamespace names the scheduler's namespace (downward API in
	// manifests/scheduler/deployment.yaml); kube-system without it.
	envPodNamespace = "POD_NAMESPACE"

	signatureDomain = "hivesched.io/placement/v1\n"
)

// placementSigner signs and verifies placement records.
type placementSigner struct{ key []byte }

func schedulerNamespace() string {
	if ns := os.Getenv(envPodNamespace); ns != "" {
		return ns
	}
	return metav1.NamespaceSystem
}

// loadPlacementKey reads the signing key, creating it on first use. Two
// replicas starting at once both try to create it: the loser reads the
// winner's.
func loadPlacementKey(ctx context.Context, cs kubernetes.Interface) (*placementSigner, error) {
	ns := schedulerNamespace()
	secrets := cs.CoreV1().Secrets(ns)
	// The namespace may not exist yet on a cluster that is coming up (the
	// API server creates kube-system shortly after it starts): a minute of
	// retries.
	for attempt := 0; attempt < 120; attempt++ {
		s, err := secrets.Get(ctx, PlacementKeySecret, metav1.GetOptions{})
		if err == nil {
			key := s.Data[placementKeyField]
			if len(key) < 16 {
				return nil, fmt.Errorf("secret %s/%s: data %q holds %d bytes, want a random key of at least 16 (delete the secret to have the scheduler create one; running groups are then not recovered at the next restart)",
					ns, PlacementKeySecret, placementKeyField, len(key))
			}
			return &placementSigner{key: key}, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading secret %s/%s (the placement signing key): %w", ns, PlacementKeySecret, err)
		}
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		_, err = secrets.Create(ctx, &v1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: PlacementKeySecret, Namespace: ns,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "hivesched-scheduler"}},
			Type: v1.SecretTypeOpaque,
			Data: map[string][]byte{placementKeyField: key},
		}, metav1.CreateOptions{})
		if err == nil {
			return &placementSigner{key: key}, nil
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
			return nil, fmt.Errorf("creating secret %s/%s (the placement signing key): %w", ns, PlacementKeySecret, err)
		}
	}
	return nil, fmt.Errorf("secret %s/%s: could not be read or created (does namespace %s exist?)", ns, PlacementKeySecret, ns)
}

func (s *placementSigner) mac(pod *v1.Pod, record string) []byte {
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
func (s *placementSigner) sign(pod *v1.Pod, record string) string {
	return base64.RawURLEncoding.EncodeToString(s.mac(pod, record))
}

// verify reports whether the pod's placement annotation is signed by this
// scheduler for this pod.
func (s *placementSigner) verify(pod *v1.Pod) bool {
	rec, ok := pod.Annotations[AnnotationPlacement]
	sig, ok2 := pod.Annotations[AnnotationPlacementSignature]
	if s == nil || !ok || !ok2 || pod.UID == "" {
		return false
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return false
	}
	return hmac.Equal(got, s.mac(pod, rec))
}

// PlacementSignature is the signature hivesched writes beside the pod's
// placement annotation, with the key of secret PlacementKeySecret. Tests use
// it to stand in for a scheduler that bound a pod before a restart.
func PlacementSignature(key []byte, pod *v1.Pod) string {
	return (&placementSigner{key: key}).sign(pod, pod.Annotations[AnnotationPlacement])
}

// LoadPlacementKey reads (or creates) the signing key as the plugin does.
func LoadPlacementKey(ctx context.Context, cs kubernetes.Interface) ([]byte, error) {
	s, err := loadPlacementKey(ctx, cs)
	if err != nil {
		return nil, err
	}
	return s.key, nil
}
