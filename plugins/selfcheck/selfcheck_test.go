package selfcheck

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var pods = schema.GroupResource{Resource: "pods"}

// The errors as the API server returns them (the messages of
// ValidatingAdmissionPolicy and webhook denials, and of RBAC).
var (
	policyDenial = apierrors.NewForbidden(pods, "g-0", errors.New(
		"ValidatingAdmissionPolicy 'hivesched-pod-placement' with binding 'hivesched-pod-placement' denied request: only the scheduler writes hivesched.io/placement"))
	policyInvalid = apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "g-0", field.ErrorList{field.Forbidden(field.NewPath("metadata"),
		"ValidatingAdmissionPolicy 'hivesched-pod-placement' with binding 'x' denied request: no")})
	webhookDenial = apierrors.NewForbidden(pods, "g-0", errors.New(`admission webhook "x.example.com" denied the request: no`))
	rbacDenial    = apierrors.NewForbidden(pods, "g-0", errors.New(`User "system:serviceaccount:kube-system:x" cannot patch resource "pods"`))
)

func TestRefused(t *testing.T) {
	assert.True(t, Refused(policyDenial))
	assert.True(t, Refused(policyInvalid))
	assert.True(t, Refused(webhookDenial))
	assert.False(t, Refused(rbacDenial), "RBAC's refusal of the verb is not admission's")
	assert.False(t, Refused(apierrors.NewConflict(pods, "g-0", errors.New("changed"))))
	assert.False(t, Refused(errors.New("connection refused")))
	assert.False(t, Refused(nil))
}

func TestReadyUntilAWriteOfTheKindGoesThrough(t *testing.T) {
	w := New()
	clock := time.Unix(1000, 0)
	w.now = func() time.Time { return clock }
	require.NoError(t, w.Ready())

	assert.False(t, w.Observe(WriteBinding, "ns/a", rbacDenial))
	require.NoError(t, w.Ready(), "not an admission refusal")

	assert.True(t, w.Observe(WriteBinding, "ns/g-0", policyDenial))
	err := w.Ready()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "binding write of ns/g-0")
	assert.Contains(t, err.Error(), "hivesched-pod-placement")

	clock = clock.Add(time.Second)
	assert.True(t, w.Observe(WriteDowngrade, "ns/low-0", policyInvalid))
	assert.Contains(t, w.Ready().Error(), "downgrade write of ns/low-0", "the latest refusal is told")

	w.Observe(WriteBinding, "ns/g-1", nil)
	assert.Contains(t, w.Ready().Error(), "downgrade write", "a binding going through does not clear the downgrade's refusal")
	w.Observe(WriteDowngrade, "ns/low-0", nil)
	require.NoError(t, w.Ready())
	assert.Equal(t, map[string]int64{WriteBinding: 1, WriteDowngrade: 1}, w.Totals())
}
