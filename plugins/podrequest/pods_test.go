package podrequest

import (
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// PodsOfNamespace on a store built like kube-scheduler's pod informer (no
// namespace index) gives what the namespace listing gives on an indexed
// store: the namespace's pods, whatever their labels, and no other.
func TestPodsOfNamespace(t *testing.T) {
	pods := []*v1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p1", Labels: map[string]string{"x": "1"}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p2"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "p1"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ab", Name: "p3"}},
	}
	plain := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	indexed := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, p := range pods {
		require.NoError(t, plain.Add(p))
		require.NoError(t, indexed.Add(p))
	}
	keys := func(ps []*v1.Pod) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Namespace+"/"+p.Name)
		}
		sort.Strings(out)
		return out
	}
	for _, ns := range []string{"a", "b", "ab", "none"} {
		got, err := PodsOfNamespace(corelisters.NewPodLister(plain), ns)
		require.NoError(t, err)
		want, err := corelisters.NewPodLister(indexed).Pods(ns).List(labels.Everything())
		require.NoError(t, err)
		require.Equal(t, keys(want), keys(got), "namespace %q", ns)
	}
	got, _ := PodsOfNamespace(corelisters.NewPodLister(plain), "a")
	require.Equal(t, []string{"a/p1", "a/p2"}, keys(got))
}
