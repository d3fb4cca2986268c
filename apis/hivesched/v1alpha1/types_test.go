/*
Copyright The hivesched Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package v1alpha1

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

func TestVirtualClusterDecode(t *testing.T) {
	s := runtime.NewScheme()
	require.NoError(t, AddToScheme(s))

	data := []byte(`{
  "apiVersion": "hivesched.io/v1alpha1",
  "kind": "VirtualCluster",
  "metadata": {"name": "vc1"},
  "spec": {
    "virtualCells": [{"cellType": "V100-RACK.V100-NODE", "cellNumber": 2}],
    "pinnedCells": [{"pinnedCellId": "rack0-node0"}],
    "allowedNamespaces": ["team-a", "*"],
    "state": "Draining"
  },
  "status": {
    "state": "Active",
    "cellsSummary": "2xV100-NODE,pinned:rack0-node0",
    "cells": [{"cellType": "V100-NODE", "level": 2, "totalCells": 2, "boundCells": 1,
               "badCells": 0, "usedLeafCells": 3, "freeLeafCells": 5}],
    "affinityGroups": {"pending": 1, "preempting": 0, "allocated": 2, "beingPreempted": 0},
    "totalLeafCells": 12,
    "usedLeafCells": 3,
    "freeLeafCells": 5,
    "opportunisticGroups": 2,
    "downgradedGroups": 1,
    "opportunisticLeafCells": 16
  }
}`)
	obj, gvk, err := serializer.NewCodecFactory(s, serializer.EnableStrict).UniversalDeserializer().Decode(data, nil, nil)
	require.NoError(t, err)
	assert.Equal(t, SchemeGroupVersion.WithKind("VirtualCluster"), *gvk)

	vc, ok := obj.(*VirtualCluster)
	require.True(t, ok)
	assert.Equal(t, VirtualClusterSpec{
		VirtualCells:      []VirtualCellSpec{{CellType: "V100-RACK.V100-NODE", CellNumber: 2}},
		PinnedCells:       []PinnedCellSpec{{PinnedCellID: "rack0-node0"}},
		AllowedNamespaces: []string{"team-a", AllNamespaces},
		State:             VirtualClusterDraining,
	}, vc.Spec)
	assert.Equal(t, int32(1), vc.Status.AffinityGroups.Pending)
	assert.Equal(t, int32(5), vc.Status.Cells[0].FreeLeafCells)
	assert.Equal(t, int32(5), vc.Status.FreeLeafCells)
	assert.Equal(t, int32(2), vc.Status.OpportunisticGroups)
	assert.Equal(t, int32(1), vc.Status.DowngradedGroups)
	assert.Equal(t, int32(16), vc.Status.OpportunisticLeafCells)

	// DeepCopy is independent of the original.
	cp := vc.DeepCopy()
	cp.Spec.AllowedNamespaces[0] = "other"
	assert.Equal(t, "team-a", vc.Spec.AllowedNamespaces[0])
}

func TestVirtualClusterStatusZeroCountsAreSerialized(t *testing.T) {
	// Printer columns read these fields; they must be present even when 0.
	b, err := json.Marshal(VirtualClusterStatus{Conditions: []metav1.Condition{}})
	require.NoError(t, err)
	assert.JSONEq(t, `{"affinityGroups":{"pending":0,"preempting":0,"allocated":0,"beingPreempted":0},
		"totalLeafCells":0,"usedLeafCells":0,"freeLeafCells":0,
		"opportunisticGroups":0,"downgradedGroups":0,"opportunisticLeafCells":0,
		"lostLeafCells":0,"foreignLeafCells":0,"lentLeafCells":0,"unavailableLeafCells":0}`, string(b))
}

func TestAffinityGroupRoundTrip(t *testing.T) {
	// The MEMBERS column reads membersSummary; counts are present when 0.
	b, err := json.Marshal(AffinityGroupStatus{Phase: AffinityGroupNew, MembersSummary: "0/2", Members: AffinityGroupMemberCounts{Total: 2}})
	require.NoError(t, err)
	assert.JSONEq(t, `{"phase":"New","membersSummary":"0/2","members":{"total":2,"bound":0,"running":0,"succeeded":0,"failed":0}}`, string(b))

	s := runtime.NewScheme()
	require.NoError(t, AddToScheme(s))
	gvks, _, err := s.ObjectKinds(&AffinityGroup{})
	require.NoError(t, err)
	assert.Equal(t, SchemeGroupVersion.WithKind("AffinityGroup"), gvks[0])
	ag := &AffinityGroup{Spec: AffinityGroupSpec{VirtualCluster: "vc", Members: []AffinityGroupMember{{PodNumber: 2, LeafCellNumber: 8}}}}
	cp := ag.DeepCopy()
	cp.Spec.Members[0].PodNumber = 3
	assert.Equal(t, int32(2), ag.Spec.Members[0].PodNumber)
}
