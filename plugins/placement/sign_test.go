package placement

import (
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestKeyNamespace (issue 28, finding 8): the key is created in the
// scheduler's own namespace: POD_NAMESPACE's (the Deployment's), else
// DefaultNamespace, never kube-system; a later start reads the same key.
func TestKeyNamespace(t *testing.T) {
	t.Setenv(envPodNamespace, "")
	cs := fake.NewClientset()
	key, err := LoadKey(t.Context(), cs)
	require.NoError(t, err)
	s, err := cs.CoreV1().Secrets(DefaultNamespace).Get(t.Context(), KeySecret, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, key, s.Data[placementKeyField])
	_, err = cs.CoreV1().Secrets(metav1.NamespaceSystem).Get(t.Context(), KeySecret, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "no key in kube-system: %v", err)
	again, err := LoadKey(t.Context(), cs)
	require.NoError(t, err)
	require.Equal(t, key, again)

	t.Setenv(envPodNamespace, "gpu-sched")
	other, err := LoadKey(t.Context(), cs)
	require.NoError(t, err)
	require.NotEqual(t, key, other, "another namespace, another key")
	_, err = cs.CoreV1().Secrets("gpu-sched").Get(t.Context(), KeySecret, metav1.GetOptions{})
	require.NoError(t, err)
}
